//! Shared setup for the benchmarks: the device they run on, and the raw
//! wgpu pieces of the hand-written comparison loops that run beside
//! wgarray in the same process (pipelines, buffers, bind groups, submit and
//! wait, read-back), on that same device, with no wgarray code in between.
//!
//! Each bench includes it with `mod common;`; not every bench uses all of it.
#![allow(dead_code)]

use wgarray::Device;

/// The device a benchmark runs on: the one `WGARRAY_BACKEND` /
/// `WGARRAY_ADAPTER` pick, as in the tests, once its GEMM warm-up (the
/// tuning file's kernels, compiled on a thread) has ended, so that no
/// compile shares the CPU with a timing. Panics when there is none.
pub fn device() -> Device {
    let device = Device::new_default().expect("a GPU adapter (see README)");
    device.wait_warm_up();
    device
}

/// What wgarray's pool asks of every storage buffer: any kernel input or
/// output, copied to and from.
pub const STORAGE_RW: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// The wgpu device and queue of a wgarray [`Device`], for raw wgpu work.
pub struct Raw<'a> {
    pub device: &'a wgpu::Device,
    pub queue: &'a wgpu::Queue,
}

impl<'a> Raw<'a> {
    pub fn new(device: &'a Device) -> Self {
        Raw {
            device: device.wgpu_device(),
            queue: device.wgpu_queue(),
        }
    }

    /// A compute pipeline for the entry point `main` of `wgsl`, its layout
    /// derived from the shader (so bind group 0 is `get_bind_group_layout(0)`).
    pub fn pipeline(&self, wgsl: &str) -> wgpu::ComputePipeline {
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: None,
                source: wgpu::ShaderSource::Wgsl(wgsl.into()),
            });
        self.device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: None,
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
    }

    /// An unmapped buffer of `bytes` bytes.
    pub fn buffer(&self, bytes: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes,
            usage,
            mapped_at_creation: false,
        })
    }

    /// A bind group of `layout` with `buffers[i]`, whole, at binding `i`.
    /// The entries live on the stack: cheap enough to build per dispatch.
    pub fn bind_buffers<const N: usize>(
        &self,
        layout: &wgpu::BindGroupLayout,
        buffers: [&wgpu::Buffer; N],
    ) -> wgpu::BindGroup {
        let entries: [wgpu::BindGroupEntry; N] = std::array::from_fn(|i| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: buffers[i].as_entire_binding(),
        });
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout,
            entries: &entries,
        })
    }

    /// A fresh command encoder.
    pub fn encoder(&self) -> wgpu::CommandEncoder {
        self.device.create_command_encoder(&Default::default())
    }

    /// Block until submission `idx` has finished on the device.
    pub fn wait(&self, idx: wgpu::SubmissionIndex) {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: None,
            })
            .unwrap();
    }

    /// One dispatch of `pipeline` with `bind` over `groups` workgroups
    /// (folded into y past 65535), submitted alone; blocks until it ran.
    pub fn dispatch_and_wait(
        &self,
        pipeline: &wgpu::ComputePipeline,
        bind: &wgpu::BindGroup,
        groups: u32,
    ) {
        let mut enc = self.encoder();
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, bind, &[]);
            pass.dispatch_workgroups(groups.min(65535), groups.div_ceil(65535), 1);
        }
        self.submit_and_wait(enc);
    }

    /// Submit `enc` and block until the device has run it.
    pub fn submit_and_wait(&self, enc: wgpu::CommandEncoder) {
        let idx = self.queue.submit([enc.finish()]);
        self.wait(idx);
    }

    /// Copy `src` into `staging` (`MAP_READ | COPY_DST`, as large as `src`)
    /// at the end of `enc`, submit, wait, and return its contents as f32.
    pub fn submit_and_read_f32(
        &self,
        mut enc: wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        staging: &wgpu::Buffer,
    ) -> Vec<f32> {
        enc.copy_buffer_to_buffer(src, 0, staging, 0, staging.size());
        let idx = self.queue.submit([enc.finish()]);
        staging.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        self.wait(idx);
        let v = bytemuck::pod_collect_to_vec(&staging.slice(..).get_mapped_range().unwrap());
        staging.unmap();
        v
    }
}

/// A bench binary's `main`: criterion group `$name` with `$config`, whose
/// one target runs each `$target(c, &device)` on [`device`]
/// (`benches/matmul.rs` makes devices of its own).
#[allow(unused_macros)]
macro_rules! bench_main {
    ($name:ident, $config:expr, $($target:path),+ $(,)?) => {
        fn benches(c: &mut criterion::Criterion) {
            let device = common::device();
            $($target(c, &device);)+
        }

        criterion::criterion_group! {
            name = $name;
            config = $config;
            targets = benches
        }
        criterion::criterion_main!($name);
    };
}
#[allow(unused_imports)]
pub(crate) use bench_main;
