//! How wgarray picks, tunes and remembers its GEMM kernels.
//!
//! The GEMM (`Array::matmul`, `Array::addmm`) has four kernel families
//! ([`GemmKernel`]): register-blocked tiles with no workgroup memory (what
//! software adapters such as Mesa's lavapipe and llvmpipe run fastest),
//! workgroup-memory tiles with vec4 loads and double buffering (GPUs),
//! split-K matrix-vector kernels that add their partial sums with subgroup
//! operations where the adapter has `SUBGROUP`, and cooperative-matrix
//! tiles (tensor cores) where the adapter offers wgpu's
//! `EXPERIMENTAL_COOPERATIVE_MATRIX` and
//! [`COOPERATIVE_MATRIX_ENV`](crate::COOPERATIVE_MATRIX_ENV)`=1` asks for
//! it; besides them, uniform-buffer matrix-vector kernels (software
//! adapters) and, for [`quantized_matmul`](crate::quantized_matmul) with up
//! to 8 rows of x, the quantized family (`GemmKernel::Quant`), which reads
//! the packed weights and dequantizes them in registers; its choices are
//! recorded under the weights' block format (`u32` for MLX's affine
//! quants). Each candidate's product of known operands is checked against f64
//! dot products before it may be chosen: a kernel a driver gets wrong is
//! never picked, whatever its speed (a warning names it).
//!
//! The first GEMM of a [`ShapeClass`] and dtype on a device runs the
//! class's default kernel and queues the timing of a few candidates on a
//! proxy of its shape (bounded: a few hundred milliseconds to about two
//! seconds, once) on the device's background thread, which starts it once
//! the device has been idle for a moment ([`Device::wait_warm_up`] runs it
//! at once and waits); the fastest is kept and the class's later GEMMs run
//! it. On GL, which has no background thread, and with [`WARM_UP_ENV`]`=0`
//! the first GEMM times the candidates itself. On software adapters a large
//! register tile that no process on the adapter has dispatched yet runs as
//! a smaller stand-in (the same sums in the same order) while the
//! background thread compiles it: Mesa's LLVM takes seconds for such a tile
//! with its cache empty. [`crate::progress`] reports such work. The choice is written
//! to a file in the cache directory ([`CacheDir`], moved or turned off with
//! [`CACHE_DIR_ENV`]), keyed by the adapter's name, backend, driver and
//! driver version and by wgarray's version, and later processes read it
//! instead of timing. The driver's compiled pipelines are saved beside it
//! where the adapter supports wgpu's `PipelineCache` (Vulkan), so a later
//! process's first call of a shape does not compile from scratch either.
//! The file also lists the last GEMM kernels evals compiled
//! ([`WARM_UP_MAX`]); the first device a later process opens on the
//! adapter compiles them on a thread of its own (a warm-up, turned off by
//! [`WARM_UP_ENV`]`=0`; not on GL, whose calls wgpu serialises), so that its first GEMM of a shape class finds the
//! pipeline made or being made: on lavapipe a large tile's pipeline takes
//! 50 to 100 ms to create even with Mesa's shader cache warm. A
//! corrupt or foreign file is ignored with a warning in the log (the `log`
//! crate), never an error. [`TUNE_ENV`]`=0` turns timing off: each class
//! then takes its default kernel. [`KERNEL_ENV`] forces one kernel on every
//! device (e.g. `WGARRAY_GEMM_KERNEL="shared 16 16 8 2 8"` runs the GPU
//! family on a software adapter, which is how the test suite checks it
//! without a GPU), as [`Device::set_gemm_kernel`] does.
//!
//! ```
//! use wgarray::tuning::{GemmKernel, ShapeClass};
//! use wgarray::{Array, DType, Device};
//! let device = Device::new_default()?;
//! let a = Array::ones(&[64, 48], DType::F32, &device)?;
//! let b = Array::ones(&[48, 256], DType::F32, &device)?;
//! a.matmul(&b)?.eval()?;
//! device.wait_warm_up(); // the timing runs in the background
//! let chosen = device.gemm_kernel(DType::F32, ShapeClass::of(64, 256));
//! assert!(chosen.is_some());
//! // Force the register-blocked family (benchmarks, tests):
//! device.set_gemm_kernel(Some("register 8 8 4 1".parse::<GemmKernel>()?))?;
//! # Ok::<(), wgarray::Error>(())
//! ```

