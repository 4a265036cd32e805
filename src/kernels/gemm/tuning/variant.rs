//! One specialisation of the GEMM ([`GemmVariant`]: dtype, kernel, load
//! modes, flags): the pipeline cache's compact key, and as text
//! ([`GemmVariant::key`]) an entry of the tuning file's warm-up list; with
//! the device policies the planner applies when it picks one (pair loads,
//! looped stores, scalar staging).

use super::kernel::{GemmKernel, usable};
use crate::DType;
use crate::kernels::gemm::common::operand::Mode;
use crate::kernels::gemm::uniform;
use crate::kernels::{Context, WINDOW_BYTES};

/// What both pair modes ask of the device and the kernel, whatever the
/// operands: f32, a register tile, a software adapter with `SHADER_INT64`.
pub(crate) fn pair_device_ok(cx: &Context, kernel: GemmKernel, dtype: DType) -> bool {
    matches!(kernel, GemmKernel::Register { .. })
        && dtype == DType::F32
        && cx.software
        && cx.features.contains(wgpu::Features::SHADER_INT64)
}

/// Whether the register family's stores are one loop (`looped_stores`):
/// large tiles on software adapters only; the small and matrix-vector
/// tiles' few stores compile fast straight-line, and keep that form
/// tested there too.
pub(crate) fn looped_stores(cx: &Context, kernel: GemmKernel) -> bool {
    cx.software && matches!(kernel, GemmKernel::Register { tm, nv, .. } if tm * nv > 16)
}

/// Whether `kernel` stages its tiles in f32 arrays (`scalar_staging`).
pub(crate) fn scalar_staging(cx: &Context, kernel: GemmKernel) -> bool {
    cx.scalar_staging && kernel.family() == "shared"
}

/// One specialisation of the GEMM: everything its WGSL depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GemmVariant {
    /// f32, f16 or bf16: A, B, the bias and the output.
    pub dtype: DType,
    pub kernel: GemmKernel,
    pub a_mode: Mode,
    pub b_mode: Mode,
    /// Vector stores; needs `n % 4 == 0`.
    pub out_vec: bool,
    pub has_bias: bool,
    /// K is not a multiple of the kernel's K step: the last step is masked.
    pub k_tail: bool,
    /// The workgroup-memory family's staging in f32 arrays
    /// (`Context::scalar_staging`); false for the other families.
    pub scalar_staging: bool,
    /// The register family's stores as one loop (`common::store::store_quads`) even
    /// without a fused epilogue: on software adapters, where the
    /// straight-line stores of a large tile are about half of the driver's
    /// pipeline creation (lavapipe, `register 8 8 16 4`: 97 to 104 ms
    /// straight, 49 to 57 looped, 2026-12-01) and the loop costs nothing
    /// measurable per call. GPUs keep them straight-line (a dynamically
    /// indexed array of accumulators may live in local memory there).
    pub looped_stores: bool,
    /// The uniform family's row kernel (B read along K): A's row as a
    /// uniform binding of this many quads (K / 4). 0 for the column kernel
    /// and every other family.
    pub a_quads: u32,
}

impl GemmVariant {
    /// The variant as one line of text (the tuning file's warm-up list):
    /// `float32;register 8 8 16 4;inner;pair;` then the five flags as 0 or 1
    /// (`out_vec`, `has_bias`, `k_tail`, `scalar_staging`, `looped_stores`),
    /// and for the uniform row kernel `;` and its `a_quads`.
    pub(crate) fn key(self) -> String {
        let flags = [
            self.out_vec,
            self.has_bias,
            self.k_tail,
            self.scalar_staging,
            self.looped_stores,
        ]
        .map(|b| if b { "1" } else { "0" })
        .concat();
        let rows = if self.a_quads > 0 {
            format!(";{}", self.a_quads)
        } else {
            String::new()
        };
        format!(
            "{};{};{};{};{flags}{rows}",
            self.dtype.name(),
            self.kernel,
            self.a_mode.name(),
            self.b_mode.name()
        )
    }

