//! The GEMM kernels by name: a family and its tile ([`GemmKernel`]), the
//! form the tuning file and `WGARRAY_GEMM_KERNEL` write them in and its
//! parser, each family's limits and geometry, and whether a device can run
//! one ([`usable`]).

use crate::kernels::Context;
use crate::kernels::gemm::coop::COOP_BK;
use crate::kernels::gemm::uniform;
use crate::{DType, Result};

/// A GEMM kernel: one of five families and its tile. [`crate::Device`]
/// picks one per shape class and dtype by timing candidates on the adapter
/// (see `Device::gemm_kernel` and `docs/ARCHITECTURE.md`, "Matmul"); tests
/// and benchmarks can force one with `Device::set_gemm_kernel`.
///
/// Every family computes `alpha * (A @ B) + beta * bias` with f32
/// accumulation over f32, f16 or bf16 operands read through strides, and
/// stores through the same epilogue (`store_quad` in `wgsl/gemm_common.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmKernel {
    /// Register-blocked, no workgroup memory (`wgsl/gemm.wgsl`): `wg_x *
    /// wg_y` threads, each `tm` rows by `4 * nv` columns of accumulators,
    /// operands read straight from storage. What software adapters take
    /// (on lavapipe every load is a per-lane loop, so the per-thread block
    /// decides). Limits: at most 256 threads, `tm * nv` at most 128.
    Register {
        wg_x: u32,
        wg_y: u32,
        tm: u32,
        nv: u32,
    },
    /// Workgroup-memory tiles (`wgsl/gemm_shared.wgsl`): `wg_x * wg_y`
    /// threads stage a `(wg_y tm) x bk` block of A and a `bk x (4 wg_x nv)`
    /// block of B through workgroup memory with vec4 loads, double
    /// buffered (one barrier per step), each thread `tm x 4 nv` outputs.
    /// The GPU family. Limits: `tm` and `bk` multiples of 4, each thread
    /// loads whole vec4s of both blocks, both buffers within 64 KiB
    /// ([`GemmKernel::workgroup_bytes`]; a device runs only those within
    /// its `max_compute_workgroup_storage_size`, 16 KiB in WebGPU's
    /// defaults, 48 KiB on NVIDIA's Vulkan driver).
    Shared {
        wg_x: u32,
        wg_y: u32,
        tm: u32,
        nv: u32,
        bk: u32,
    },
    /// Split-K matrix-vector (`wgsl/gemm_splitk.wgsl`): `ks` threads share
    /// K for each of `cq` column quads and add their sums with subgroup
    /// shuffles (`subgroups`, needs `Features::SUBGROUP` and subgroups of at
    /// least `ks` lanes) or through workgroup memory. For small `m` with
    /// long K. Limits: `ks` a power of two from 2 to 64, `ks * cq` at most 256.
    SplitK { ks: u32, cq: u32, subgroups: bool },
    /// Cooperative matrices (`wgsl/gemm_coop.wgsl`, tensor cores; needs
    /// `Features::EXPERIMENTAL_COOPERATIVE_MATRIX`, which a device requests
    /// only with `WGARRAY_COOPERATIVE_MATRIX=1`, with a `size x size x size`
    /// configuration of the input type and f32 accumulators,
    /// `Features::SUBGROUP`, and a fixed subgroup size, which wgpu's Metal
    /// back end does not report): four
    /// subgroups, each `frags x frags` fragments, staged like `Shared` in
    /// steps of 16 k. Limits: `size` 8 or 16, staging and the
    /// subgroups' store space within 64 KiB (and the device's limit, as
    /// for `Shared`).
    /// `half`: f16 fragments (for f16 operands), else f32.
    Coop { size: u32, half: bool, frags: u32 },
    /// Matrix-vector through uniform-buffer windows (software adapters
    /// only), for `m = 1` and f32, with B read through up to 14
    /// uniform-buffer bindings of 64 KiB per dispatch, each holding whole
    /// lines of B. For B unit-stride along n (`x @ w`,
    /// `wgsl/gemm_uniform.wgsl`): `wg_x` threads per workgroup, each `4 nv`
    /// columns, windows of B's rows, and as many dispatches as K needs (the
    /// first stores, the later ones add). For B unit-stride along K
    /// (`x @ w.T` with `w: [N, K]` row-major, `wgsl/gemm_uniform_rows.wgsl`):
    /// one geometry whatever `wg_x` and `nv` say (8 lanes per column, 2
    /// columns per workgroup), windows of W's rows, A's row as one more
    /// uniform binding, and as many dispatches as N needs. Why: Mesa's
    /// llvmpipe (lavapipe and llvmpipe GL) runs every storage-buffer load
    /// as a loop over the SIMD lanes with a bounds check per lane, but
    /// gathers a uniform-buffer load in one pass; the family runs 2x to 3x
    /// the register tiles (docs/PERFORMANCE.md). Products it cannot run
    /// (another dtype, a batch, a fused epilogue, a B buffer without
    /// `UNIFORM` usage or under 64 KiB, a line of B over 64 KiB; with B
    /// along K, a K not a multiple of four or an A that is strided or at an
    /// unaligned offset) fall back to the register family's tile for their
    /// shape class. Limits: `wg_x` from 1 to 256, `nv` from 1 to 16.
    Uniform { wg_x: u32, nv: u32 },
}

