//! Eval overhead: 1000 chained `x + 1` on an f32[256] array, then read back.
//! Reported per op (divide the time by 1000). Beside it, in the same run, a
//! raw wgpu loop doing the same work the plain way: one pipeline, a fresh
//! bind group and uniform-free dispatch per op, one submit, one read-back.

mod common;

use common::Raw;
use criterion::Criterion;
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

common::bench_main!(
    eval_overhead,
    Criterion::default().sample_size(20),
    wgarray_chain,
    raw_wgpu_chain
);
