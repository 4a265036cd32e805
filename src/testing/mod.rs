//! Test your own WGSL compute kernels headless, on typed host slices, on
//! one adapter or on every adapter the machine has.
//!
//! The bugs that hurt people who ship WGSL are the ones where backends
//! disagree: a driver that folds `x == x` for NaN, GLSL's undefined signed
//! `%` on llvmpipe, an ordered `!=`. This module runs the same kernel and
//! inputs everywhere and says where two runs differ:
//!
//! - [`KernelTest`] runs compute entry points on host data: it uploads the
//!   inputs, fills every output with a poison pattern ([`poison`]: NaN bits
//!   for floats, `0xDEADBEEF` for integers) so that an element the kernel
//!   never writes cannot pass by luck, dispatches, and reads the outputs
//!   back as [`Outputs`]. [`Outputs::check`] and [`compare`] compare them
//!   with a reference within a [`Tolerance`] (absolute, relative, ULP) and
//!   report the first mismatches readably. Several passes (entry points of
//!   one module or of several) run in order in one submission, the outputs
//!   of one feeding the next ([`KernelTest::then`],
//!   [`KernelTest::read_output`], [`KernelTest::write_output`]).
//! - [`KernelTest::run_on_all`] runs it on every adapter and backend
//!   ([`all_devices`]: lavapipe and llvmpipe on a machine without a GPU; a
//!   GPU's Vulkan, GL, DX12 or Metal where present), and
//!   [`Differential::check`] reports where two adapters disagree beyond the
//!   tolerance, naming adapter, backend, element and both values.
//! - [`KernelTest::run_repeated`] runs it several times on the same buffers:
//!   [`Repeated::check`] catches races through workgroup memory or atomics,
//!   as runs that differ (GPUs) or runs that are all wrong alike (Mesa runs
//!   a workgroup's invocations in a fixed order).
//! - `PropertyTest` (cargo feature `proptest`) draws inputs from proptest
//!   strategies (`Values`: f32, f16, bf16, i32, u32 or bool, edge values
//!   on request), compares
//!   with Rust closures, and shrinks a failure to a small input.
//! - `Fixture` (cargo feature `fixtures`, on by default) saves a failing
//!   case (kernel, inputs, expected outputs, adapter) to a versioned JSON
//!   file and replays it, so a driver bug is pinned in a test.
//! - [`check_portability`] and [`KernelTest::check_portability`] need no
//!   adapter: naga validation, translation to SPIR-V, MSL, HLSL and GLSL ES
//!   3.1, WebGPU's default limits and signed `%` (the checks wgarray's own
//!   kernels pass).
//!
//! Before anything runs, the test is checked against naga's reading of the
//! shader: each binding's declared address space, access and element type
//! against the host data ([`crate::Error::BindingMismatch`] names the
//! binding, its WGSL declaration and the host type), uniform sizes against
//! WGSL's layout rules, override constants by name and type, workgroup
//! counts and buffer sizes against the device's limits.
//!
//! Without [`KernelTest::device`] a test runs on [`default_device`]: a
//! software adapter (Mesa's lavapipe on Vulkan or llvmpipe on GL) when the
//! machine has one, so the same test runs on a laptop and on a CI machine
//! with no GPU. `WGARRAY_BACKEND=vulkan|gl|dx12|metal` and
//! `WGARRAY_ADAPTER=<substring>` narrow the choice, as for
//! [`Device::new_default`].
//!
//! Bindings are numbered in the order they are added, all in group 0:
//! in each pass the first binding call (`input`, `output`, `inout`,
//! `uniform`, `read_output`, ...) is `@binding(0)`, the next `@binding(1)`,
//! and so on. Sizes and counts are `usize`.
//!
//! # Mesa's loop cap
//!
//! Mesa's software adapters (lavapipe and llvmpipe share gallivm) stop a
//! shader invocation after 65535 loop iterations in total
//! (`LP_MAX_TGSI_LOOP_ITERATIONS`) and carry on with what it has: a kernel
//! that loops too long returns a number, not a hang and not an error (a
//! loop of 100000 counts to 65535). Nothing in the run says so. A reference
//! comparison notices ([`Outputs::check`], `PropertyTest`), and so does a
//! differential run against a GPU; a differential run between lavapipe and
//! llvmpipe does not, since both stop alike. Keep per-invocation loops
//! short (split long loops across invocations or dispatches) and test at
//! the largest size you ship.
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
//!         .constant("alpha", 2.5f32)
//!         .threads([n, 1, 1]) // n / 64 workgroups, rounded up
//!         .run()?;
//!     let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| 2.5 * x + y).collect();
//!     out.assert_close(0, &want, Tolerance::ulps(1));
//!     Ok(())
//! }
//! # }
//! # axpy_kernel_matches_the_host().unwrap();
//! ```
//!
//! The same kernel on every adapter, compared with each other and with the
//! reference, in one call:
//!
//! ```
//! # macro_rules! doctest { ($(#[test] fn $n:ident() -> $r:ty $b:block)*) => { $(fn $n() -> $r $b)* } }
//! # doctest! {
//! #[test]
//! fn negate_agrees_on_every_adapter() -> wgarray::Result<()> {
//!     use wgarray::DType;
//!     use wgarray::testing::{KernelTest, Tolerance};
//!
//!     const NEG: &str = r#"
//!         @group(0) @binding(0) var<storage, read> x: array<i32>;
//!         @group(0) @binding(1) var<storage, read_write> y: array<i32>;
//!         @compute @workgroup_size(64)
//!         fn main(@builtin(global_invocation_id) id: vec3<u32>) {
//!             if id.x < arrayLength(&y) { y[id.x] = -x[id.x]; }
//!         }
//!     "#;
//!     let x: Vec<i32> = (-50..50).map(|i| i * 7919).collect();
//!     let diff = KernelTest::new(NEG, "main")
//!         .input(&x)
//!         .output(DType::I32, &[x.len()])
//!         .threads([x.len(), 1, 1])
//!         .run_on_all()?;
//!     diff.assert_agree(Tolerance::EXACT); // adapter against adapter
//!     diff.assert_close(0, &x.iter().map(|v| -v).collect::<Vec<_>>(), Tolerance::EXACT);
//!     Ok(())
//! }
//! # }
//! # negate_agrees_on_every_adapter().unwrap();
//! ```
//!
//! # Errors
//!
//! [`KernelTest::run`] returns, as values of [`Error`](crate::Error), never
//! a panic or a wgpu validation crash:
//! - [`crate::Error::Kernel`] when naga cannot parse or validate the WGSL, or the
//!   entry point is missing or not `@compute` (the message is naga's);
//! - [`crate::Error::MissingFeature`] with `feature: "SHADER_F16"` when the kernel
//!   uses f16 (`enable f16;`) and the adapter lacks `SHADER_F16` (GL), and
//!   `"SUBGROUP"` likewise for subgroup operations;
//! - [`crate::Error::BindingMismatch`] for a binding that does not match the
//!   shader's declaration: a host element type that is not the declared one
//!   (f32 data into `array<u32>`), an input where the shader writes, a
//!   uniform whose size is not the WGSL struct's, a binding the shader does
//!   not declare, or one the entry point uses that the test leaves out;
//! - [`crate::Error::InvalidArgument`] for an override constant the shader
//!   does not declare or whose type cannot take the value, more workgroups
//!   than the adapter allows per dimension, an output number that does not
//!   exist;
//! - [`crate::Error::TooLarge`] for a binding past the adapter's largest
//!   storage (or uniform) binding, as the array API;
//! - [`crate::Error::NoAdapter`] when no adapter was given and none is found;
//! - [`crate::Error::Validation`] for anything wgpu's validation still
//!   rejects, and [`crate::Error::Readback`], [`crate::Error::DeviceLost`],
//!   [`crate::Error::OutOfMemory`] as for any read-back.