impl GemmKernel {
    /// The family's name: `register`, `shared`, `splitk`, `coop`, `uniform`.
    pub fn family(&self) -> &'static str {
        match self {
            GemmKernel::Register { .. } => "register",
            GemmKernel::Shared { .. } => "shared",
            GemmKernel::SplitK { .. } => "splitk",
            GemmKernel::Coop { .. } => "coop",
            GemmKernel::Uniform { .. } => "uniform",
        }
    }

    /// Whether the parameters are within the family's limits (see each
    /// variant).
    pub fn is_valid(&self) -> bool {
        match *self {
            GemmKernel::Register { wg_x, wg_y, tm, nv } => {
                (1..=256).contains(&(wg_x as u64 * wg_y as u64))
                    && (1..=128).contains(&(tm as u64 * nv as u64))
            }
            GemmKernel::Shared {
                wg_x,
                wg_y,
                tm,
                nv,
                bk,
            } => {
                let threads = wg_x as u64 * wg_y as u64;
                let (bm, bn) = shared_block(wg_x, wg_y, tm, nv);
                let bk = bk as u64;
                (1..=256).contains(&threads)
                    && (1..=128).contains(&(tm as u64 * nv as u64))
                    && tm % 4 == 0
                    && bk.is_multiple_of(4)
                    && bk > 0
                    && threads > 0
                    && (bm * bk / 4).is_multiple_of(threads)
                    && (bn * bk / 4).is_multiple_of(threads)
                    && self.workgroup_bytes() <= MAX_WORKGROUP_BYTES
            }
            GemmKernel::SplitK { ks, cq, .. } => {
                ks.is_power_of_two()
                    && (2..=64).contains(&ks)
                    && (1..=256).contains(&(ks as u64 * cq as u64))
            }
            GemmKernel::Coop { size, frags, .. } => {
                (size == 8 || size == 16)
                    && (1..=4).contains(&frags)
                    && self.workgroup_bytes() <= MAX_WORKGROUP_BYTES
            }
            GemmKernel::Uniform { wg_x, nv } => (1..=256).contains(&wg_x) && (1..=16).contains(&nv),
        }
    }

    /// Bytes of workgroup memory the kernel declares: both staging
    /// buffers (and the cooperative family's store slots); 0 for the
    /// register family. For splitk kernels the workgroup-reduction
    /// buffer's bound.
    pub fn workgroup_bytes(&self) -> u64 {
        match *self {
            GemmKernel::Register { .. } | GemmKernel::Uniform { .. } => 0,
            GemmKernel::Shared {
                wg_x,
                wg_y,
                tm,
                nv,
                bk,
            } => {
                let (bm, bn) = shared_block(wg_x, wg_y, tm, nv);
                (bk as u64 * 8).saturating_mul(bm.saturating_add(bn))
            }
            GemmKernel::SplitK { ks, cq, .. } => ks as u64 * cq as u64 * 16,
            GemmKernel::Coop { size, half, frags } => {
                let (bm, elem) = (
                    (frags as u64 * size as u64).saturating_mul(2),
                    if half { 2 } else { 4 },
                );
                bm.saturating_mul(4 * COOP_BK as u64 * elem)
                    .saturating_add((size as u64 * size as u64).saturating_mul(16))
            }
        }
    }

    /// Output rows and columns one workgroup computes.
    pub(crate) fn block(&self) -> (usize, usize) {
        let (r, c) = match *self {
            GemmKernel::Register { wg_x, wg_y, tm, nv }
            | GemmKernel::Shared {
                wg_x, wg_y, tm, nv, ..
            } => (wg_y * tm, wg_x * 4 * nv),
            GemmKernel::SplitK { cq, .. } => (1, 4 * cq),
            GemmKernel::Coop { size, frags, .. } => (2 * frags * size, 2 * frags * size),
            GemmKernel::Uniform { wg_x, nv } => (1, 4 * wg_x * nv),
        };
        (r as usize, c as usize)
    }

    /// The K step whose multiples need no masked tail.
    pub(crate) fn k_step(&self) -> usize {
        match *self {
            GemmKernel::Register { .. } | GemmKernel::SplitK { .. } => 4,
            GemmKernel::Shared { bk, .. } => bk as usize,
            GemmKernel::Coop { .. } => COOP_BK as usize,
            // One k per step: no masked tail.
            GemmKernel::Uniform { .. } => 1,
        }
    }

    /// Rows per thread that A's transposed-view (vec4 along m) loads need
    /// in multiples of four.
    pub(crate) fn a_outer_ok(&self) -> bool {
        match *self {
            GemmKernel::Register { tm, .. } => tm.is_multiple_of(4),
            GemmKernel::Shared { .. } | GemmKernel::Coop { .. } => true,
            GemmKernel::SplitK { .. } | GemmKernel::Uniform { .. } => false,
        }
    }
}

