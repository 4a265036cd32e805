//! `WGARRAY_GEMM_TUNE=0` (timing off): a class takes its first candidate,
//! and that default is not written to the tuning file as if it had been
//! chosen, since a later process that times would trust it and never time
//! the class. Its own binary: the variable is read when a device opens.

use wgarray::tuning::CacheDir;
use wgarray::{Array, Device, DeviceOptions};

#[test]
fn a_default_taken_without_timing_is_not_written_as_a_choice() {
    // SAFETY: set before this binary's devices are made, and no other
    // thread reads the environment then (a single test).
    unsafe { std::env::set_var(wgarray::tuning::TUNE_ENV, "0") };
    let dir = tempfile::tempdir().unwrap();
    let options = DeviceOptions::from_env()
        .unwrap()
        .with_cache_dir(CacheDir::At(dir.path().to_path_buf()));
    let d = Device::new(&options).expect("this test needs an adapter");
    d.set_gemm_kernel(None).unwrap();
    // A matrix-vector product: its class has several candidates on every
    // adapter, so with timing on it would be timed.
    let (k, n) = (48, 40);
    let x: Vec<f32> = (0..k).map(|i| (i % 7) as f32 - 3.0).collect();
    let y: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.5 - 1.0).collect();
    let a = Array::from_slice(&x, &[1, k], &d).unwrap();
    let b = Array::from_slice(&y, &[k, n], &d).unwrap();
    let got = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
    for (j, g) in got.iter().enumerate() {
        let want: f64 = (0..k).map(|p| x[p] as f64 * y[p * n + j] as f64).sum();
        assert!((*g as f64 - want).abs() <= 1e-4, "{j}: {g} against {want}");
    }
    // The eval's kernel joined the warm-up list, so the file exists ...
    let file = d.gemm_tuning_file().expect("a tuning file");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(json["warm"].as_array().map(Vec::len), Some(1), "{json}");
    // ... but it records no choice for the class.
    let choices = json["choices"].as_object().expect("a choices object");
    assert!(
        !choices.keys().any(|c| c.contains("gemv")),
        "an untimed default was written as a choice: {json}"
    );
}
