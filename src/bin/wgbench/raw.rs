//! The raw-wgpu baselines, written the plain way with no wgarray in
//! between: a vec4 copy kernel, a loop of small dispatches, and
//! `create_buffer`. They run on the wgarray device's own wgpu device and
//! queue, so both sides of each comparison share the adapter and the run.
//!
//! Here wgbench owns the encoder, so the copy kernel is timed with GPU
//! timestamps at the start and end of its compute pass when the adapter has
//! `TIMESTAMP_QUERY` (the host time is kept beside it).

use std::time::Instant;

use wgarray::Device;

use crate::measure::{CaseResult, Outcome, Sample};

/// A vec4 copy: `{WG}` invocations per workgroup, `{PER}` vec4 each, the
/// k-th at `i + k * {STRIDE}` from the invocation's first (`{STRIDE}` is 1
/// for a block of consecutive vec4s per invocation, or the total number of
/// invocations for a grid-stride loop, where neighbouring invocations read
/// neighbouring vec4s at each step).
const COPY_SHADER: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@compute @workgroup_size({WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    let t = gid.x + gid.y * groups.x * {WG}u;
    let total = groups.x * groups.y * {WG}u;
    let stride = {STRIDE};
    let first = select(t, t * {PER}u, stride == 1u);
    for (var k = 0u; k < {PER}u; k++) {
        let i = first + k * stride;
        if i < arrayLength(&dst) { dst[i] = src[i]; }
    }
}
"#;

/// A copy kernel's shape: invocations per workgroup, vec4s per invocation,
/// and whether an invocation's vec4s are consecutive (else grid-stride).
#[derive(Clone, Copy, Debug)]
pub struct CopyKind {
    pub workgroup: u32,
    pub per_thread: u32,
    pub block: bool,
}

/// The copy kernels the bandwidth baseline tries; the fastest is the
/// ceiling the other figures are a fraction of.
pub const COPY_KINDS: [CopyKind; 4] = [
    CopyKind {
        workgroup: 256,
        per_thread: 1,
        block: false,
    },
    CopyKind {
        workgroup: 64,
        per_thread: 4,
        block: false,
    },
    CopyKind {
        workgroup: 64,
        per_thread: 4,
        block: true,
    },
    CopyKind {
        workgroup: 256,
        per_thread: 8,
        block: false,
    },
];

impl CopyKind {
    fn source(self) -> String {
        let stride = if self.block { "1u" } else { "total" };
        COPY_SHADER
            .replace("{WG}", &self.workgroup.to_string())
            .replace("{PER}", &self.per_thread.to_string())
            .replace("{STRIDE}", stride)
    }
}

const ADD_ONE_SHADER: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x < arrayLength(&dst) { dst[gid.x] = src[gid.x] + 1.0; }
}
"#;

const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// Run `f` inside validation and out-of-memory error scopes: what wgpu
/// rejects becomes a failure, not a log line.
fn scoped<T>(device: &Device, f: impl FnOnce() -> T) -> CaseResult<T> {
    let d = device.wgpu_device();
    let oom = d.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = d.push_error_scope(wgpu::ErrorFilter::Validation);
    let out = f();
    let v = pollster::block_on(validation.pop());
    let o = pollster::block_on(oom.pop());
    match (v, o) {
        (Some(e), _) | (None, Some(e)) => Err(Outcome::Fail(format!("wgpu: {e}"))),
        (None, None) => Ok(out),
    }
}

fn wait(device: &Device, idx: wgpu::SubmissionIndex) -> CaseResult<()> {
    device
        .wgpu_device()
        .poll(wgpu::PollType::Wait {
            submission_index: Some(idx),
            timeout: None,
        })
        .map(|_| ())
        .map_err(|e| Outcome::Fail(format!("waiting for the device: {e}")))
}

fn pipeline(device: &Device, source: &str) -> wgpu::ComputePipeline {
    let d = device.wgpu_device();
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("wgbench raw"),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("wgbench raw"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    })
}

fn buffer(device: &Device, bytes: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
    device.wgpu_device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("wgbench raw"),
        size: bytes,
        usage,
        mapped_at_creation: false,
    })
}