impl std::fmt::Display for GemmKernel {
    /// The form [`GemmKernel::from_str`](std::str::FromStr) reads (and the
    /// tuning cache file stores): the family, then its parameters.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            GemmKernel::Register { wg_x, wg_y, tm, nv } => {
                write!(f, "register {wg_x} {wg_y} {tm} {nv}")
            }
            GemmKernel::Shared {
                wg_x,
                wg_y,
                tm,
                nv,
                bk,
            } => write!(f, "shared {wg_x} {wg_y} {tm} {nv} {bk}"),
            GemmKernel::SplitK { ks, cq, subgroups } => {
                write!(f, "splitk {ks} {cq} {}", subgroups as u32)
            }
            GemmKernel::Coop { size, half, frags } => {
                write!(f, "coop {size} {} {frags}", half as u32)
            }
            GemmKernel::Uniform { wg_x, nv } => write!(f, "uniform {wg_x} {nv}"),
        }
    }
}

impl std::str::FromStr for GemmKernel {
    type Err = crate::Error;

    /// Parse the form [`GemmKernel`]'s `Display` writes, e.g.
    /// `register 8 8 16 4` or `shared 16 16 8 2 8`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for an unknown family, a wrong
    /// number of parameters, or parameters outside the family's limits.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || crate::Error::InvalidArgument(format!("not a GEMM kernel: {s:?}"));
        let mut words = s.split_whitespace();
        let family = words.next().ok_or_else(bad)?;
        let x: Vec<u32> = words
            .map(|w| w.parse().map_err(|_| bad()))
            .collect::<Result<_>>()?;
        let k = match (family, &x[..]) {
            ("register", &[wg_x, wg_y, tm, nv]) => GemmKernel::Register { wg_x, wg_y, tm, nv },
            ("shared", &[wg_x, wg_y, tm, nv, bk]) => GemmKernel::Shared {
                wg_x,
                wg_y,
                tm,
                nv,
                bk,
            },
            ("splitk", &[ks, cq, sg]) if sg <= 1 => GemmKernel::SplitK {
                ks,
                cq,
                subgroups: sg == 1,
            },
            ("coop", &[size, half, frags]) if half <= 1 => GemmKernel::Coop {
                size,
                half: half == 1,
                frags,
            },
            ("uniform", &[wg_x, nv]) => GemmKernel::Uniform { wg_x, nv },
            _ => return Err(bad()),
        };
        if k.is_valid() { Ok(k) } else { Err(bad()) }
    }
}

/// The rows of A and columns of B a `Shared` kernel stages per step, in
/// u64, saturating (no overflow for parameters not yet validated).
fn shared_block(wg_x: u32, wg_y: u32, tm: u32, nv: u32) -> (u64, u64) {
    (
        wg_y as u64 * tm as u64,
        (wg_x as u64 * nv as u64).saturating_mul(4),
    )
}

/// The most workgroup memory a kernel of the workgroup-memory and
/// cooperative-matrix families may declare (64 KiB); each device further
/// bounds it by its `max_compute_workgroup_storage_size`.
pub(crate) const MAX_WORKGROUP_BYTES: u64 = 65536;

/// Whether `kernel` can run `dtype` on this device.
pub(crate) fn usable(cx: &Context, kernel: GemmKernel, dtype: DType) -> bool {
    let threads = |n: u32| n <= cx.limits.max_compute_invocations_per_workgroup;
    let memory =
        |k: GemmKernel| k.workgroup_bytes() <= cx.limits.max_compute_workgroup_storage_size as u64;
    kernel.is_valid()
        && match kernel {
            GemmKernel::Register { wg_x, wg_y, .. } => threads(wg_x * wg_y),
            GemmKernel::Shared { wg_x, wg_y, .. } => threads(wg_x * wg_y) && memory(kernel),
            GemmKernel::SplitK { ks, cq, subgroups } => {
                threads(ks * cq)
                    && (!subgroups
                        || (cx.features.contains(wgpu::Features::SUBGROUP)
                            && cx.subgroup_min_size >= ks))
            }
            GemmKernel::Coop { size, half, .. } => {
                half == (dtype == DType::F16)
                    && cx.features.contains(wgpu::Features::SUBGROUP)
                    && cx.subgroup_min_size == cx.subgroup_max_size
                    && threads(4 * cx.subgroup_min_size)
                    && memory(kernel)
                    && cx.coop_ok(size, half)
            }
            GemmKernel::Uniform { wg_x, .. } => {
                cx.software && dtype == DType::F32 && threads(wg_x) && uniform::windows(cx) > 0
            }
        }
}
