//! Elementwise bandwidth: `a + b` and `exp(a)` on f32[N], and a strided
//! (transposed) read, in GB/s of bytes read plus written; beside them, in the
//! same run, a raw wgpu copy kernel (one pipeline, one dispatch, no wgarray)
//! as the bandwidth ceiling. Each iteration evaluates and waits for the GPU.

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
    let d = device.wgpu_device();
    let q = device.wgpu_queue();
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(COPY_SHADER.into()),
    });
    let pipeline = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let make = || {
        d.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: (N * 4) as u64,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        })
    };
    let (src, dst) = (make(), make());
    let bg = d.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: src.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: dst.as_entire_binding(),
            },
        ],
    });
    let groups = (N / 4).div_ceil(256) as u32;
    let mut g = c.benchmark_group(format!("bandwidth ({:?})", device.backend()));
    g.throughput(Throughput::Bytes((2 * N * 4) as u64));
    g.bench_function("raw wgpu vec4 copy", |b| {
        b.iter(|| {
            let mut enc = d.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bg, &[]);
                pass.dispatch_workgroups(groups.min(65535), groups.div_ceil(65535), 1);
            }
            let idx = q.submit([enc.finish()]);
            d.poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: None,
            })
            .unwrap();
        })
    });
    g.finish();
}

fn wgarray_ops(c: &mut Criterion, device: &Device) {
    let a = Array::full(&[N], 1.0, DType::F32, device);
    let b = Array::full(&[N], 2.0, DType::F32, device);
    let m = Array::full(&[4096, N / 4096], 1.0, DType::F32, device);
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
    let device = Device::new_default().expect("a GPU adapter (see README)");
    raw_copy(c, &device);
    wgarray_ops(c, &device);
}

criterion_group! {
    name = elementwise;
    config = Criterion::default().sample_size(10);
    targets = benches
}
criterion_main!(elementwise);
