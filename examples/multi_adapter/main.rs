//! A batch split across every adapter the machine has (on a machine
//! without a GPU: lavapipe on Vulkan and llvmpipe on GL), each computing a
//! two-layer network's forward pass on its share of the rows, the results
//! gathered on the first device with `Array::to_device` and checked against
//! one device computing the whole batch and an f64 reference.
//!
//! Run: `cargo run --release --example multi_adapter [ROWS]`

mod batch;

use std::time::Instant;

use wgarray::{Device, DeviceOptions};

fn main() -> wgarray::Result<()> {
    let rows: usize = std::env::args()
        .nth(1)
        .map_or(2048, |s| s.parse().expect("ROWS is a number"));
    let devices = Device::all(&DeviceOptions::default())?;
    for (d, n) in devices.iter().zip(batch::shares(rows, devices.len())) {
        println!("{d}: {n} rows");
    }
    let weights = batch::Weights::new(256, 512, 64);
    let x: Vec<f32> = (0..rows * weights.d_in)
        .map(|i| ((i * 7919) % 1013) as f32 / 1013.0 - 0.5)
        .collect();

    // The first call on each device compiles its kernels and tunes its
    // GEMM (seconds on GL); the second is the one timed.
    let run = |devices: &[Device]| -> wgarray::Result<(Vec<f32>, f64, f64)> {
        let t = Instant::now();
        batch::forward_split(devices, &weights, &x, rows)?.eval()?;
        let first = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let y = batch::forward_split(devices, &weights, &x, rows)?.to_vec::<f32>()?;
        Ok((y, first, t.elapsed().as_secs_f64()))
    };
    let (split, split_first, t_split) = run(&devices)?;
    let (one, one_first, t_one) = run(&devices[..1])?;
    let reference = weights.reference(&x, rows);
    let err = |v: &[f32]| {
        v.iter()
            .zip(&reference)
            .map(|(a, b)| (*a as f64 - b).abs())
            .fold(0.0, f64::max)
    };
    println!(
        "split across {} devices: {:.1} ms (first call {:.1} s), largest error against f64 {:.2e}",
        devices.len(),
        t_split * 1e3,
        split_first,
        err(&split)
    );
    println!(
        "one device ({}): {:.1} ms (first call {:.1} s), largest error against f64 {:.2e}",
        devices[0],
        t_one * 1e3,
        one_first,
        err(&one)
    );
    println!(
        "(software adapters share the host's cores: splitting pays off where the adapters \
         are separate GPUs)"
    );
    for d in &devices {
        println!("{d}: active memory {} bytes", d.active_memory());
    }
    Ok(())
}
