//! # wgarray: lazy arrays on wgpu
//!
//! Build a graph of array operations; [`eval`] runs the part you need as WGSL
//! compute shaders on one [`Device`] (Vulkan, DX12, Metal or GL, including
//! Mesa's software drivers), in one submission. GPU memory comes from a
//! per-device pool and goes back the moment the last handle to it is gone:
//! [`Device::active_memory`] says so at once.
//!
//! ```
//! use wgarray::{Array, DType, Device};
//!
//! let device = Device::new_default()?; // WGARRAY_BACKEND=vulkan|gl picks a backend
//! let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &device)?;
//! let w = Array::ones(&[3, 4], DType::F32, &device)?;
//! let y = (&x.matmul(&w)? * 2.0)?;          // lazy: nothing has run yet
//! let parts = y.split(2, 1)?;               // a multi-output op
//! assert_eq!(parts[0].to_vec::<f32>()?, vec![12.0, 12.0, 30.0, 30.0]);
//! drop((x, w, y, parts));
//! assert_eq!(device.active_memory(), 0);    // every buffer is back in the pool
//! # Ok::<(), wgarray::Error>(())
//! ```
//!
//! To test WGSL kernels of your own headless, see [`testing`].
//!
//! The architecture and lifetime rules are in `docs/ARCHITECTURE.md`.

mod array;
pub mod axis;
pub mod baseline;
pub mod compile;
mod device;
#[cfg(feature = "mpi")]
pub mod distributed;
mod dtype;
mod error;
mod graph;
mod interop;
pub mod io;
mod kernels;
mod memory;
pub mod ops;
pub mod progress;
pub mod random;
mod read_async;
pub mod scalar;
pub mod shape;
mod snapshot;
pub mod testing;
mod transfer;
pub mod tuning;

pub use array::Array;
pub use axis::{Axes, Axis};
pub use compile::{Compiled, compile, compile_with_capacity};
pub use device::{
    ADAPTER_ENV, AdapterDescription, BACKEND_ENV, COOPERATIVE_MATRIX_ENV, DEFAULT_WAIT_TIMEOUT,
    Device, DeviceOptions, OPTIONAL_FEATURES, REQUIRED_LIMITS, parse_backend,
};
pub use dtype::{DType, Element};
pub use error::{Error, Limit, Result};
pub use graph::eval::eval;
pub use graph::explain::explain;
pub use interop::WgpuBuffer;
pub use memory::{Holder, MemoryEvent, MemoryEventKind, MemoryStats, MemoryTimeline, Origin};
pub use ops::concat::{concatenate, stack};
pub use ops::creation::{Indexing, PadMode, broadcast_arrays, meshgrid};
pub use ops::elementwise::{promote_types, where_};
pub use ops::fast;
pub use ops::linalg::TensordotAxes;
pub use ops::quant::{dequantize, quantize, quantized_matmul};
pub use ops::shape::Slice;
pub use ops::shape::SplitSpec;
pub use ops::topk::topk;
pub use ops::writes::At;
pub use read_async::{EvalFuture, ReadFuture, eval_async};
pub use scalar::{Operand, Scalar};
pub use snapshot::{ArrayView, BufferSnapshot, MemorySnapshot};

// README's example is compiled and run as a doctest, so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The `bytemuck` crate (with its derives), whose `Pod` a uniform of
/// [`testing::KernelTest::uniform`] implements:
/// `#[derive(Pod, Zeroable)]` with `#[bytemuck(crate = "wgarray::bytemuck")]`.
pub use bytemuck;
/// Re-exported so users can name adapters, backends and features.
/// The `half` crate, whose `f16` and `bf16` are the host types of
/// [`DType::F16`] and [`DType::BF16`] (`Array::from_slice`, `to_vec`).
pub use half;
/// The `ndarray` crate (feature `ndarray`), whose arrays
/// [`Array::from_ndarray`] and [`Array::to_ndarray`] convert.
#[cfg(feature = "ndarray")]
pub use ndarray;
pub use wgpu;
