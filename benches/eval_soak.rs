//! A repeated eval over time, beside raw wgpu doing the same submissions,
//! interleaved in one process (issue 36 item 3: on lavapipe the time per
//! eval of a small graph steps up after a few thousand evals and stays).
//!
//! Three loops on one device, each iteration reading one f32 back:
//! - `wgarray`: `sum(exp(x) * 2 + 1)` of an f32[1024] array, read back
//!   with `to_vec` (an eval submission, then a copy submission and a map);
//! - `raw, 2 submits`: raw wgpu doing the same: one compute dispatch
//!   (one workgroup reduces the 1024 values of `exp(x) * 2 + 1`) in one
//!   submission, then a copy to a mappable buffer in a second, a map and a
//!   wait;
//! - `raw, 1 submit`: the dispatch and the copy in one submission.
//!
//! They take turns in blocks of `BLOCK` iterations, so that whatever
//! changes with wall time or with load reaches all three alike. Each line
//! is one round: the 10th percentile and the median time per iteration of
//! each loop's block. Not a criterion bench: the point is the line over
//! time. `SOAK_SECONDS` (default 30) sets how long it runs.
//!
//! ```sh
//! WGARRAY_BACKEND=vulkan cargo bench --bench eval_soak
//! ```

mod common;

use std::time::{Duration, Instant};

use common::Raw;
use wgarray::{Array, Device};

const N: usize = 1024;
const BLOCK: usize = 500;

const SHADER: &str = r#"
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
var<workgroup> part: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) i: u32) {
    var s = 0.0;
    for (var j = i; j < arrayLength(&x); j += 256u) {
        s += exp(x[j]) * 2.0 + 1.0;
    }
    part[i] = s;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w /= 2u) {
        if i < w { part[i] += part[i + w]; }
        workgroupBarrier();
    }
    if i == 0u { out[0] = part[0]; }
}
"#;

/// The raw wgpu loop's pieces.
struct RawLoop<'a> {
    raw: Raw<'a>,
    pipeline: wgpu::ComputePipeline,
    bind: wgpu::BindGroup,
    out: wgpu::Buffer,
    staging: wgpu::Buffer,
}

impl<'a> RawLoop<'a> {
    fn new(device: &'a Device, xv: &[f32]) -> Self {
        let raw = Raw::new(device);
        let pipeline = raw.pipeline(SHADER);
        let x = raw.buffer((N * 4) as u64, common::STORAGE_RW);
        raw.queue.write_buffer(&x, 0, bytemuck::cast_slice(xv));
        let out = raw.buffer(256, common::STORAGE_RW);
        let staging = raw.buffer(
            256,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let bind = raw.bind_buffers(&pipeline.get_bind_group_layout(0), [&x, &out]);
        RawLoop {
            raw,
            pipeline,
            bind,
            out,
            staging,
        }
    }

    /// One iteration: the dispatch, the copy (in a submission of its own
    /// when `two`), the map and the wait; returns the value read.
    fn once(&self, two: bool) -> f32 {
        let mut enc = self.raw.encoder();
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        if two {
            self.raw.queue.submit([enc.finish()]);
            enc = self.raw.encoder();
        }
        enc.copy_buffer_to_buffer(&self.out, 0, &self.staging, 0, 4);
        let idx = self.raw.queue.submit([enc.finish()]);
        let slice = self.staging.slice(..4);
        slice.map_async(wgpu::MapMode::Read, |r| r.unwrap());
        self.raw.wait(idx);
        let v = bytemuck::pod_read_unaligned::<f32>(&slice.get_mapped_range().unwrap()[..4]);
        self.staging.unmap();
        v
    }
}

/// 10th percentile and median of `t`, in microseconds.
fn p10_median(t: &mut [f64]) -> (f64, f64) {
    t.sort_by(f64::total_cmp);
    (t[t.len() / 10] * 1e6, t[t.len() / 2] * 1e6)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let seconds: u64 = std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let device = common::device();
    let xv: Vec<f32> = (0..N).map(|i| i as f32 / N as f32).collect();
    let x = Array::from_slice(&xv, &[N], &device).unwrap();
    let wgarray_once = || {
        let y = ((x.exp().unwrap() * 2.0).unwrap() + 1.0).unwrap();
        y.sum(wgarray::Axes::All, false)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()[0]
    };
    let raw = RawLoop::new(&device, &xv);
    let want: f64 = xv.iter().map(|&v| (v as f64).exp() * 2.0 + 1.0).sum();
    for got in [wgarray_once(), raw.once(true), raw.once(false)] {
        assert!(
            (got as f64 - want).abs() <= 1e-4 * want,
            "{got} against {want}"
        );
    }
    println!(
        "eval soak on {} ({:?}); blocks of {BLOCK} iterations taking turns; \
         us per iteration: p10 / median",
        device.info().name,
        device.backend()
    );
    println!(
        "{:>5} {:>7} {:>8}  {:>17}  {:>17}  {:>17}",
        "round", "s", "evals", "wgarray", "raw, 2 submits", "raw, 1 submit"
    );
    let start = Instant::now();
    let mut evals = 0usize;
    let mut round = 0;
    let mut times = vec![0.0f64; BLOCK];
    while start.elapsed() < Duration::from_secs(seconds) {
        let mut cells = Vec::new();
        for which in 0..3 {
            for t in times.iter_mut() {
                let t0 = Instant::now();
                let v = match which {
                    0 => wgarray_once(),
                    1 => raw.once(true),
                    _ => raw.once(false),
                };
                *t = t0.elapsed().as_secs_f64();
                std::hint::black_box(v);
            }
            let (p10, med) = p10_median(&mut times);
            cells.push(format!("{p10:>8.1} / {med:>6.1}"));
        }
        evals += BLOCK;
        println!(
            "{round:>5} {:>7.1} {evals:>8}  {}",
            start.elapsed().as_secs_f64(),
            cells.join("  ")
        );
        round += 1;
    }
}
