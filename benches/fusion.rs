//! Fusion and `compile`, each beside the unfused path in the same run:
//! - `chain`: 1000 chained `x + 1.0` on f32[256], then one read-back: fused
//!   (one kernel), unfused (`set_fusion(false)`: one kernel per op), and
//!   through a compiled function (no graph building from user code, no
//!   planning); unfused with an array operand, and unfused with an eval
//!   after every op (200 ops); per op, divide by 1000 (200);
//! - `chain20`: a 20-op elementwise chain on f32[16M] (64 MiB in, 64 MiB
//!   out), with five `tanh` among its ops and with `negative` in their
//!   place (arithmetic only), each fused and unfused, beside a raw wgpu
//!   vec4 copy of the same bytes (criterion prints bytes per second:
//!   compare them);
//! - `softmax`, `layer_norm` and `rms_norm` on f32[4096, 1024], fused and
//!   unfused (each is one kernel either way: the one-pass row kernel);
//! - `mlp`: a transformer MLP block (`layer_norm(x + gelu(x W1 + b1) W2 + b2)`,
//!   x f32[128, 384], W1 [384, 1536]), eager (with and without the GEMM
//!   epilogues fused) and compiled.
//!
//! `cargo bench --bench fusion`; docs/PERFORMANCE.md records the figures.

mod common;

use common::{Raw, STORAGE_RW};
use criterion::{Criterion, Throughput};
use wgarray::{Array, Device, compile};

fn ramp(n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| ((i % 97) as f32 - 48.0) * scale).collect()
}

fn chain(c: &mut Criterion, d: &Device) {
    const OPS: usize = 1000;
    let x = Array::from_slice(&vec![0.0f32; 256], &[256], d).unwrap();
    let mut g = c.benchmark_group(format!("chain {OPS} x+1 f32[256] ({:?})", d.backend()));
    for fusion in [true, false] {
        g.bench_function(if fusion { "fused" } else { "unfused" }, |b| {
            d.set_fusion(fusion);
            b.iter(|| {
                let mut y = x.clone();
                for _ in 0..OPS {
                    y = (&y + 1.0).unwrap();
                }
                assert_eq!(y.to_vec::<f32>().unwrap()[0], OPS as f32);
            })
        });
    }
    // The eager path's other two shapes (issue 19 item 7), unfused: an
    // array operand instead of the scalar, and an eval after every op.
    let one = Array::from_slice(&[1.0f32], &[1], d).unwrap();
    d.set_fusion(false);
    g.bench_function("unfused, array operand", |b| {
        b.iter(|| {
            let mut y = x.clone();
            for _ in 0..OPS {
                y = (&y + &one).unwrap();
            }
            assert_eq!(y.to_vec::<f32>().unwrap()[0], OPS as f32);
        })
    });
    g.bench_function("eval after every op (x200, per op: /200)", |b| {
        b.iter(|| {
            let mut y = x.clone();
            for _ in 0..200 {
                y = (&y + 1.0).unwrap();
                y.eval().unwrap();
            }
            assert_eq!(y.to_vec::<f32>().unwrap()[0], 200.0);
        })
    });
    d.set_fusion(true);
    let f = compile(|x: &[Array]| {
        let mut y = x[0].clone();
        for _ in 0..OPS {
            y = (&y + 1.0)?;
        }
        Ok(vec![y])
    });
    g.bench_function("compiled", |b| {
        b.iter(|| {
            let y = f.call(&[&x]).unwrap().remove(0);
            assert_eq!(y.to_vec::<f32>().unwrap()[0], OPS as f32);
        })
    });
    g.finish();
}

/// 20 elementwise ops that keep values in a small range: five rounds of
/// `(y * 0.5 + 0.25 i)`, then `tanh` (`transcendental`) or `negative`,
/// then `abs`. With `tanh` the fused kernel is compute-bound on a CPU
/// adapter (five 1.5-ulp `tanh` per element); with `negative` it is the
/// memory-bound chain the bandwidth floor is about.
fn twenty(x: &Array, transcendental: bool) -> Array {
    let mut y = x.clone();
    for i in 0..5 {
        y = (&y * 0.5).unwrap();
        y = (&y + 0.25 * i as f64).unwrap();
        y = if transcendental {
            y.tanh().unwrap()
        } else {
            y.negative().unwrap()
        };
        y = y.abs().unwrap();
    }
    y
}

