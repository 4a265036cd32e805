//! Conversions between [`crate::Array`] and other crates' array types,
//! each behind a cargo feature of the crate's name; and the application's
//! own wgpu buffers (`wgpu.rs`, always on: wgpu is wgarray's own
//! dependency).

#[cfg(feature = "ndarray")]
mod ndarray;
mod wgpu;

pub use self::wgpu::WgpuBuffer;
