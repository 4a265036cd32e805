//! Shared test helpers. Every test that needs an adapter gets it here and
//! fails (never skips) when there is none.
#![allow(dead_code)]

use wgarray::{Array, DType, Device};

/// A fresh device chosen by WGARRAY_BACKEND / WGARRAY_ADAPTER.
pub fn device() -> Device {
    match Device::new_default() {
        Ok(d) => d,
        Err(e) => panic!("this test needs a GPU adapter and found none: {e}"),
    }
}

/// A small deterministic generator (SplitMix64) for random test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub fn vec_f32(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
    pub fn vec_i32(&mut self, n: usize, range: i32) -> Vec<i32> {
        (0..n)
            .map(|_| (self.next_u64() % (2 * range as u64)) as i32 - range)
            .collect()
    }
}

/// Fill the device's pool with buffers full of a sentinel (NaN bits for
/// floats) and release them, so that a kernel that leaves an output element
/// unwritten reads back garbage instead of a lucky zero.
pub fn poison_pool(device: &Device, max_elems: usize) {
    let mut n = 1;
    let mut held = Vec::new();
    while n <= max_elems {
        let a = Array::full(&[n], f64::NAN, DType::F32, device);
        a.eval().expect("poison eval");
        held.push(a);
        n = n * 2 + 1;
    }
    let ints = Array::full(&[max_elems], -7.0, DType::I32, device);
    ints.eval().expect("poison eval");
    held.push(ints);
    drop(held);
}

/// Row-major f64 matmul reference: [batch, m, k] x [batch, k, n].
pub fn matmul_ref(a: &[f32], b: &[f32], batch: usize, m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; batch * m * n];
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f64;
                for kk in 0..k {
                    acc += a[bi * m * k + i * k + kk] as f64 * b[bi * k * n + kk * n + j] as f64;
                }
                c[bi * m * n + i * n + j] = acc;
            }
        }
    }
    c
}

/// Relative Frobenius error of `got` against `want`.
pub fn rel_frobenius(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "length");
    let mut num = 0.0;
    let mut den = 0.0;
    for (&g, &w) in got.iter().zip(want) {
        assert!(g.is_finite(), "non-finite output {g} (unwritten element?)");
        num += (g as f64 - w).powi(2);
        den += w * w;
    }
    (num / den.max(1e-300)).sqrt()
}

/// Assert the device holds nothing: no active bytes, no arrays, no nodes.
pub fn assert_empty(device: &Device) {
    assert_eq!(device.live_arrays(), 0, "live arrays");
    assert_eq!(device.live_nodes(), 0, "live nodes");
    assert_eq!(device.active_memory(), 0, "active memory");
}