    /// Whether `plan::dispatches` could ask for this variant on `cx`'s device,
    /// as far as the device and the kernel decide it (not the operands'
    /// layouts): what a tuning file's warm-up entry must pass before it is
    /// compiled, since a hand-edited one can name any combination (a
    /// [`Mode::PairK`] A with another B builds no valid kernel).
    pub(crate) fn possible_on(&self, cx: &Context) -> bool {
        let pair_k = self.a_mode == Mode::PairK;
        usable(cx, self.kernel, self.dtype)
            && pair_k == (self.b_mode == Mode::PairK)
            && self.a_mode != Mode::Pair
            && (self.a_mode != Mode::Outer || self.kernel.a_outer_ok())
            && (!pair_k || pair_device_ok(cx, self.kernel, self.dtype))
            && (self.b_mode != Mode::Pair
                || pair_device_ok(cx, self.kernel, self.dtype)
                    && matches!(self.kernel, GemmKernel::Register { nv, .. } if nv.is_multiple_of(2)))
            && self.scalar_staging == scalar_staging(cx, self.kernel)
            && self.looped_stores == looped_stores(cx, self.kernel)
            && (!matches!(self.kernel, GemmKernel::Uniform { .. })
                || self == &GemmVariant::uniform(self.kernel, self.has_bias, self.a_quads))
            && (self.a_quads == 0
                || matches!(self.kernel, GemmKernel::Uniform { .. })
                    && uniform::windows(cx) >= 2
                    && 16 * self.a_quads as u64
                        <= cx.limits.max_uniform_buffer_binding_size.min(WINDOW_BYTES))
    }

    /// The variant [`GemmVariant::key`] wrote, or `None` for any other text.
    pub(crate) fn from_key(key: &str) -> Option<GemmVariant> {
        let mut parts = key.split(';');
        let dtype = [DType::F32, DType::F16, DType::BF16]
            .into_iter()
            .find(|d| d.name() == parts.next().unwrap_or_default())?;
        let kernel: GemmKernel = parts.next()?.parse().ok()?;
        let mut mode = || {
            let name = parts.next()?;
            Mode::ALL.into_iter().find(|m| m.name() == name)
        };
        let (a_mode, b_mode) = (mode()?, mode()?);
        let flags = parts.next()?.as_bytes();
        let a_quads = match parts.next() {
            None => 0,
            Some(q) => q.parse().ok().filter(|&q| q > 0)?,
        };
        if parts.next().is_some() || flags.len() != 5 || !flags.iter().all(|b| b"01".contains(b)) {
            return None;
        }
        let flag = |i: usize| flags[i] == b'1';
        Some(GemmVariant {
            dtype,
            kernel,
            a_mode,
            b_mode,
            out_vec: flag(0),
            has_bias: flag(1),
            k_tail: flag(2),
            scalar_staging: flag(3),
            looped_stores: flag(4),
            a_quads,
        })
    }

    /// The one specialisation of the uniform family for `kernel` (with or
    /// without a bias), f32 with no K tail, A read one element at a time.
    /// With `a_quads` 0 the column kernel (B along n, vector stores);
    /// otherwise the row kernel (A's row as a uniform binding of `a_quads`
    /// quads, B through its windows alone, so its storage bindings are
    /// declared one element at a time; one store per column).
    pub(crate) fn uniform(kernel: GemmKernel, has_bias: bool, a_quads: u32) -> GemmVariant {
        let rows = a_quads > 0;
        GemmVariant {
            dtype: DType::F32,
            kernel,
            a_mode: Mode::Scalar,
            b_mode: if rows { Mode::Scalar } else { Mode::Inner },
            out_vec: !rows,
            has_bias,
            k_tail: false,
            scalar_staging: false,
            looped_stores: false,
            a_quads,
        }
    }
}
