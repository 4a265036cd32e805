//! The main example: list adapters, pick one, build a lazy graph with a
//! matmul and a multi-output split, read results back, and show the memory
//! story (active memory back to 0 once the handles are gone).
//!
//! Run: `cargo run --example quickstart` (WGARRAY_BACKEND=vulkan|gl to choose).

use wgarray::{Array, DType, Device};

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() -> wgarray::Result<()> {
    println!("adapters:");
    for a in Device::enumerate() {
        println!("  {a} driver={} {}", a.driver, a.driver_info);
    }
    let device = Device::new_default()?;
    println!("using: {}", device.info());
    println!("features: {:?}", device.features());
    println!(
        "largest storage binding: {} MiB",
        mib(device.limits().max_storage_buffer_binding_size)
    );

    let (m, k, n) = (64, 128, 96);
    let a_host: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7919) % 101) as f32 / 101.0 - 0.5)
        .collect();
    let w_host: Vec<f32> = (0..k * 3 * n)
        .map(|i| ((i * 104_729) % 89) as f32 / 89.0 - 0.5)
        .collect();
    let x = Array::from_slice(&a_host, &[m, k], &device)?;
    let w = Array::from_slice(&w_host, &[k, 3 * n], &device)?;

    // One matmul against a fused weight, then split into three parts.
    let qkv = x.matmul(&w)?;
    let parts = qkv.split(3, -1)?;
    let (q, kk) = (&parts[0], &parts[1]);
    let y = (&(q * kk)? + 1.0)?;
    wgarray::eval(&[&y, &parts[2]])?;
    println!("y[0, ..4] = {:?}", &y.to_vec::<f32>()?[..4]);
    println!(
        "small array: {}",
        Array::arange(0.0, 6.0, 1.0, DType::F32, &device)?
    );
    println!(
        "memory: active {:.3} MiB, peak {:.3} MiB, cache {:.3} MiB",
        mib(device.active_memory()),
        mib(device.peak_memory()),
        mib(device.cache_memory())
    );
    drop((x, w, qkv, parts, y));
    println!(
        "after dropping every handle: active {} bytes, cache {:.3} MiB",
        device.active_memory(),
        mib(device.cache_memory())
    );
    device.clear_cache();
    println!("after clear_cache: cache {} bytes", device.cache_memory());
    Ok(())
}