fn bind_group(
    device: &Device,
    layout: &wgpu::BindGroupLayout,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
) -> wgpu::BindGroup {
    device
        .wgpu_device()
        .create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout,
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
        })
}

/// Map `staging` (already filled by a submitted copy) and read it.
fn read_mapped(device: &Device, staging: &wgpu::Buffer) -> CaseResult<Vec<u8>> {
    staging.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    device
        .wgpu_device()
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| Outcome::Fail(format!("waiting for the device: {e}")))?;
    let bytes = staging
        .slice(..)
        .get_mapped_range()
        .map_err(|e| Outcome::Fail(format!("mapping a read-back buffer: {e}")))?
        .to_vec();
    staging.unmap();
    Ok(bytes)
}

/// Copy `src` to a fresh buffer and read it back.
fn read_buffer(device: &Device, src: &wgpu::Buffer) -> CaseResult<Vec<u8>> {
    let staging = buffer(
        device,
        src.size(),
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    let mut enc = device
        .wgpu_device()
        .create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(src, 0, &staging, 0, src.size());
    device.wgpu_queue().submit([enc.finish()]);
    read_mapped(device, &staging)
}

/// Timestamps at the start and end of one compute pass.
struct PassTimer {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    staging: wgpu::Buffer,
    /// Nanoseconds per tick.
    period_ns: f64,
}

impl PassTimer {
    /// `None` without `TIMESTAMP_QUERY`.
    fn new(device: &Device) -> Option<PassTimer> {
        if !device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
            return None;
        }
        let queries = device
            .wgpu_device()
            .create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("wgbench timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
        Some(PassTimer {
            queries,
            resolved: buffer(
                device,
                16,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            staging: buffer(
                device,
                16,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
            period_ns: device.wgpu_queue().get_timestamp_period() as f64,
        })
    }

    fn writes(&self) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }
    }

    fn resolve(&self, enc: &mut wgpu::CommandEncoder) {
        enc.resolve_query_set(&self.queries, 0..2, &self.resolved, 0);
        enc.copy_buffer_to_buffer(&self.resolved, 0, &self.staging, 0, 16);
    }

    /// Seconds between the two timestamps (after the submission is done).
    fn seconds(&self, device: &Device) -> CaseResult<f64> {
        let b = read_mapped(device, &self.staging)?;
        let t: Vec<u64> = bytemuck::pod_collect_to_vec(&b);
        Ok(t[1].saturating_sub(t[0]) as f64 * self.period_ns * 1e-9)
    }
}

/// A vec4 copy of `n` f32 from one buffer to another by one of the
/// [`COPY_KINDS`].
pub struct Copy {
    device: Device,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    dst: wgpu::Buffer,
    groups: (u32, u32),
    timer: Option<PassTimer>,
}

impl Copy {
    /// Upload `data` (a multiple of 4 elements) and prepare the copy.
    pub fn new(device: &Device, data: &[f32], kind: CopyKind) -> CaseResult<Copy> {
        assert!(
            data.len().is_multiple_of(4),
            "the copy kernel moves whole vec4s"
        );
        scoped(device, || {
            let bytes = std::mem::size_of_val(data) as u64;
            let src = buffer(device, bytes, STORAGE);
            device
                .wgpu_queue()
                .write_buffer(&src, 0, bytemuck::cast_slice(data));
            let dst = buffer(device, bytes, STORAGE);
            let pipeline = pipeline(device, &kind.source());
            let bind_group = bind_group(device, &pipeline.get_bind_group_layout(0), &src, &dst);
            let groups = (data.len() as u32 / 4).div_ceil(kind.workgroup * kind.per_thread);
            let max = device.limits().max_compute_workgroups_per_dimension;
            let x = groups.min(max);
            Copy {
                device: device.clone(),
                pipeline,
                bind_group,
                dst,
                groups: (x, groups.div_ceil(x)),
                timer: PassTimer::new(device),
            }
        })
    }

    /// One copy: encode, submit, wait. GPU seconds when timestamps exist.
    pub fn run(&self) -> CaseResult<Sample> {
        let t = Instant::now();
        let mut enc = self
            .device
            .wgpu_device()
            .create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("wgbench copy"),
                timestamp_writes: self.timer.as_ref().map(PassTimer::writes),
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(self.groups.0, self.groups.1, 1);
        }
        if let Some(timer) = &self.timer {
            timer.resolve(&mut enc);
        }
        let idx = self.device.wgpu_queue().submit([enc.finish()]);
        wait(&self.device, idx)?;
        let host_s = t.elapsed().as_secs_f64();
        let gpu_s = match &self.timer {
            Some(timer) => Some(timer.seconds(&self.device)?),
            None => None,
        };
        Ok(Sample { host_s, gpu_s })
    }

    /// The destination buffer's contents.
    pub fn output(&self) -> CaseResult<Vec<f32>> {
        Ok(bytemuck::pod_collect_to_vec(&read_buffer(
            &self.device,
            &self.dst,
        )?))
    }
}

