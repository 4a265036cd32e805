//! Time the GEMM on one shape:
//! `cargo run --release --example gemm_tune -- M K N [RUNS]`.
//! With `WGARRAY_GEMM_TILE=wg_x,wg_y,tm,nv` to try a tile for the large class.
//! Prints the first call (which compiles the kernel) and the median and best
//! of the following RUNS calls (default 10), each evaluated and synchronised.
//! Like every example it builds the dev-dependencies on first use.
use std::time::Instant;
use wgarray::{Array, Device};

fn main() -> wgarray::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (m, k, n, runs) = match args[..] {
        [m, k, n, r] => (m, k, n, r.max(1)),
        [m, k, n] => (m, k, n, 10),
        _ => (1024, 1024, 1024, 10),
    };
    let device = Device::new_default()?;
    let a = Array::from_slice(&vec![0.5f32; m * k], &[m, k], &device)?;
    let b = Array::from_slice(&vec![0.25f32; k * n], &[k, n], &device)?;
    device.synchronize()?;
    let mut times = Vec::with_capacity(runs + 1);
    for _ in 0..=runs {
        let t = Instant::now();
        a.matmul(&b)?.eval()?;
        device.synchronize()?;
        times.push(t.elapsed().as_secs_f64());
    }
    let first = times.remove(0);
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let gflops = |s: f64| 2.0 * (m * n * k) as f64 / s / 1e9;
    println!(
        "{m}x{k}x{n}: first call {:.1} ms; median of {runs} {:.1} ms = {:.2} GFLOP/s; best {:.1} ms = {:.2} GFLOP/s",
        first * 1e3,
        median * 1e3,
        gflops(median),
        times[0] * 1e3,
        gflops(times[0])
    );
    Ok(())
}
