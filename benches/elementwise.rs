//! Elementwise bandwidth: `a + b` and `exp(a)` on f32[N], and a strided
//! (transposed) read, in GB/s of bytes read plus written; beside them, in the
//! same run, a raw wgpu copy kernel (one pipeline, one dispatch, no wgarray)
//! as the bandwidth ceiling. Each iteration evaluates and waits for the GPU.

mod common;

use common::Raw;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
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
        b.iter(|| {
            let mut enc = raw.encoder();
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bg, &[]);
                pass.dispatch_workgroups(groups.min(65535), groups.div_ceil(65535), 1);
            }
            raw.submit_and_wait(enc);
        })
    });
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
    g.finish();
}

fn benches(c: &mut Criterion) {
    let device = common::device();
    raw_copy(c, &device);
    wgarray_ops(c, &device);
}

criterion_group! {
    name = elementwise;
    config = Criterion::default().sample_size(10);
    targets = benches
}
criterion_main!(elementwise);