pub use crate::kernels::disk::{CACHE_DIR_ENV, CacheDir};
pub use crate::kernels::gemm::tuning::class::{GEMV_WIDE_N, ShapeClass};
pub use crate::kernels::gemm::tuning::kernel::GemmKernel;
pub use crate::kernels::gemm::tuning::{
    BUDGET_GPU, BUDGET_SOFTWARE, DEFAULT_MARGIN, KERNEL_ENV, TUNE_ENV, WARM_UP_ENV, WARM_UP_MAX,
};

use crate::kernels::gemm::tuning::candidates::candidates;
use crate::kernels::gemm::tuning::kernel::usable;
use crate::{DType, Device, Error, Result};

impl Device {
    /// The GEMM kernel this device chose for `dtype` (f32, f16, bf16) and
    /// `class`: timed after its first GEMM of that class and dtype (in the
    /// background: [`Device::wait_warm_up`] waits for it), or read from the
    /// tuning file; `None` before either. A kernel forced with
    /// [`Device::set_gemm_kernel`] is not reported here.
    pub fn gemm_kernel(&self, dtype: DType, class: ShapeClass) -> Option<GemmKernel> {
        let cx = &self.inner.kernels;
        cx.tuning.chosen(cx, dtype, class)
    }

    /// Force `kernel` for every GEMM on this device that it can run (a
    /// cooperative-matrix kernel runs only its fragment type's dtype; the
    /// others fall back to the tuned choice; a uniform-window kernel runs
    /// f32 matrix-vector products and gives every other product the
    /// register tile of its class), or `None` to go back to the
    /// tuned choices. Returns the previous setting. For benchmarks (the
    /// previous kernel beside the new one) and tests (every family).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the parameters are outside the
    /// family's limits, or for a uniform-window kernel on a device that is
    /// not a software adapter (or cannot bind a 64 KiB uniform buffer
    /// besides the parameters); [`Error::MissingFeature`] when the device cannot
    /// run the kernel for any dtype (a cooperative-matrix kernel without
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX` and a matching configuration, a
    /// subgroup kernel without `SUBGROUP`).
    pub fn set_gemm_kernel(&self, kernel: Option<GemmKernel>) -> Result<Option<GemmKernel>> {
        if let Some(k) = kernel {
            if !k.is_valid() {
                return Err(Error::InvalidArgument(format!(
                    "GEMM kernel {k} is outside its family's limits"
                )));
            }
            let cx = &self.inner.kernels;
            if let GemmKernel::Uniform { .. } = k
                && !usable(cx, k, DType::F32)
            {
                return Err(Error::InvalidArgument(format!(
                    "GEMM kernel {k} runs on software adapters only (with a 64 KiB uniform buffer binding)"
                )));
            }
            // The float GEMM's dtypes, and the quantized family's (block
            // formats, u32 for affine quants).
            if ![DType::F32, DType::F16, DType::BF16, DType::U32]
                .into_iter()
                .chain(DType::BLOCK_FORMATS)
                .any(|d| usable(cx, k, d))
            {
                return Err(Error::MissingFeature {
                    op: "set_gemm_kernel",
                    feature: match k {
                        GemmKernel::Coop { .. } => "EXPERIMENTAL_COOPERATIVE_MATRIX",
                        GemmKernel::SplitK { .. } => "SUBGROUP",
                        _ => "workgroup size or memory",
                    },
                });
            }
        }
        Ok(self.inner.kernels.tuning.force(kernel))
    }

    /// The kernels this device times for the first GEMM of `dtype` and
    /// `class` (the default first: the choice when timing is off), each
    /// one it can run. For benchmarks that time every family
    /// (`wgbench gemm`).
    pub fn gemm_candidates(&self, dtype: DType, class: ShapeClass) -> Vec<GemmKernel> {
        let cx = &self.inner.kernels;
        candidates(class, cx.software, dtype, &|k| usable(cx, *k, dtype))
    }

    /// Whether this device can run `kernel` for `dtype`: within the
    /// family's limits and the device's (threads per workgroup, workgroup
    /// memory), with the features it needs.
    pub fn gemm_kernel_usable(&self, kernel: GemmKernel, dtype: DType) -> bool {
        usable(&self.inner.kernels, kernel, dtype)
    }

    /// The file this device reads and writes its GEMM choices in, unless
    /// the cache directory is off.
    pub fn gemm_tuning_file(&self) -> Option<std::path::PathBuf> {
        self.inner.kernels.tuning.file().cloned()
    }

    /// The cooperative-matrix configurations the device can use (the
    /// adapter's, when the device has `EXPERIMENTAL_COOPERATIVE_MATRIX`;
    /// empty otherwise).
    pub fn cooperative_matrix_properties(&self) -> &[wgpu::CooperativeMatrixProperties] {
        &self.inner.kernels.coop
    }
}