// The example's `#[test]` does run: a hidden macro in the doctest strips the
// attribute and the test is called, so the code shown is the code tested.
#![allow(clippy::test_attr_in_doctest)]

pub mod accuracy;
mod compare;
mod differential;
#[cfg(feature = "fixtures")]
mod fixture;
mod kernel_test;
pub mod portability;
#[cfg(feature = "proptest")]
mod property;
mod reflect;

use std::sync::OnceLock;

use crate::{Device, DeviceOptions, Result};

pub use compare::{Incomparable, MESA_LOOP_CAP, Mismatch, Mismatches, Tolerance, compare, poison};
pub use differential::{
    AdapterRun, Differential, Disagreement, Disagreements, Repeated, Verdict, all_devices,
};
#[cfg(feature = "fixtures")]
pub use fixture::Fixture;
pub use kernel_test::{Expected, KernelTest, Outputs, OverrideValue};
pub use portability::{Portability, check_portability};
#[cfg(feature = "proptest")]
pub use property::{Generate, PropertyFailure, PropertyTest, Values};

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
        .get_or_init(|| {
            let device = Device::new(&DeviceOptions::from_env()?.with_prefer_software(true))?;
            // This device is never dropped, so its warm-up thread would
            // never be joined: a process that ends while the thread is
            // inside the driver can crash there (as the poller did).
            device.wait_warm_up();
            Ok(device)
        })
        .clone()
}
