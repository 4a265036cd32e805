//! Test your own WGSL compute kernels headless, on typed host slices.
//!
//! [`KernelTest`] runs one compute entry point once: it uploads the inputs
//! (read-only storage buffers), fills every output (read-write storage
//! buffers) with a poison pattern ([`poison`]: NaN bits for floats,
//! `0xDEADBEEF` for integers) so that an element the kernel never writes
//! cannot pass by luck, dispatches the workgroups you give, and reads the
//! outputs back as [`Outputs`]. [`Outputs::check`] and [`compare`] compare
//! them with a reference within a [`Tolerance`] (absolute, relative, ULP)
//! and report the first mismatches readably.
//!
//! Without [`KernelTest::device`] it runs on [`default_device`]: a software
//! adapter (Mesa's lavapipe on Vulkan or llvmpipe on GL) when the machine has
//! one, so the same test runs on a laptop and on a CI machine with no GPU.
//! `WGARRAY_BACKEND=vulkan|gl|dx12|metal` and `WGARRAY_ADAPTER=<substring>`
//! narrow the choice, as for [`Device::new_default`].
//!
//! Bindings are numbered in the order they are added, all in group 0:
//! the first `input`, `output` or `uniform_bytes` call is `@binding(0)`, the
//! next `@binding(1)`, and so on.
//!
//! A plain `#[test]` for a kernel of your own (this example runs as a
//! doctest):
//!
//! ```
//! # macro_rules! doctest { ($(#[test] fn $n:ident() -> $r:ty $b:block)*) => { $(fn $n() -> $r $b)* } }
//! # doctest! {
//! #[test]
//! fn axpy_kernel_matches_the_host() -> wgarray::Result<()> {
//!     use wgarray::DType;
//!     use wgarray::testing::{KernelTest, Tolerance};
//!
//!     const AXPY: &str = r#"
//!         override alpha: f32 = 1.0;
//!         @group(0) @binding(0) var<storage, read> x: array<f32>;
//!         @group(0) @binding(1) var<storage, read> y: array<f32>;
//!         @group(0) @binding(2) var<storage, read_write> out: array<f32>;
//!
//!         @compute @workgroup_size(64)
//!         fn axpy(@builtin(global_invocation_id) id: vec3<u32>) {
//!             if id.x < arrayLength(&out) {
//!                 out[id.x] = alpha * x[id.x] + y[id.x];
//!             }
//!         }
//!     "#;
//!     let n = 1001; // not a multiple of the workgroup size
//!     let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
//!     let y: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
//!     let out = KernelTest::new(AXPY, "axpy")
//!         .input(&x)
//!         .input(&y)
//!         .output(DType::F32, &[n])
//!         .constant("alpha", 2.5)
//!         .workgroups([(n as u32).div_ceil(64), 1, 1])
//!         .run()?;
//!     let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| 2.5 * x + y).collect();
//!     out.assert_close(0, &want, Tolerance::ulps(1));
//!     Ok(())
//! }
//! # }
//! # axpy_kernel_matches_the_host().unwrap();
//! ```
//!
//! # Errors
//!
//! [`KernelTest::run`] returns, as values of [`Error`](crate::Error):
//! - [`crate::Error::Kernel`] when naga cannot parse or validate the WGSL, or the
//!   entry point is missing or not `@compute` (the message is naga's);
//! - [`crate::Error::MissingFeature`] with `feature: "SHADER_F16"` when the kernel
//!   uses f16 (`enable f16;`) and the adapter lacks `SHADER_F16` (GL), and
//!   `"SUBGROUP"` likewise for subgroup operations;
//! - [`crate::Error::Validation`] for anything wgpu's validation rejects: bindings
//!   that do not match the shader's declarations, too many workgroups, an
//!   unknown override constant;
//! - [`crate::Error::NoAdapter`] when no adapter was given and none is found;
//! - [`crate::Error::Readback`], [`crate::Error::DeviceLost`], [`crate::Error::OutOfMemory`] as for
//!   any read-back.

// The example's `#[test]` does run: a hidden macro in the doctest strips the
// attribute and the test is called, so the code shown is the code tested.
#![allow(clippy::test_attr_in_doctest)]

mod compare;
mod kernel_test;

use std::sync::OnceLock;

use crate::{Device, DeviceOptions, Result};

pub use compare::{Mismatch, Mismatches, Tolerance, compare, poison};
pub use kernel_test::{KernelTest, Outputs};

/// The device [`KernelTest`] runs on when given none: among the adapters
/// that match `WGARRAY_BACKEND` and `WGARRAY_ADAPTER` (see
/// [`DeviceOptions::from_env`]), a software one (device type `Cpu`: Mesa's
/// lavapipe on Vulkan before llvmpipe on GL), else what
/// [`Device::new_default`] picks. Made once per process and shared.
///
/// # Errors
/// [`crate::Error::UnknownBackend`] for a bad `WGARRAY_BACKEND`,
/// [`crate::Error::NoAdapter`] when no adapter matches,
/// [`crate::Error::AdaptersRefused`] when every matching adapter refuses.
pub fn default_device() -> Result<Device> {
    static DEVICE: OnceLock<Result<Device>> = OnceLock::new();
    DEVICE
        .get_or_init(|| Device::new(&DeviceOptions::from_env()?.with_prefer_software(true)))
        .clone()
}