/// `ops` dispatches of `x + 1` on `f32[256]`, ping-ponging between two
/// buffers, a fresh bind group per dispatch, one compute pass, one submit,
/// then the result read back: what wgarray's eval of the same chain does,
/// without the graph.
pub struct DispatchLoop {
    device: Device,
    pipeline: wgpu::ComputePipeline,
    bufs: [wgpu::Buffer; 2],
    staging: wgpu::Buffer,
    ops: usize,
}

/// Elements per op in the dispatch chains.
pub const CHAIN_ELEMENTS: usize = 256;

impl DispatchLoop {
    pub fn new(device: &Device, ops: usize) -> CaseResult<DispatchLoop> {
        scoped(device, || {
            let bytes = (CHAIN_ELEMENTS * 4) as u64;
            DispatchLoop {
                device: device.clone(),
                pipeline: pipeline(device, ADD_ONE_SHADER),
                bufs: [
                    buffer(device, bytes, STORAGE),
                    buffer(device, bytes, STORAGE),
                ],
                staging: buffer(
                    device,
                    bytes,
                    wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                ),
                ops,
            }
        })
    }

    /// Start from `x0`, run the chain, read back: `x0 + ops` everywhere.
    pub fn run(&self, x0: &[f32]) -> CaseResult<(Sample, Vec<f32>)> {
        let t = Instant::now();
        let d = self.device.wgpu_device();
        let q = self.device.wgpu_queue();
        q.write_buffer(&self.bufs[0], 0, bytemuck::cast_slice(x0));
        let layout = self.pipeline.get_bind_group_layout(0);
        let mut enc = d.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            for i in 0..self.ops {
                let bg = bind_group(
                    &self.device,
                    &layout,
                    &self.bufs[i % 2],
                    &self.bufs[(i + 1) % 2],
                );
                pass.set_bind_group(0, &bg, &[]);
                pass.dispatch_workgroups((CHAIN_ELEMENTS as u32).div_ceil(256), 1, 1);
            }
        }
        let last = &self.bufs[self.ops % 2];
        enc.copy_buffer_to_buffer(last, 0, &self.staging, 0, last.size());
        q.submit([enc.finish()]);
        let v = bytemuck::pod_collect_to_vec(&read_mapped(&self.device, &self.staging)?);
        Ok((
            Sample {
                host_s: t.elapsed().as_secs_f64(),
                gpu_s: None,
            },
            v,
        ))
    }
}

/// The storage buffer `create_buffer` makes for the pool comparison.
fn storage_buffer(device: &Device, bytes: u64) -> wgpu::Buffer {
    buffer(device, bytes, STORAGE)
}

/// One buffer of `bytes` created inside error scopes: its size, or what
/// wgpu said.
pub fn create_buffer_checked(device: &Device, bytes: u64) -> CaseResult<u64> {
    scoped(device, || storage_buffer(device, bytes).size())
}

/// `count` times `create_buffer` then drop, host-timed.
pub fn create_buffers(device: &Device, bytes: u64, count: usize) -> Sample {
    let t = Instant::now();
    for _ in 0..count {
        drop(storage_buffer(device, bytes));
    }
    Sample {
        host_s: t.elapsed().as_secs_f64(),
        gpu_s: None,
    }
}
