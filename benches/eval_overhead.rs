//! Eval overhead: 1000 chained `x + 1` on an f32[256] array, then read back.
//! Reported per op (divide the time by 1000). Beside it, in the same run, a
//! raw wgpu loop doing the same work the plain way: one pipeline, a fresh
//! bind group and uniform-free dispatch per op, one submit, one read-back.
//!
//! And the same small graph evaluated again and again (`exp(x) * 2 + 1`,
//! `sum`, read back, on f32[1024]), timed after 0, 10,000 and 30,000
//! earlier evals on the same device: the line is flat when nothing a
//! repeated eval does changes with the count (issue: a step of 2.5x after
//! about 2,000 evals on Vulkan).

mod common;

use common::Raw;
use criterion::{BenchmarkId, Criterion};
use wgarray::{Array, DType, Device};

const OPS: usize = 1000;
const N: usize = 256;

fn wgarray_chain(c: &mut Criterion, device: &Device) {
    let x = Array::from_slice(&vec![0.0f32; N], &[N], device).unwrap();
    let one = Array::scalar(1.0, DType::F32, device).unwrap();
    c.bench_function(
        &format!(
            "wgarray: {OPS} chained x+1 on f32[{N}] + read back ({:?})",
            device.backend()
        ),
        |b| {
            b.iter(|| {
                let mut y = x.clone();
                for _ in 0..OPS {
                    y = (&y + &one).unwrap();
                }
                let v = y.to_vec::<f32>().unwrap();
                assert_eq!(v[0], OPS as f32);
            })
        },
    );
}

const RAW_SHADER: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x < arrayLength(&dst) { dst[gid.x] = src[gid.x] + 1.0; }
}
"#;

fn raw_wgpu_chain(c: &mut Criterion, device: &Device) {
    let raw = Raw::new(device);
    let pipeline = raw.pipeline(RAW_SHADER);
    let bufs: Vec<wgpu::Buffer> = (0..2)
        .map(|_| raw.buffer((N * 4) as u64, common::STORAGE_RW))
        .collect();
    let staging = raw.buffer(
        (N * 4) as u64,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    let layout = pipeline.get_bind_group_layout(0);
    c.bench_function(
        &format!(
            "raw wgpu: {OPS} chained x+1 on f32[{N}] + read back ({:?})",
            device.backend()
        ),
        |b| {
            b.iter(|| {
                raw.queue
                    .write_buffer(&bufs[0], 0, bytemuck::cast_slice(&vec![0.0f32; N]));
                let mut enc = raw.encoder();
                {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    pass.set_pipeline(&pipeline);
                    for i in 0..OPS {
                        let (src, dst) = (&bufs[i % 2], &bufs[(i + 1) % 2]);
                        let bg = raw.bind_buffers(&layout, [src, dst]);
                        pass.set_bind_group(0, &bg, &[]);
                        pass.dispatch_workgroups(1, 1, 1);
                    }
                }
                let v = raw.submit_and_read_f32(enc, &bufs[OPS % 2], &staging);
                assert_eq!(v[0], OPS as f32);
            })
        },
    );
}

fn repeated_eval(c: &mut Criterion, device: &Device) {
    let n = 1024;
    let xv: Vec<f32> = (0..n).map(|i| i as f32 / n as f32).collect();
    let x = Array::from_slice(&xv, &[n], device).unwrap();
    let once = || {
        let y = ((x.exp().unwrap() * 2.0).unwrap() + 1.0).unwrap();
        y.sum(wgarray::Axes::All, false)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    let mut done = 0usize;
    let mut g = c.benchmark_group(format!(
        "repeated eval: exp(x) * 2 + 1, sum, read back, f32[{n}] ({:?})",
        device.backend()
    ));
    g.warm_up_time(std::time::Duration::from_millis(100))
        .measurement_time(std::time::Duration::from_secs(1));
    for before in [0usize, 10_000, 30_000] {
        while done < before {
            once();
            done += 1;
        }
        g.bench_function(BenchmarkId::new("after evals", before), |b| {
            b.iter(|| {
                once();
                done += 1;
            })
        });
    }
    g.finish();
}

common::bench_main!(
    eval_overhead,
    Criterion::default().sample_size(20),
    wgarray_chain,
    raw_wgpu_chain,
    repeated_eval
);
