//! Elementwise bandwidth: `a + b` and `exp(a)` on f32[N], `a + b` on
//! f16[N], and a strided (transposed) read, in GB/s of bytes read plus
//! written; beside them, in the same run, a raw wgpu copy kernel (one
//! pipeline, one dispatch, no wgarray) as the bandwidth ceiling, and raw
//! `a + b` kernels in four forms (one element per thread, a `vec4<u32>`
//! binding, four `u32` loads in a loop or unrolled): what chose the form of
//! the wide elementwise variant (src/kernels/program/wide.rs). Each
//! iteration evaluates and waits for the GPU.

mod common;

use common::Raw;
use criterion::{Criterion, Throughput};
use wgarray::{Array, DType, Device};

const N: usize = 1 << 24; // 16M f32 = 64 MiB per array

const COPY_SHADER: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if i < arrayLength(&dst) { dst[i] = src[i]; }
}
"#;

fn raw_copy(c: &mut Criterion, device: &Device) {
    let raw = Raw::new(device);
    let pipeline = raw.pipeline(COPY_SHADER);
    let usage = wgpu::BufferUsages::STORAGE;
    let (src, dst) = (
        raw.buffer((N * 4) as u64, usage),
        raw.buffer((N * 4) as u64, usage),
    );
    let bg = raw.bind_buffers(&pipeline.get_bind_group_layout(0), [&src, &dst]);
    let groups = (N / 4).div_ceil(256) as u32;
    let mut g = c.benchmark_group(format!("bandwidth ({:?})", device.backend()));
    g.throughput(Throughput::Bytes((2 * N * 4) as u64));
    g.bench_function("raw wgpu vec4 copy", |b| {
        b.iter(|| raw.dispatch_and_wait(&pipeline, &bg, groups))
    });
    g.finish();
}

/// Which form of `a + b` gets the bandwidth (a measurement for the vec4
/// path of the generated kernels): one element per thread over
/// `array<u32>`, four per thread over `array<vec4<u32>>` bindings, and four
/// per thread as four scalar loads of `array<u32>`.
fn raw_add_forms(c: &mut Criterion, device: &Device) {
    let raw = Raw::new(device);
    let usage = wgpu::BufferUsages::STORAGE;
    let bufs: Vec<wgpu::Buffer> = (0..3).map(|_| raw.buffer((N * 4) as u64, usage)).collect();
    let head = "@compute @workgroup_size(256)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n    let t = gid.x + gid.y * nwg.x * 256u;\n";
    let forms = [
        (
            "raw a + b, 1 per thread, array<u32>",
            "u32",
            1,
            "if t < arrayLength(&o) { o[t] = bitcast<u32>(bitcast<f32>(x[t]) + bitcast<f32>(y[t])); }",
        ),
        (
            "raw a + b, vec4 per thread, array<vec4<u32>>",
            "vec4<u32>",
            4,
            "if t < arrayLength(&o) { o[t] = bitcast<vec4<u32>>(bitcast<vec4<f32>>(x[t]) + bitcast<vec4<f32>>(y[t])); }",
        ),
        (
            "raw a + b, 4 per thread, 4 loads of array<u32>",
            "u32",
            4,
            "let e = 4u * t; if e < arrayLength(&o) { for (var q = 0u; q < 4u; q++) { o[e + q] = bitcast<u32>(bitcast<f32>(x[e + q]) + bitcast<f32>(y[e + q])); } }",
        ),
        (
            "raw a + b, 4 per thread, unrolled loads of array<u32>",
            "u32",
            4,
            "let e = 4u * t; if e < arrayLength(&o) { let a = vec4<u32>(x[e], x[e + 1u], x[e + 2u], x[e + 3u]); let b = vec4<u32>(y[e], y[e + 1u], y[e + 2u], y[e + 3u]); let r = bitcast<vec4<u32>>(bitcast<vec4<f32>>(a) + bitcast<vec4<f32>>(b)); o[e] = r.x; o[e + 1u] = r.y; o[e + 2u] = r.z; o[e + 3u] = r.w; }",
        ),
    ];
    let mut g = c.benchmark_group(format!("bandwidth ({:?})", device.backend()));
    g.throughput(Throughput::Bytes((3 * N * 4) as u64));
    for (name, ty, per, body) in forms {
        let src = format!(
            "@group(0) @binding(0) var<storage, read> x: array<{ty}>;\n@group(0) @binding(1) var<storage, read> y: array<{ty}>;\n@group(0) @binding(2) var<storage, read_write> o: array<{ty}>;\n{head}    {body}\n}}\n"
        );
        let pipeline = raw.pipeline(&src);
        let bg = raw.bind_buffers(
            &pipeline.get_bind_group_layout(0),
            [&bufs[0], &bufs[1], &bufs[2]],
        );
        let groups = (N / per).div_ceil(256) as u32;
        g.bench_function(name, |b| {
            b.iter(|| raw.dispatch_and_wait(&pipeline, &bg, groups))
        });
    }
    g.finish();
}

fn wgarray_ops(c: &mut Criterion, device: &Device) {
    let a = Array::full(&[N], 1.0, DType::F32, device).unwrap();
    let b = Array::full(&[N], 2.0, DType::F32, device).unwrap();
    let m = Array::full(&[4096, N / 4096], 1.0, DType::F32, device).unwrap();
    wgarray::eval(&[&a, &b, &m]).unwrap();
    let mut g = c.benchmark_group(format!("bandwidth ({:?})", device.backend()));
    let run = |x: Array| {
        x.eval().unwrap();
        device.synchronize().unwrap();
    };
    g.throughput(Throughput::Bytes((2 * N * 4) as u64));
    g.bench_function("wgarray exp(a)", |bch| bch.iter(|| run(a.exp().unwrap())));
    g.bench_function("wgarray transpose(m).contiguous()", |bch| {
        bch.iter(|| run(m.transpose().contiguous().unwrap()))
    });
    g.throughput(Throughput::Bytes((3 * N * 4) as u64));
    g.bench_function("wgarray a + b", |bch| bch.iter(|| run((&a + &b).unwrap())));
    // f16: half the bytes, and the conversions to and from f32 in integer
    // code (wgsl/convert.wgsl) per element.
    let (ha, hb) = (a.astype(DType::F16).unwrap(), b.astype(DType::F16).unwrap());
    wgarray::eval(&[&ha, &hb]).unwrap();
    g.throughput(Throughput::Bytes((3 * N * 2) as u64));
    g.bench_function("wgarray f16 a + b", |bch| {
        bch.iter(|| run((&ha + &hb).unwrap()))
    });
    g.finish();
}

common::bench_main!(
    elementwise,
    Criterion::default().sample_size(10),
    raw_copy,
    raw_add_forms,
    wgarray_ops
);
