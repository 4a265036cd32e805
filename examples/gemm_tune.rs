//! Time the GEMM on one shape:
//! `cargo run --release --example gemm_tune -- M K N [RUNS] [KERNEL]`.
//! KERNEL forces a kernel, in the form `wgarray::tuning::GemmKernel` reads
//! (`"register 8 8 16 4"`, `"shared 16 16 8 2 8"`, `"splitk 8 8 1"`);
//! without it the device's tuned choice runs (timed on the first call of a
//! shape class, then remembered in the cache directory, see
//! `wgarray::tuning`). Prints the first call (which tunes and compiles where
//! needed) and the median and best of the following RUNS calls (default
//! 10), each evaluated and synchronised, and the kernel that ran.
//! Like every example it builds the dev-dependencies on first use.
use std::time::Instant;
use wgarray::tuning::{GemmKernel, ShapeClass};
use wgarray::{Array, DType, Device};

fn main() -> wgarray::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nums: Vec<usize> = args.iter().filter_map(|s| s.parse().ok()).collect();
    let kernel: Option<GemmKernel> = args
        .iter()
        .find(|s| s.parse::<usize>().is_err())
        .map(|s| s.parse())
        .transpose()?;
    let (m, k, n, runs) = match nums[..] {
        [m, k, n, r, ..] => (m, k, n, r.max(1)),
        [m, k, n] => (m, k, n, 10),
        _ => (1024, 1024, 1024, 10),
    };
    let device = Device::new_default()?;
    device.set_gemm_kernel(kernel)?;
    let a = Array::from_slice(&vec![0.5f32; m * k], &[m, k], &device)?;
    let b = Array::from_slice(&vec![0.25f32; k * n], &[k, n], &device)?;
    device.synchronize()?;
    let mut times = Vec::with_capacity(runs + 1);
    for _ in 0..=runs {
        let t = Instant::now();
        a.matmul(&b)?.eval()?;
        device.synchronize()?;
        times.push(t.elapsed().as_secs_f64());
        // The first call's class is timed in the background: not beside
        // the measured runs.
        device.wait_warm_up();
    }
    let first = times.remove(0);
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let gflops = |s: f64| 2.0 * (m * n * k) as f64 / s / 1e9;
    let ran = kernel.or_else(|| device.gemm_kernel(DType::F32, ShapeClass::of(m, n)));
    println!(
        "{m}x{k}x{n} [{}]: first call {:.1} ms; median of {runs} {:.2} ms = {:.2} GFLOP/s; best {:.2} ms = {:.2} GFLOP/s",
        ran.map_or("?".to_string(), |k| k.to_string()),
        first * 1e3,
        median * 1e3,
        gflops(median),
        times[0] * 1e3,
        gflops(times[0])
    );
    Ok(())
}
