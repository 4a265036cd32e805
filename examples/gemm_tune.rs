//! Time the GEMM on one shape: `cargo run --release --example gemm_tune -- M K N`.
//! With `WGARRAY_GEMM_TILE=wg_x,wg_y,tm,nv` to try a tile for the large class.
use std::time::Instant;
use wgarray::{Array, Device};

fn main() -> wgarray::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (m, k, n) = match args[..] {
        [m, k, n] => (m, k, n),
        _ => (1024, 1024, 1024),
    };
    let device = Device::new_default()?;
    let a = Array::from_slice(&vec![0.5f32; m * k], &[m, k], &device)?;
    let b = Array::from_slice(&vec![0.25f32; k * n], &[k, n], &device)?;
    device.synchronize()?;
    for i in 0..4 {
        let t = Instant::now();
        a.matmul(&b)?.eval()?;
        device.synchronize()?;
        let s = t.elapsed().as_secs_f64();
        println!(
            "run {i}: {:.1} ms, {:.2} GFLOP/s",
            s * 1e3,
            2.0 * (m * n * k) as f64 / s / 1e9
        );
    }
    Ok(())
}
