//! The one deterministic generator (SplitMix64: Steele, Lea and Flood,
//! "Fast splittable pseudorandom number generators", OOPSLA 2014) for
//! wgbench's inputs and the tests' data: `tests/common` includes this file
//! with `#[path]`, so a seed gives the same numbers in both. Each uses part
//! of it.
#![allow(dead_code)]

/// A deterministic generator (SplitMix64) for inputs and test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
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
    /// Uniform in `-range..range`.
    pub fn vec_i32(&mut self, n: usize, range: i32) -> Vec<i32> {
        (0..n)
            .map(|_| (self.next_u64() % (2 * range as u64)) as i32 - range)
            .collect()
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
