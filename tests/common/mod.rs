//! Shared test helpers, one module per concern:
//! - here: the device (every test that needs an adapter gets it here and
//!   fails, never skips, when there is none), pool poisoning, leak checks;
//! - [`rng`]: deterministic random data;
//! - [`arrays`]: one-line array constructors from host slices;
//! - [`host`]: a host n-d array for references, and device copies of it in
//!   several layouts and every dtype;
//! - [`reference`]: host references and comparisons (f64 matmul, error
//!   norms, row-major index arithmetic);
//! - [`quant`]: host references for quantized weights (ggml's block
//!   formats, MLX's affine quantization).
//!
//! Each integration test binary compiles all of it; not every binary uses
//! every helper.
#![allow(dead_code)]

pub mod arrays;
pub mod host;
pub mod quant;
pub mod reference;
// The generator wgbench uses too (one copy).
#[path = "../../src/bin/wgbench/rng.rs"]
mod rng;

// Not every test binary uses these re-exports.
#[allow(unused_imports)]
pub use reference::{matmul_ref, rel_frobenius};
#[allow(unused_imports)]
pub use rng::Rng;

use wgarray::{Array, DType, Device};

/// What a test that uses `?` on wgarray calls returns.
pub type R = wgarray::Result<()>;

/// A fresh device chosen by WGARRAY_BACKEND / WGARRAY_ADAPTER.
pub fn device() -> Device {
    match Device::new_default() {
        Ok(d) => d,
        Err(e) => panic!("this test needs a GPU adapter and found none: {e}"),
    }
}

/// The dtypes of at most 32 bits that are not packed several to a word
/// (f32, f16, bf16, i32, u32, bool, in `DType::ALL`'s order): what the
/// scan, sort and scatter ops take, and what the data-movement tests run
/// (i8, u8, i16, u16 and f64 are refused there, or tested apart).
pub fn word_dtypes() -> Vec<DType> {
    DType::ALL
        .into_iter()
        .filter(|d| {
            !matches!(
                d,
                DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::F64
            )
        })
        .collect()
}

/// Assert that each of `names` is refused as a GEMM kernel with
/// `Error::InvalidArgument` (an unknown family, a wrong count of
/// parameters, parameters outside the family's limits).
pub fn assert_not_kernels(names: &[&str]) {
    for bad in names {
        assert!(
            matches!(
                bad.parse::<wgarray::tuning::GemmKernel>(),
                Err(wgarray::Error::InvalidArgument(_))
            ),
            "{bad:?}"
        );
    }
}

/// Whether `d` runs on wgpu's GL back end (no f16, no subgroups).
pub fn is_gl(d: &Device) -> bool {
    d.backend() == wgarray::wgpu::Backend::Gl
}

/// Fill the device's pool with buffers full of a sentinel (NaN bits for
/// floats) and release them, so that a kernel that leaves an output element
/// unwritten reads back garbage instead of a lucky zero.
pub fn poison_pool(device: &Device, max_elems: usize) {
    let mut n = 1;
    let mut held = Vec::new();
    while n <= max_elems {
        let a = Array::full(&[n], f64::NAN, DType::F32, device).unwrap();
        a.eval().expect("poison eval");
        held.push(a);
        n = n * 2 + 1;
    }
    let ints = Array::full(&[max_elems], -7.0, DType::I32, device).unwrap();
    ints.eval().expect("poison eval");
    held.push(ints);
    drop(held);
}

/// Assert the device holds nothing: no active bytes, no arrays, no nodes.
pub fn assert_empty(device: &Device) {
    assert_eq!(device.live_arrays(), 0, "live arrays");
    assert_eq!(device.live_nodes(), 0, "live nodes");
    assert_eq!(device.active_memory(), 0, "active memory");
}

/// A value far outside any test's data: what [`pollute`] leaves behind.
pub const HUGE: f32 = 1.0e30;

/// Run every workgroup-memory kernel family on huge values (whole blocks,
/// whole tiles), so stale workgroup memory holds them: a kernel that reads
/// workgroup memory it has not written (pipelines skip WebGPU's zeroing)
/// then returns them instead of a lucky zero.
pub fn pollute(d: &Device) {
    let big: Vec<f32> = (0..8192).map(|i| HUGE * (1.0 + (i % 7) as f32)).collect();
    let x = Array::from_slice(&big, &[2, 4096], d).unwrap();
    for a in [
        x.cumsum(Some(-1), false, true).unwrap(),
        x.cummax(Some(-1), false, true).unwrap(),
        x.sum(-1, false).unwrap(),
        x.max(-1, false).unwrap(),
        x.sort(Some(-1)).unwrap(),
        x.topk(8, -1).unwrap().0,
    ] {
        a.eval().unwrap();
    }
}

/// The dispatches one eval of `y` costs on `d`.
pub fn eval_dispatches(d: &Device, y: &Array) -> u64 {
    let before = d.dispatches();
    y.eval().unwrap();
    d.dispatches() - before
}