fn chain20(c: &mut Criterion, d: &Device) {
    const N: usize = 1 << 24;
    let x = Array::from_slice(&ramp(N, 1e-2), &[N], d).unwrap();
    let mut g = c.benchmark_group(format!("chain20 f32[16M] ({:?})", d.backend()));
    g.sample_size(10);
    // Bytes a single pass moves: read the input, write the output.
    g.throughput(Throughput::Bytes(2 * 4 * N as u64));
    for (transcendental, name) in [(true, "tanh"), (false, "arithmetic")] {
        for fusion in [true, false] {
            let tag = if fusion { "fused" } else { "unfused" };
            g.bench_function(format!("{name} {tag}"), |b| {
                d.set_fusion(fusion);
                b.iter(|| {
                    let y = twenty(&x, transcendental);
                    y.eval().unwrap();
                    d.synchronize().unwrap();
                })
            });
        }
    }
    d.set_fusion(true);
    // A raw vec4 copy of the same bytes, the bandwidth to compare with.
    let raw = Raw::new(d);
    let pipeline = raw.pipeline(
        "@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
         @group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
         @compute @workgroup_size(256)
         fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
             let i = g.x + g.y * n.x * 256u;
             if i < arrayLength(&src) { dst[i] = src[i]; }
         }",
    );
    let (src, dst) = (
        raw.buffer(4 * N as u64, STORAGE_RW),
        raw.buffer(4 * N as u64, STORAGE_RW),
    );
    let bind = raw.bind_buffers(&pipeline.get_bind_group_layout(0), [&src, &dst]);
    let groups = (N / 4).div_ceil(256) as u32;
    g.bench_function("raw wgpu vec4 copy", |b| {
        b.iter(|| raw.dispatch_and_wait(&pipeline, &bind, groups))
    });
    g.finish();
}

fn normalisations(c: &mut Criterion, d: &Device) {
    let (rows, cols) = (4096, 1024);
    let x = Array::from_slice(&ramp(rows * cols, 0.05), &[rows, cols], d).unwrap();
    let w = Array::from_slice(&ramp(cols, 0.01), &[cols], d).unwrap();
    let bias = Array::from_slice(&ramp(cols, 0.02), &[cols], d).unwrap();
    let mut g = c.benchmark_group(format!("norm f32[4096, 1024] ({:?})", d.backend()));
    g.sample_size(10);
    g.throughput(Throughput::Bytes(2 * 4 * (rows * cols) as u64));
    for fusion in [true, false] {
        let tag = if fusion { "fused" } else { "unfused" };
        g.bench_function(format!("softmax {tag}"), |b| {
            d.set_fusion(fusion);
            b.iter(|| {
                x.softmax(-1).unwrap().eval().unwrap();
                d.synchronize().unwrap();
            })
        });
        g.bench_function(format!("layer_norm {tag}"), |b| {
            d.set_fusion(fusion);
            b.iter(|| {
                x.layer_norm(Some(&w), Some(&bias), 1e-5)
                    .unwrap()
                    .eval()
                    .unwrap();
                d.synchronize().unwrap();
            })
        });
        g.bench_function(format!("rms_norm {tag}"), |b| {
            d.set_fusion(fusion);
            b.iter(|| {
                x.rms_norm(Some(&w), 1e-5).unwrap().eval().unwrap();
                d.synchronize().unwrap();
            })
        });
    }
    d.set_fusion(true);
    g.finish();
}

fn mlp_block(x: &Array, p: &[Array]) -> wgarray::Result<Array> {
    mlp_with(x, p, &|h| Ok(h))
}

/// The MLP block with `via` applied to each GEMM's product before its
/// epilogue reads it.
fn mlp_with(
    x: &Array,
    p: &[Array],
    via: &dyn Fn(Array) -> wgarray::Result<Array>,
) -> wgarray::Result<Array> {
    let h = via(x.matmul(&p[0])?)?;
    let h = (&h + &p[1])?.gelu()?;
    let y = (&via(h.matmul(&p[2])?)? + &p[3])?;
    (x + &y)?.layer_norm(Some(&p[4]), Some(&p[5]), 1e-5)
}

fn mlp(c: &mut Criterion, d: &Device) {
    let (m, k, h) = (128, 384, 1536);
    let a = |n: usize, shape: &[usize], s: f32| Array::from_slice(&ramp(n, s), shape, d).unwrap();
    let x = a(m * k, &[m, k], 0.02);
    let params = vec![
        a(k * h, &[k, h], 1e-3),
        a(h, &[h], 1e-2),
        a(h * k, &[h, k], 1e-3),
        a(k, &[k], 1e-2),
        a(k, &[k], 1e-2),
        a(k, &[k], 1e-2),
    ];
    let mut g = c.benchmark_group(format!("mlp [128,384]x[384,1536] ({:?})", d.backend()));
    g.sample_size(10);
    g.bench_function("eager", |b| {
        b.iter(|| {
            mlp_block(&x, &params).unwrap().eval().unwrap();
            d.synchronize().unwrap();
        })
    });
    // The same block as before GEMM epilogues were fused: each product is
    // read through a no-op view (expand, squeeze), which the planner does
    // not fold into a GEMM, so the GEMM writes it and the bias and gelu run
    // as one fused elementwise kernel.
    g.bench_function("eager, epilogue not fused", |b| {
        b.iter(|| {
            let via = |h: Array| h.expand_dims(0)?.squeeze(0);
            mlp_with(&x, &params, &via).unwrap().eval().unwrap();
            d.synchronize().unwrap();
        })
    });
    let captured = params.clone();
    let f = compile(move |x: &[Array]| Ok(vec![mlp_block(&x[0], &captured)?]));
    g.bench_function("compiled", |b| {
        b.iter(|| {
            f.call(&[&x]).unwrap();
            d.synchronize().unwrap();
        })
    });
    g.finish();
}

common::bench_main!(
    fusion,
    Criterion::default(),
    chain,
    chain20,
    normalisations,
    mlp
);
