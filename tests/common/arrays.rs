//! One-line device arrays from host slices, for short tests. They panic on
//! error: a test that expects an error calls `Array::from_slice` itself.

use wgarray::{Array, Device};

/// An f32 array of `shape` holding `v`.
pub fn f(d: &Device, v: &[f32], shape: &[usize]) -> Array {
    Array::from_slice(v, shape, d).unwrap()
}

/// An i32 array of `shape` holding `v`.
pub fn i(d: &Device, v: &[i32], shape: &[usize]) -> Array {
    Array::from_slice(v, shape, d).unwrap()
}

/// A u32 array of `shape` holding `v`.
pub fn u(d: &Device, v: &[u32], shape: &[usize]) -> Array {
    Array::from_slice(v, shape, d).unwrap()
}
