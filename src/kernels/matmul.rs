//! Matmul kernels: the GEMM families, specialised per kernel (family and
//! tile), dtype and operand layout, and the reference one-thread-per-output
//! kernel (wgsl/matmul_naive.wgsl) kept for comparison.
//!
//! Five families share one prelude (`wgsl/gemm_common.wgsl`: parameters,
//! operand loads for the dtype, and the epilogue `store_quad`) and one
//! operand description (load modes from the strides, here): the
//! register-blocked GEMM (`wgsl/gemm.wgsl`, generated here by
//! `gemm_body`), the workgroup-memory GEMM (`gemm_shared.rs`), the split-K
//! matrix-vector kernel (`gemm_splitk.rs`), the cooperative-matrix GEMM
//! (`gemm_coop.rs`) and the uniform-window matrix-vector kernel of
//! software adapters (`gemm_uniform.rs`). Which one runs is decided per adapter, shape class and
//! dtype by `tuning.rs`.

use super::epilogue::{self, Epilogue, GEMM_WORDS};
use super::program::Program;
use super::{
    Context, Dispatch, GEMM, GEMM_COOP, GEMM_EPILOGUE, GEMM_SHARED, GEMM_SPLITK, GEMM_UNIFORM,
    GEMM_UNIFORM_ROWS, Kernel, MATMUL_NAIVE, Operand, Params, QuickKey, Spec, WINDOW_BYTES, Window,
    gemm_coop, gemm_shared, gemm_splitk, gemm_uniform,
};
use crate::DType;
use crate::Result;

/// The strides of a matmul [`Operand`]: six, over `[batch0..batch3, rows,
/// cols]` (the four batch dimensions already broadcast, 0 where repeated).
fn batch_strides<'o>(op: &'o Operand<'_>) -> &'o [isize] {
    &op.strides[..4]
}

fn row_stride(op: &Operand<'_>) -> isize {
    op.strides[4]
}

fn col_stride(op: &Operand<'_>) -> isize {
    op.strides[5]
}

/// Store `op`'s offset, row stride and column stride at words `base ..
/// base + 3` of `p` (the layout both `gemm_common.wgsl` and
/// `matmul_naive.wgsl` read).
///
/// # Errors
/// [`crate::Error::TooLarge`] for values past `u32` (strides past `i32`).
fn put_operand(p: &mut Params, base: usize, op: &Operand<'_>) -> Result<()> {
    p.put(
        base,
        [
            op.offset as i64,
            row_stride(op) as i64,
            col_stride(op) as i64,
        ],
    )
}

/// The reference kernel (wgsl/matmul_naive.wgsl, one thread per output, f32):
/// `c[batch, m, n] (+)= a[batch, m, k0..k] @ b[batch, k0..k, n]` into dense
/// `c`, adding to `c` when `accumulate`. Only `crate::baseline` uses it, as
/// the plain way to compare the GEMM with.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_naive(
    cx: &Context,
    batch_shape: [usize; 4],
    m: usize,
    n: usize,
    k: std::ops::Range<usize>,
    accumulate: bool,
    a: &Operand<'_>,
    b: &Operand<'_>,
    c: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let total = batch_shape.iter().product::<usize>() * m * n;
    if total == 0 {
        return Ok(None);
    }
    let mut p = Params::new("matmul");
    p.put(0, [m, n, k.end, total].map(|x| x as i64))?;
    p.put(10, [k.start as i64, accumulate as i64])?;
    for (base, op) in [(4, a), (7, b)] {
        put_operand(&mut p, base, op)?;
    }
    p.put(12, batch_shape.iter().map(|&x| x as i64))?;
    p.put(16, batch_strides(a).iter().map(|&x| x as i64))?;
    p.put(20, batch_strides(b).iter().map(|&x| x as i64))?;
    let (spec, kernel) = naive_spec();
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline: cx.cache.get(kernel, &spec)?,
        params: p.words(),
        buffers: vec![a.buffer.clone(), b.buffer.clone(), c.clone()],
        workgroups: cx.grid(total as u64)?,
    }))
}

fn naive_spec() -> (Spec, &'static Kernel) {
    MATMUL_NAIVE.spec(&[])
}

/// Matrix-vector products with at least this many output columns are the
/// wide classes ([`ShapeClass::GemvWide`], [`ShapeClass::GemvTWide`]),
/// tuned apart from the narrow ones: on lavapipe (2026-12-01,
/// docs/PERFORMANCE.md) 32 columns per thread win from about 2048 columns
/// on (enough workgroups for every core), 16 below.
pub const GEMV_WIDE_N: usize = 2048;

/// The shape classes the GEMM picks a kernel for (and tunes, once per
/// adapter and dtype): by the output's rows `m` and columns `n` (and, for
/// `m == 1`, B's layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShapeClass {
    /// `m == 1`, `n <` [`GEMV_WIDE_N`]: matrix-vector products (the decode
    /// step of a language model), bound by reading B once; B row-major
    /// `[K, N]` (`x @ w`) or any other layout but the one of
    /// [`ShapeClass::GemvT`].
    Gemv,
    /// `m == 1`, `1 < n <` [`GEMV_WIDE_N`], with B read along K (unit
    /// stride in K): `x @ W^T` with `W` of shape `[N, K]`, PyTorch's
    /// `nn.Linear` layout. Tuned apart from [`ShapeClass::Gemv`]: each
    /// output is a dot product along contiguous memory, and which kernel
    /// wins differs (on lavapipe the split-K kernel, or narrower register
    /// tiles, see docs/PERFORMANCE.md).
    GemvT,
    /// [`ShapeClass::Gemv`] with `n >=` [`GEMV_WIDE_N`].
    GemvWide,
    /// [`ShapeClass::GemvT`] with `n >=` [`GEMV_WIDE_N`].
    GemvTWide,
    /// `m < 32` or `n < 64`: small or skinny outputs.
    Small,
    /// `m < 128` or `n < 128`.
    Medium,
    /// Everything larger.
    Large,
}

impl ShapeClass {
    /// Every class, in order.
    pub const ALL: [ShapeClass; 7] = [
        ShapeClass::Gemv,
        ShapeClass::GemvT,
        ShapeClass::GemvWide,
        ShapeClass::GemvTWide,
        ShapeClass::Small,
        ShapeClass::Medium,
        ShapeClass::Large,
    ];

    /// The class of an `m x n` output whose B is row-major (or of no
    /// particular layout): never [`ShapeClass::GemvT`] or
    /// [`ShapeClass::GemvTWide`].
    pub fn of(m: usize, n: usize) -> ShapeClass {
        if m == 1 {
            if n >= GEMV_WIDE_N {
                ShapeClass::GemvWide
            } else {
                ShapeClass::Gemv
            }
        } else if m < 32 || n < 64 {
            ShapeClass::Small
        } else if m < 128 || n < 128 {
            ShapeClass::Medium
        } else {
            ShapeClass::Large
        }
    }

    /// The class of an `m x n` output whose B (`[K, N]`) has element
    /// strides `b_k` along K and `b_n` along N: [`ShapeClass::GemvT`] (or
    /// [`ShapeClass::GemvTWide`] from [`GEMV_WIDE_N`] columns on) for
    /// `m == 1`, `n > 1` and `b_k == 1 != b_n`, else [`ShapeClass::of`].
    pub fn of_layout(m: usize, n: usize, b_k: isize, b_n: isize) -> ShapeClass {
        match ShapeClass::of(m, n) {
            ShapeClass::Gemv if n > 1 && b_k == 1 && b_n != 1 => ShapeClass::GemvT,
            ShapeClass::GemvWide if b_k == 1 && b_n != 1 => ShapeClass::GemvTWide,
            class => class,
        }
    }

    /// Whether the class is a matrix-vector one ([`ShapeClass::Gemv`],
    /// [`ShapeClass::GemvT`] and their wide forms).
    pub fn is_gemv(self) -> bool {
        matches!(
            self,
            ShapeClass::Gemv | ShapeClass::GemvT | ShapeClass::GemvWide | ShapeClass::GemvTWide
        )
    }

    /// Whether the class reads B along K ([`ShapeClass::GemvT`],
    /// [`ShapeClass::GemvTWide`]).
    pub fn b_transposed(self) -> bool {
        matches!(self, ShapeClass::GemvT | ShapeClass::GemvTWide)
    }

    /// The class's name in the tuning cache file: `gemv`, `gemvt`,
    /// `gemv-wide`, `gemvt-wide`, `small`, `medium`, `large`.
    pub fn name(self) -> &'static str {
        match self {
            ShapeClass::Gemv => "gemv",
            ShapeClass::GemvT => "gemvt",
            ShapeClass::GemvWide => "gemv-wide",
            ShapeClass::GemvTWide => "gemvt-wide",
            ShapeClass::Small => "small",
            ShapeClass::Medium => "medium",
            ShapeClass::Large => "large",
        }
    }

    /// The class named `name` (see [`ShapeClass::name`]).
    pub fn from_name(name: &str) -> Option<ShapeClass> {
        ShapeClass::ALL.into_iter().find(|c| c.name() == name)
    }
}

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
    fn block(&self) -> (usize, usize) {
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
    fn k_step(&self) -> usize {
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
    fn a_outer_ok(&self) -> bool {
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

/// The K step of the cooperative-matrix family (one or two fragments).
pub(crate) const COOP_BK: u32 = 16;

/// The register-blocked tile for a shape class on a software adapter, and
/// the previous kernel's choice on GPUs (kept as a tuning candidate there).
/// Measured on lavapipe (AVX2, 8 lanes), see docs/PERFORMANCE.md: every
/// storage load there is a per-lane loop that costs far more than the
/// multiply-adds it feeds, so the per-thread block (loads per multiply-add
/// fall as `1/tm + 1/(4 nv)`) decides, bounded by the compile time of the
/// generated code (about 25 ms for 4 x 16 accumulators, 45 ms for 8 x 16,
/// 120 ms for 16 x 16, 350 ms for 16 x 32).
pub(crate) fn register_tile(class: ShapeClass, software: bool) -> GemmKernel {
    let tile = |wg_x, wg_y, tm, nv| GemmKernel::Register { wg_x, wg_y, tm, nv };
    match class {
        // Matrix-vector (decode steps): one row, threads across columns. On
        // lavapipe 16 columns per thread share each load of A, and 8-thread
        // workgroups (one 8-lane SIMD group: lavapipe runs a workgroup's
        // lanes 8 at a time, each group to the end of K) read 512
        // contiguous bytes of each row of a row-major B per group and give
        // both cores work at N = 384 (1.4x to 1.7x the 16 x 1 x 1 x 4 tile
        // at 1 x 1024 x 3072, 2026-12-01); GPUs want more threads per
        // workgroup.
        // From GEMV_WIDE_N columns on with a row-major B, 32 columns per
        // thread (one load of A feeds twice the columns; still 8
        // workgroups or more): 1.1x to 1.5x the 16-column tile at
        // 1 x 4096 x 4096 (2026-12-01, docs/PERFORMANCE.md). With B
        // transposed each column is a row of W, a stream of its own, and
        // the 16-column tile led in 6 comparisons of 7 (1 x 1024 x 3072,
        // 1 x 4096 x 4096, four probe runs).
        ShapeClass::GemvWide if software => tile(8, 1, 1, 8),
        ShapeClass::Gemv | ShapeClass::GemvT | ShapeClass::GemvTWide if software => {
            tile(8, 1, 1, 4)
        }
        ShapeClass::Gemv | ShapeClass::GemvT | ShapeClass::GemvWide | ShapeClass::GemvTWide => {
            tile(64, 1, 1, 1)
        }
        // Small or skinny on lavapipe and llvmpipe: 16 x 32 blocks, one
        // row of eight threads (A's loads uniform per SIMD group, as for
        // Medium below): MiniLM's attention products (96 heads of
        // 14 x 32 x 14 and 14 x 14 x 32) 1.5x to 2x the 32 x 32 tile, and
        // 1.3x to 2.6x at 16 x 1024 x 2048 and 2048 x 512 x 32 (2026-12-01).
        ShapeClass::Small if software => tile(8, 1, 16, 1),
        // Small or skinny: 32 x 32 tiles waste little on edges.
        ShapeClass::Small => tile(8, 8, 4, 1),
        // Medium on lavapipe and llvmpipe: 16 x 128 blocks, one row of
        // eight threads (one SIMD group) sharing 16 rows. A's addresses
        // then depend on the workgroup alone, and llvmpipe loads a uniform
        // address once per group instead of once per lane (so we read the
        // measurements); only B's loads are per lane.
        // At M = 77 (MiniLM) against the 32 x 128 tile of four thread rows:
        // 1.4x to 1.5x in CPU time, through both APIs (2026-12-01,
        // docs/PERFORMANCE.md).
        ShapeClass::Medium if software => tile(8, 1, 16, 4),
        // Medium: 64 x 128 tiles.
        ShapeClass::Medium => tile(8, 8, 8, 4),
        // Large: 128 x 128 tiles of 16 x 16 per thread on lavapipe (at
        // 1024^3 16 x 32 is 20% faster but compiles in 350 ms instead of
        // 120); on an H200 (Vulkan) at 4096^3 16 x 16 spills registers and
        // runs at half the speed of 8 x 16.
        ShapeClass::Large if software => tile(8, 8, 16, 4),
        ShapeClass::Large => tile(8, 8, 8, 4),
    }
}

/// A matrix-vector register tile (`wg_y == tm == 1`) narrowed to fewer
/// columns per thread (`nv` halved, down to 2, kept even for pair loads)
/// while its last workgroup would compute more than `n / 16` columns past
/// `n` and the narrower tile wastes fewer. Columns past `n` are clamped
/// to the last one, so they cost the same loads as real ones: at
/// 1 x 1536 x 384 the 32-column tile `register 8 1 1 8` computes 512
/// columns (two workgroups for two cores) and took 1.25x to 1.3x the time
/// of the 16-column one, which computes 384 (lavapipe, 2026-12-01,
/// docs/PERFORMANCE.md). Any other kernel is returned as is.
pub(crate) fn fit_gemv_columns(kernel: GemmKernel, n: usize) -> GemmKernel {
    let GemmKernel::Register {
        wg_x,
        wg_y: 1,
        tm: 1,
        mut nv,
    } = kernel
    else {
        return kernel;
    };
    let waste = |nv: u32| n.next_multiple_of(4 * wg_x as usize * nv as usize) - n;
    while nv > 2 && nv.is_multiple_of(4) && waste(nv) * 16 > n && waste(nv / 2) < waste(nv) {
        nv /= 2;
    }
    GemmKernel::Register {
        wg_x,
        wg_y: 1,
        tm: 1,
        nv,
    }
}

/// The workgroup-memory tile for a shape class (GPUs): 128 x 128 blocks of
/// 8 x 8 per thread for large outputs, 64 x 64 blocks of 4 x 4 otherwise.
pub(crate) fn shared_tile(class: ShapeClass) -> GemmKernel {
    match class {
        ShapeClass::Large => GemmKernel::Shared {
            wg_x: 16,
            wg_y: 16,
            tm: 8,
            nv: 2,
            bk: 8,
        },
        _ => GemmKernel::Shared {
            wg_x: 16,
            wg_y: 16,
            tm: 4,
            nv: 1,
            bk: 16,
        },
    }
}

#[cfg(test)]
/// Every specialisation the matmul dispatch functions can ask for.
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = vec![naive_spec()];
    // Every dtype, load mode, store mode and bias choice of every family,
    // in each family's tiles (the tuning candidates and the defaults).
    let modes = [Mode::Scalar, Mode::Inner, Mode::Outer];
    let mut kernels: Vec<GemmKernel> = Vec::new();
    for class in ShapeClass::ALL {
        for software in [false, true] {
            kernels.extend(super::tuning::candidates(
                class,
                software,
                DType::F32,
                &|_| true,
            ));
        }
    }
    kernels.push(GemmKernel::SplitK {
        ks: 8,
        cq: 8,
        subgroups: false,
    });
    let mut seen = std::collections::HashSet::new();
    // Subgroup and cooperative-matrix kernels need capabilities WebGPU
    // lacks: `extended_specs` lists them. The uniform family has one
    // specialisation per bias choice, listed here.
    for &kernel in &kernels {
        if let GemmKernel::Uniform { .. } = kernel
            && seen.insert(kernel)
        {
            for has_bias in [false, true] {
                out.push(uniform_variant(kernel, has_bias, 0).spec(
                    32,
                    gemm_uniform::MAX_WINDOWS,
                    None,
                ));
                // The row kernel at the smallest, a typical and the
                // largest A row (4, 384 and 16384 floats).
                for a_quads in [1, 96, 4096] {
                    out.push(uniform_variant(kernel, has_bias, a_quads).spec(
                        32,
                        gemm_uniform::MAX_WINDOWS,
                        None,
                    ));
                }
            }
        }
    }
    kernels.retain(|k| {
        seen.insert(*k)
            && !matches!(
                k,
                GemmKernel::Coop { .. }
                    | GemmKernel::SplitK {
                        subgroups: true,
                        ..
                    }
            )
    });
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for &kernel in &kernels {
            for a_mode in modes {
                if a_mode == Mode::Outer && !kernel.a_outer_ok() {
                    continue;
                }
                for b_mode in modes {
                    for out_vec in [false, true] {
                        for has_bias in [false, true] {
                            for k_tail in [false, true] {
                                out.push(
                                    GemmVariant {
                                        dtype,
                                        kernel,
                                        a_mode,
                                        b_mode,
                                        out_vec,
                                        has_bias,
                                        k_tail,
                                        scalar_staging: false,
                                        // Both store forms, without
                                        // doubling the list.
                                        looped_stores: k_tail,
                                        a_quads: 0,
                                    }
                                    .spec(32, 0, None),
                                );
                            }
                        }
                    }
                }
            }
            // With a fused epilogue (no bias: A, B, two loads and four
            // outputs are WebGPU's 8 storage bindings).
            let sample = epilogue::sample(dtype);
            for (a_mode, b_mode, out_vec, k_tail) in [
                (Mode::Inner, Mode::Inner, true, false),
                (Mode::Scalar, Mode::Outer, false, true),
            ] {
                let variant = GemmVariant {
                    dtype,
                    kernel,
                    a_mode,
                    b_mode,
                    out_vec,
                    has_bias: false,
                    k_tail,
                    scalar_staging: false,
                    looped_stores: false,
                    a_quads: 0,
                };
                out.push(variant.spec(32, 0, Some(&sample)));
            }
            // The staging Metal and D3D12 get, in every load mode.
            if kernel.family() == "shared" {
                for a_mode in modes {
                    for b_mode in modes {
                        out.push(
                            GemmVariant {
                                dtype,
                                kernel,
                                a_mode,
                                b_mode,
                                out_vec: true,
                                has_bias: true,
                                k_tail: true,
                                scalar_staging: true,
                                looped_stores: false,
                                a_quads: 0,
                            }
                            .spec(32, 0, None),
                        );
                    }
                }
            }
        }
    }
    out
}

/// The specialisations that need more than WebGPU's capabilities, with the
/// capabilities: the split-K kernel with subgroup shuffles (SUBGROUP), and
/// the cooperative-matrix family (with 32-lane subgroups; naga's HLSL and
/// GLSL back ends have no cooperative matrices, so SPIR-V and MSL only).
#[cfg(test)]
pub(crate) fn extended_specs() -> Vec<(Spec, &'static Kernel, naga::valid::Capabilities)> {
    use naga::valid::Capabilities as C;
    // The store and bias choices each family is checked with: a vec4
    // store; a bias with a k tail; a fused epilogue (no bias: WebGPU's 8
    // bindings) with a k tail. As (out_vec, has_bias, k_tail, epilogue).
    const STORES: [(bool, bool, bool, bool); 3] = [
        (true, false, false, false),
        (false, true, true, false),
        (false, false, true, true),
    ];
    let mut out = Vec::new();
    let mut push = |dtype: DType,
                    kernel: GemmKernel,
                    (a_mode, b_mode): (Mode, Mode),
                    (out_vec, has_bias, k_tail, epi): (bool, bool, bool, bool),
                    caps: C| {
        let sample = epi.then(|| epilogue::sample(dtype));
        let (spec, kernel) = GemmVariant {
            dtype,
            kernel,
            a_mode,
            b_mode,
            out_vec,
            has_bias,
            k_tail,
            scalar_staging: false,
            looped_stores: false,
            a_quads: 0,
        }
        .spec(32, 0, sample.as_ref());
        out.push((spec, kernel, caps));
    };
    let split_k = GemmKernel::SplitK {
        ks: 32,
        cq: 8,
        subgroups: true,
    };
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for modes in [
            (Mode::Inner, Mode::Inner),
            (Mode::Inner, Mode::Outer),
            (Mode::Scalar, Mode::Scalar),
        ] {
            for store in STORES {
                push(dtype, split_k, modes, store, C::SUBGROUP);
            }
        }
    }
    // Pair loads of B (f32, SHADER_INT64): the matrix-vector tile and a
    // large one, every store and bias choice.
    for kernel in [
        register_tile(ShapeClass::Gemv, true),
        register_tile(ShapeClass::Large, true),
    ] {
        for a_mode in [Mode::Inner, Mode::Scalar] {
            for store in STORES {
                push(
                    DType::F32,
                    kernel,
                    (a_mode, Mode::Pair),
                    store,
                    C::SHADER_INT64,
                );
            }
        }
    }
    // Eight-k pair loads of A and B (`x @ W^T`, f32, SHADER_INT64): the
    // medium and small tiles, with and without a bias, and with an
    // epilogue; K is a multiple of 8 (no k tail).
    for kernel in [
        register_tile(ShapeClass::Medium, true),
        register_tile(ShapeClass::Small, true),
    ] {
        for (out_vec, has_bias, epi) in [
            (true, false, false),
            (false, true, false),
            (true, false, true),
        ] {
            let store = (out_vec, has_bias, false, epi);
            let modes = (Mode::PairK, Mode::PairK);
            push(DType::F32, kernel, modes, store, C::SHADER_INT64);
        }
    }
    for (dtype, half, size) in [
        (DType::F32, false, 8),
        (DType::F32, false, 16),
        (DType::F16, true, 8),
        (DType::F16, true, 16),
        (DType::BF16, false, 8),
    ] {
        let coop = GemmKernel::Coop {
            size,
            half,
            frags: if size == 16 && !half { 1 } else { 2 },
        };
        for modes in [
            (Mode::Inner, Mode::Inner),
            (Mode::Outer, Mode::Outer),
            (Mode::Scalar, Mode::Scalar),
        ] {
            for store in STORES {
                push(
                    dtype,
                    coop,
                    modes,
                    store,
                    C::SUBGROUP | C::COOPERATIVE_MATRIX,
                );
            }
        }
    }
    out
}

/// How the kernel loads an operand (see `gemm_body`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    /// Scalar loads through both strides.
    Scalar,
    /// vec4 loads along the contiguous inner dimension (k for A, n for B).
    Inner,
    /// vec4 loads along the outer dimension (m for A, k for B): the operand
    /// is a transposed view.
    Outer,
    /// B only, f32, the register family with an even `nv` on software
    /// adapters with `SHADER_INT64`: `vec4<u64>` loads along n, two column
    /// quads (eight f32) per load. lavapipe runs every storage load as a
    /// loop over the lanes whose cost hardly depends on the width of a
    /// component, so 8-byte components halve the loads (1.3x to 1.6x in a
    /// raw matrix-vector kernel, see docs/PERFORMANCE.md). The operand's
    /// offset and strides are multiples of eight elements.
    Pair,
    /// The register family's `x @ W^T` layout on the same adapters (f32,
    /// `SHADER_INT64`, K a multiple of eight): A and B both read as
    /// `vec4<u64>` along k, eight k per load (A row-major, B a transposed
    /// view), and K walked in steps of eight. Per eight k a thread makes
    /// `tm + 4 nv` loads where the vec4 modes make twice that (see
    /// [`Mode::Pair`] for why loads are what counts). Offsets and the
    /// strides other than k's are multiples of eight elements.
    PairK,
}

impl Mode {
    const ALL: [Mode; 5] = [
        Mode::Scalar,
        Mode::Inner,
        Mode::Outer,
        Mode::Pair,
        Mode::PairK,
    ];

    fn vec(self) -> bool {
        self != Mode::Scalar
    }

    /// The mode's name in a [`GemmVariant::key`].
    fn name(self) -> &'static str {
        match self {
            Mode::Scalar => "scalar",
            Mode::Inner => "inner",
            Mode::Outer => "outer",
            Mode::Pair => "pair",
            Mode::PairK => "pairk",
        }
    }
}

/// The WGSL helpers of the pair modes ([`Mode::Pair`], [`Mode::PairK`]):
/// the f32 halves of a u64 word, and the first and second quad of a
/// `vec4<u64>` (appended to the bindings once, before [`pair_loads`]).
const PAIR_HELPERS: &str = "
fn pair_lo(w: u64) -> f32 { return bitcast<f32>(u32(w & 0xfffffffflu)); }
fn pair_hi(w: u64) -> f32 { return bitcast<f32>(u32(w >> 32u)); }
fn pair_first(w: vec4<u64>) -> vec4<f32> { return vec4<f32>(pair_lo(w.x), pair_hi(w.x), pair_lo(w.y), pair_hi(w.y)); }
fn pair_second(w: vec4<u64>) -> vec4<f32> { return vec4<f32>(pair_lo(w.z), pair_hi(w.z), pair_lo(w.w), pair_hi(w.w)); }
";

/// The element loads of binding `name` (an `array<vec4<u64>>` of f32
/// pairs): `{name}_pair_one(e)` (one element) and `{name}_pair_four(e)`
/// (four from a multiple of four), with their [`Access`].
fn pair_loads(name: &str) -> (String, Access) {
    let text = format!(
        "fn {name}_pair_one(e: u32) -> f32 {{ let x = {name}[e >> 3u][(e >> 1u) & 3u]; return select(pair_lo(x), pair_hi(x), (e & 1u) == 1u); }}\n\
         fn {name}_pair_four(e: u32) -> vec4<f32> {{ let w = {name}[e >> 3u]; return select(pair_first(w), pair_second(w), (e & 4u) != 0u); }}\n"
    );
    let access = Access {
        arr: "vec4<u64>",
        one: format!("{name}_pair_one(e)"),
        four: format!("{name}_pair_four(e)"),
    };
    (text, access)
}

/// Whether an operand of `rows x cols` can be read as vec4s along the
/// dimension with stride `unit` (which must be 1), the other stride and every
/// offset being multiples of four elements. Strides of length-1 dimensions
/// do not matter.
fn vec_ok(op: &Operand<'_>, rows: usize, cols: usize, along_cols: bool) -> bool {
    let (unit, other, unit_len, other_len) = if along_cols {
        (col_stride(op), row_stride(op), cols, rows)
    } else {
        (row_stride(op), col_stride(op), rows, cols)
    };
    unit_len > 1
        && unit == 1
        && (other_len == 1 || other.rem_euclid(4) == 0)
        && op.offset.is_multiple_of(4)
        && batch_strides(op).iter().all(|s| s.rem_euclid(4) == 0)
}

/// What both pair modes ask of the device and the kernel, whatever the
/// operands: f32, a register tile, a software adapter with `SHADER_INT64`.
fn pair_device_ok(cx: &Context, kernel: GemmKernel, dtype: DType) -> bool {
    matches!(kernel, GemmKernel::Register { .. })
        && dtype == DType::F32
        && cx.software
        && cx.features.contains(wgpu::Features::SHADER_INT64)
}

/// Whether the register family's stores are one loop (`looped_stores`):
/// large tiles on software adapters only; the small and matrix-vector
/// tiles' few stores compile fast straight-line, and keep that form
/// tested there too.
fn looped_stores(cx: &Context, kernel: GemmKernel) -> bool {
    cx.software && matches!(kernel, GemmKernel::Register { tm, nv, .. } if tm * nv > 16)
}

/// Whether `kernel` stages its tiles in f32 arrays (`scalar_staging`).
fn scalar_staging(cx: &Context, kernel: GemmKernel) -> bool {
    cx.scalar_staging && kernel.family() == "shared"
}

/// Whether `g`'s B can be read with [`Mode::Pair`] by `kernel` on this
/// device: f32, a register tile with an even `nv`, a software adapter with
/// `SHADER_INT64`, B unit-stride along n with its offset and other
/// strides multiples of eight elements.
fn pair_ok(cx: &Context, g: &Gemm<'_>, kernel: GemmKernel) -> bool {
    let b = &g.b;
    pair_device_ok(cx, kernel, g.dtype)
        && matches!(kernel, GemmKernel::Register { nv, .. } if nv.is_multiple_of(2))
        && vec_ok(b, g.k, g.n, true)
        && (g.k == 1 || row_stride(b).rem_euclid(8) == 0)
        && b.offset.is_multiple_of(8)
        && batch_strides(b).iter().all(|s| s.rem_euclid(8) == 0)
}

/// Whether `g` can be read with [`Mode::PairK`] by `kernel` on this
/// device: f32, a register tile, a software adapter with `SHADER_INT64`, K
/// a multiple of eight, A unit-stride along k and B along k (`x @ W^T`),
/// their offsets and other strides multiples of eight elements.
fn pair_k_ok(cx: &Context, g: &Gemm<'_>, kernel: GemmKernel) -> bool {
    let eights = |op: &Operand<'_>, other: isize, other_len: usize| {
        (other_len == 1 || other.rem_euclid(8) == 0)
            && op.offset.is_multiple_of(8)
            && batch_strides(op).iter().all(|s| s.rem_euclid(8) == 0)
    };
    pair_device_ok(cx, kernel, g.dtype)
        && g.k >= 8
        && g.k.is_multiple_of(8)
        && col_stride(&g.a) == 1
        && row_stride(&g.b) == 1
        && eights(&g.a, row_stride(&g.a), g.m)
        && eights(&g.b, col_stride(&g.b), g.n)
}

/// The WGSL for one operand: its binding's element type, and expressions
/// for one element and for four consecutive ones (index `e`, a multiple of
/// four for the latter) as f32.
struct Access {
    arr: &'static str,
    one: String,
    four: String,
}

fn access(dtype: DType, vec: bool, name: &str) -> Access {
    let scalar_four = |one: &dyn Fn(&str) -> String| {
        format!(
            "vec4<f32>({}, {}, {}, {})",
            one("e"),
            one("(e + 1u)"),
            one("(e + 2u)"),
            one("(e + 3u)")
        )
    };
    match (dtype, vec) {
        (DType::F16, false) => {
            let one = |i: &str| format!("f32({name}[{i}])");
            Access {
                arr: "f16",
                one: one("e"),
                four: scalar_four(&one),
            }
        }
        (DType::F16, true) => Access {
            arr: "vec4<f16>",
            one: format!("f32({name}[e >> 2u][e & 3u])"),
            four: format!("vec4<f32>({name}[e >> 2u])"),
        },
        (DType::BF16, false) => {
            let one = |i: &str| {
                format!(
                    "select(bfloat_lo({name}[{i} >> 1u]), bfloat_hi({name}[{i} >> 1u]), ({i} & 1u) == 1u)"
                )
            };
            Access {
                arr: "u32",
                one: one("e"),
                four: scalar_four(&one),
            }
        }
        (DType::BF16, true) => Access {
            arr: "vec2<u32>",
            one: format!(
                "select(bfloat_lo({name}[e >> 2u][(e >> 1u) & 1u]), bfloat_hi({name}[e >> 2u][(e >> 1u) & 1u]), (e & 1u) == 1u)"
            ),
            four: format!("bfloat4({name}[e >> 2u])"),
        },
        (_, false) => {
            let one = |i: &str| format!("{name}[{i}]");
            Access {
                arr: "f32",
                one: one("e"),
                four: scalar_four(&one),
            }
        }
        (_, true) => Access {
            arr: "vec4<f32>",
            one: format!("{name}[e >> 2u][e & 3u]"),
            four: format!("{name}[e >> 2u]"),
        },
    }
}

/// The output binding's element type and the statements storing one element
/// (`x` at `e`) and four (`v` at `e`, a multiple of four).
fn store(dtype: DType, vec: bool) -> (&'static str, String, String) {
    match (dtype, vec) {
        (DType::F16, false) => (
            "f16",
            "out[e] = f16(x)".into(),
            "out[e] = f16(v.x); out[e + 1u] = f16(v.y); out[e + 2u] = f16(v.z); out[e + 3u] = f16(v.w)"
                .into(),
        ),
        (DType::F16, true) => (
            "vec4<f16>",
            "out[e >> 2u][e & 3u] = f16(x)".into(),
            "out[e >> 2u] = vec4<f16>(v)".into(),
        ),
        // Two bf16 share a word: a lone element is merged into its half with
        // atomics, which leave the other half (another thread's) intact.
        (DType::BF16, _) => (
            "atomic<u32>",
            "let s = (e & 1u) * 16u; atomicAnd(&out[e >> 1u], ~(0xffffu << s)); \
             atomicOr(&out[e >> 1u], bfloat_bits(x) << s)"
                .into(),
            "atomicStore(&out[e >> 1u], bfloat_bits(v.x) | (bfloat_bits(v.y) << 16u)); \
             atomicStore(&out[(e >> 1u) + 1u], bfloat_bits(v.z) | (bfloat_bits(v.w) << 16u))"
                .into(),
        ),
        (_, false) => (
            "f32",
            "out[e] = x".into(),
            "out[e] = v.x; out[e + 1u] = v.y; out[e + 2u] = v.z; out[e + 3u] = v.w".into(),
        ),
        (_, true) => (
            "vec4<f32>",
            "out[e >> 2u][e & 3u] = x".into(),
            "out[e >> 2u] = v".into(),
        ),
    }
}

/// The register family's tile: a workgroup of `wg_x * wg_y` threads, each
/// computing `tm` rows by `4 * nv` columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Tile {
    pub wg_x: u32,
    pub wg_y: u32,
    pub tm: u32,
    pub nv: u32,
}

/// The generated, straight-line parts of the GEMM (see `wgsl/gemm.wgsl`)
/// for a tile and the operand load modes.
pub(crate) struct GemmBody {
    /// `DECLS`: per-thread row offsets, column quads and accumulators.
    pub decls: String,
    /// `CHUNK`: the loads and multiply-adds of one chunk of four k.
    pub chunk: String,
    /// `EPILOGUE`: one `store_quad` per accumulator.
    pub epilogue: String,
}

/// Generates [`GemmBody`]. Why straight-line code: on lavapipe a private
/// array indexed by a loop counter that NIR does not unroll lives in memory
/// and each access becomes a per-lane loop, and NIR stops unrolling large
/// bodies; named variables and literal indices keep every accumulator in
/// registers (or plain stack slots) at any tile size, so the tile is limited
/// only by register pressure and compile time.
///
/// `looped`: the stores as one loop (see [`store_quads`]).
pub(crate) fn gemm_body(tile: Tile, a_mode: Mode, b_mode: Mode, looped: bool) -> GemmBody {
    let (tm, nv) = (tile.tm, tile.nv);
    let mut decls = Vec::new();
    for r in 0..tm {
        decls.push(format!(
            "let arow_{r} = a_base + min(row0 + {r}u, p.m - 1u) * p.a_rs;"
        ));
    }
    // Column group v of this thread: quad q0 + v WG_X (lanes side by side),
    // or with pair loads quad q0 + lid.x + 2 (v / 2) WG_X + v % 2 (pairs of
    // quads side by side; q0 + lid.x is even since NV is).
    let pair = b_mode == Mode::Pair;
    let quad_of = |v: u32| {
        if pair {
            format!("q0 + lid.x + {}u", 2 * (v / 2) * tile.wg_x + v % 2)
        } else {
            format!("q0 + {}u", v * tile.wg_x)
        }
    };
    for v in 0..nv {
        decls.push(format!("let quad_{v} = min({}, last_quad);", quad_of(v)));
    }
    for r in 0..tm {
        for v in 0..nv {
            decls.push(format!("var acc_{r}_{v} = vec4<f32>(0.0);"));
        }
    }
    if a_mode == Mode::PairK {
        debug_assert_eq!(b_mode, Mode::PairK);
        let c = pair_k_chunk(tile, &mut decls);
        return GemmBody {
            decls: indent(decls, 1),
            chunk: indent(c, 2),
            epilogue: indent(
                store_quads(&calls(tile, &quad_of), "c_base", "out_base", looped),
                1,
            ),
        };
    }
    let mut c = Vec::new();
    // The 4 x 4NV block of B: b{kk}_{v} = B[k0 + kk, 4 quad_v .. 4 quad_v + 4].
    // In the tail chunk a vec4 along k is masked lane by lane (`kmasked`),
    // a vec4 at one k as a whole.
    for v in 0..nv {
        if pair {
            // One vec4<u64> per k holds quads v and v + 1 (v even; a clamped
            // quad_v past the last quad is never stored).
            if v % 2 == 0 {
                for kk in 0..4 {
                    c.push(format!(
                        "let w{kk}_{v} = b[(b_base + kc[{kk}] * p.b_rs + quad_{v} * 4u) >> 3u];"
                    ));
                    for (h, half) in [(0, "first"), (1, "second")] {
                        c.push(format!(
                            "let b{kk}_{} = select(pair_{half}(w{kk}_{v}), vec4<f32>(0.0), tail && !kmask[{kk}]);",
                            v + h
                        ));
                    }
                }
            }
            continue;
        }
        if b_mode == Mode::Inner {
            for kk in 0..4 {
                c.push(format!(
                    "let b{kk}_{v} = select(b4(b_base + kc[{kk}] * p.b_rs + quad_{v} * 4u), vec4<f32>(0.0), tail && !kmask[{kk}]);"
                ));
            }
            continue;
        }
        // Four columns, each a vec4 along k (Outer) or four scalars,
        // transposed in registers.
        for j in 0..4 {
            c.push(format!(
                "let e{j}_{v} = b_base + min(quad_{v} * 4u + {j}u, p.n - 1u) * p.b_cs;"
            ));
            let load = if b_mode == Mode::Outer {
                format!("b4(e{j}_{v} + k0)")
            } else {
                format!(
                    "vec4<f32>(b1(e{j}_{v} + kc.x * p.b_rs), b1(e{j}_{v} + kc.y * p.b_rs), \
                     b1(e{j}_{v} + kc.z * p.b_rs), b1(e{j}_{v} + kc.w * p.b_rs))"
                )
            };
            c.push(format!("let t{j}_{v} = kmasked({load}, tail, kmask);"));
        }
        for kk in 0..4 {
            c.push(format!(
                "let b{kk}_{v} = vec4<f32>(t0_{v}[{kk}], t1_{v}[{kk}], t2_{v}[{kk}], t3_{v}[{kk}]);"
            ));
        }
    }
    // A, one row at a time (x{r} = A[row r, k0 .. k0 + 4]; four rows at a
    // time for column-major A), each followed by its multiply-adds so that
    // few A values are live at once.
    for r in 0..tm {
        match a_mode {
            Mode::Inner => c.push(format!(
                "let x{r} = kmasked(a4(arow_{r} + k0), tail, kmask);"
            )),
            // (Pair is a mode of B only; PairK has its own chunk.)
            Mode::Scalar | Mode::Pair | Mode::PairK => c.push(format!(
                "let x{r} = kmasked(vec4<f32>(a1(arow_{r} + kc.x * p.a_cs), \
                 a1(arow_{r} + kc.y * p.a_cs), a1(arow_{r} + kc.z * p.a_cs), \
                 a1(arow_{r} + kc.w * p.a_cs)), tail, kmask);"
            )),
            Mode::Outer => {
                // `tm` is a multiple of four in this mode: s{kk}_{g} holds
                // rows g .. g + 4 at k0 + kk.
                let (g, i) = (r - r % 4, r % 4);
                if i == 0 {
                    for kk in 0..4 {
                        c.push(format!(
                            "let s{kk}_{g} = select(a4(arow_{g} + kc[{kk}] * p.a_cs), vec4<f32>(0.0), tail && !kmask[{kk}]);"
                        ));
                    }
                }
                c.push(format!(
                    "let x{r} = vec4<f32>(s0_{g}[{i}], s1_{g}[{i}], s2_{g}[{i}], s3_{g}[{i}]);"
                ));
            }
        }
        for v in 0..nv {
            c.push(format!(
                "acc_{r}_{v} = fma(vec4<f32>(x{r}.w), b3_{v}, fma(vec4<f32>(x{r}.z), b2_{v}, \
                 fma(vec4<f32>(x{r}.y), b1_{v}, fma(vec4<f32>(x{r}.x), b0_{v}, acc_{r}_{v}))));"
            ));
        }
    }
    GemmBody {
        decls: indent(decls, 1),
        chunk: indent(c, 2),
        epilogue: indent(
            store_quads(&calls(tile, &quad_of), "c_base", "out_base", looped),
            1,
        ),
    }
}

/// The `store_quad` arguments of every accumulator of `tile`, its column
/// quads given by `quad_of`.
fn calls(tile: Tile, quad_of: &dyn Fn(u32) -> String) -> Vec<[String; 3]> {
    let mut calls = Vec::new();
    for r in 0..tile.tm {
        for v in 0..tile.nv {
            calls.push([format!("row0 + {r}u"), quad_of(v), format!("acc_{r}_{v}")]);
        }
    }
    calls
}

/// [`Mode::PairK`]'s chunk of eight k (the loop steps by eight, K is a
/// multiple of it), adding the column offsets of B to `decls`. A first:
/// y{r} = A[row r, k0 .. k0 + 8] in one load, x{r}_{h} its quad h; then
/// per column group v the eight k of its four columns in four loads,
/// transposed in registers into b{kk}_{v}_{h} = B[k0 + 4h + kk, quad v],
/// and its multiply-adds in k order (as the four-k chunk does, so results
/// do not depend on the mode).
fn pair_k_chunk(tile: Tile, decls: &mut Vec<String>) -> Vec<String> {
    let (tm, nv) = (tile.tm, tile.nv);
    for v in 0..nv {
        for j in 0..4 {
            decls.push(format!(
                "let e{j}_{v} = b_base + min(quad_{v} * 4u + {j}u, p.n - 1u) * p.b_cs;"
            ));
        }
    }
    let halves = [(0, "first"), (1, "second")];
    let mut c = Vec::new();
    for r in 0..tm {
        c.push(format!("let y{r} = a[(arow_{r} + k0) >> 3u];"));
        for (h, half) in halves {
            c.push(format!("let x{r}_{h} = pair_{half}(y{r});"));
        }
    }
    for v in 0..nv {
        for j in 0..4 {
            c.push(format!("let w{j}_{v} = b[(e{j}_{v} + k0) >> 3u];"));
        }
        for (h, half) in halves {
            for j in 0..4 {
                c.push(format!("let t{j}_{v}_{h} = pair_{half}(w{j}_{v});"));
            }
            for kk in 0..4 {
                c.push(format!(
                    "let b{kk}_{v}_{h} = vec4<f32>(t0_{v}_{h}[{kk}], t1_{v}_{h}[{kk}], t2_{v}_{h}[{kk}], t3_{v}_{h}[{kk}]);"
                ));
            }
        }
        for r in 0..tm {
            let mut e = format!("acc_{r}_{v}");
            for h in 0..2 {
                for (kk, lane) in ["x", "y", "z", "w"].iter().enumerate() {
                    e = format!("fma(vec4<f32>(x{r}_{h}.{lane}), b{kk}_{v}_{h}, {e})");
                }
            }
            c.push(format!("acc_{r}_{v} = {e};"));
        }
    }
    c
}

/// A family's stores: `store_quad(row, quad, acc, c_base, out_base)` for
/// each `[row, quad, acc]` of `calls`, straight-line; or, when `looped` (a
/// fused epilogue, whose code drivers inline at every call), one loop over
/// arrays of the calls' arguments. Its bound is not a compile-time constant
/// (`p.m` is at least 1 whenever the kernel runs), so drivers do not unroll
/// it: unrolled, an `exp` epilogue of the 16 x 16 tile took lavapipe 11 s
/// to compile, against 3.7 s looped (about what the elementwise `exp`
/// kernel alone takes there).
pub(crate) fn store_quads(
    calls: &[[String; 3]],
    c_base: &str,
    out_base: &str,
    looped: bool,
) -> Vec<String> {
    if !looped || calls.len() == 1 {
        return calls
            .iter()
            .map(|[r, q, acc]| format!("store_quad({r}, {q}, {acc}, {c_base}, {out_base});"))
            .collect();
    }
    let n = calls.len();
    let list = |i: usize| {
        calls
            .iter()
            .map(|c| c[i].clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        format!("var quad_rows = array<u32, {n}>({});", list(0)),
        format!("var quad_cols = array<u32, {n}>({});", list(1)),
        format!("var quad_accs = array<vec4<f32>, {n}>({});", list(2)),
        format!(
            "for (var i = 0u; i < min({n}u, p.m * {n}u); i++) {{ store_quad(quad_rows[i], quad_cols[i], quad_accs[i], {c_base}, {out_base}); }}"
        ),
    ]
}

/// Generated WGSL lines, each indented `depth` levels and ended.
pub(crate) fn indent(lines: Vec<String>, depth: usize) -> String {
    let pad = " ".repeat(depth * 4);
    lines
        .iter()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>()
}

/// Start compiling the tuning file's warm-up list on a thread of its own
/// (`tuning::WARM_UP_MAX`): the kernels `cx`'s device can run, as the
/// GEMM dispatch would ask for them.
///
/// Not on GL: there every wgpu call holds the one EGL context lock, so the
/// thread's compiles would wait on the program's work and the program's
/// on them (and wgpu-hal gives up on that lock after 6 s with a panic,
/// which a cold compile of a large tile on llvmpipe can approach).
pub(crate) fn warm_up(cx: &Context) {
    if cx.backend == wgpu::Backend::Gl {
        return;
    }
    let subgroup = cx.subgroup_min_size;
    let windows = gemm_uniform::windows(cx);
    let jobs = cx
        .tuning
        .warm_up_list()
        .into_iter()
        .filter(|v| v.possible_on(cx))
        .map(|v| {
            let build: super::WarmBuild = Box::new(move || v.spec(subgroup, windows, None));
            (QuickKey::Gemm(v), build)
        })
        .collect();
    cx.cache.warm_up(jobs);
}

/// One specialisation of the GEMM: everything its WGSL depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GemmVariant {
    /// f32, f16 or bf16: A, B, the bias and the output.
    dtype: DType,
    kernel: GemmKernel,
    a_mode: Mode,
    b_mode: Mode,
    /// Vector stores; needs `n % 4 == 0`.
    out_vec: bool,
    has_bias: bool,
    /// K is not a multiple of the kernel's K step: the last step is masked.
    k_tail: bool,
    /// The workgroup-memory family's staging in f32 arrays
    /// (`Context::scalar_staging`); false for the other families.
    scalar_staging: bool,
    /// The register family's stores as one loop ([`store_quads`]) even
    /// without a fused epilogue: on software adapters, where the
    /// straight-line stores of a large tile are about half of the driver's
    /// pipeline creation (lavapipe, `register 8 8 16 4`: 97 to 104 ms
    /// straight, 49 to 57 looped, 2026-12-01) and the loop costs nothing
    /// measurable per call. GPUs keep them straight-line (a dynamically
    /// indexed array of accumulators may live in local memory there).
    looped_stores: bool,
    /// The uniform family's row kernel (B read along K): A's row as a
    /// uniform binding of this many quads (K / 4). 0 for the column kernel
    /// and every other family.
    a_quads: u32,
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

    /// Whether [`dispatches`] could ask for this variant on `cx`'s device,
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
                || self == &uniform_variant(self.kernel, self.has_bias, self.a_quads))
            && (self.a_quads == 0
                || matches!(self.kernel, GemmKernel::Uniform { .. })
                    && gemm_uniform::windows(cx) >= 2
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

    /// The kernel text's substitutions for this variant; `subgroup` is the
    /// adapter's subgroup size (the cooperative family's workgroup is four
    /// subgroups). With an `epilogue` (its `rank` and dense flags filled
    /// in), the kernel has no `out` binding: the epilogue's inputs and
    /// outputs follow A, B and the bias, and the whole text becomes the body
    /// of [`GEMM_EPILOGUE`] (which adds the elementwise helpers).
    ///
    /// `windows`: the uniform family's windows per dispatch on the device
    /// (`gemm_uniform::windows`; unused by the other families).
    fn spec(
        self,
        subgroup: u32,
        windows: u32,
        epilogue: Option<&Program>,
    ) -> (Spec, &'static Kernel) {
        let GemmVariant {
            dtype,
            kernel,
            a_mode,
            b_mode,
            out_vec,
            has_bias,
            k_tail,
            scalar_staging,
            looped_stores,
            a_quads,
        } = self;
        let mut pair_text = String::new();
        let mut pairs = |name: &str| {
            let (text, access) = pair_loads(name);
            if pair_text.is_empty() {
                pair_text.push_str(PAIR_HELPERS);
            }
            pair_text.push_str(&text);
            access
        };
        let aa = if a_mode == Mode::PairK {
            pairs("a")
        } else {
            access(dtype, a_mode.vec(), "a")
        };
        let ba = if matches!(b_mode, Mode::Pair | Mode::PairK) {
            pairs("b")
        } else {
            access(dtype, b_mode.vec(), "b")
        };
        let ca = access(dtype, false, "bias");
        let (out_arr, out_one, out_four) = store(dtype, out_vec);
        let mut bindings = format!(
            "@group(0) @binding(1) var<storage, read> a: array<{}>;\n\
             @group(0) @binding(2) var<storage, read> b: array<{}>;\n",
            aa.arr, ba.arr
        );
        bindings.push_str(&pair_text);
        let out_binding = if has_bias {
            bindings.push_str(&format!(
                "@group(0) @binding(3) var<storage, read> bias: array<{}>;\n",
                ca.arr
            ));
            4
        } else {
            3
        };
        let (out_one, out_four, epilogue_fn, mut epilogue_params) = match epilogue {
            None => {
                bindings.push_str(&format!(
                    "@group(0) @binding({out_binding}) var<storage, read_write> out: array<{out_arr}>;"
                ));
                (
                    out_one,
                    out_four,
                    epilogue::NO_EPILOGUE.into(),
                    String::new(),
                )
            }
            Some(e) => (
                String::new(),
                String::new(),
                epilogue::wgsl(e, out_binding),
                epilogue::params_field(e),
            ),
        };
        let bias_one = if has_bias { ca.one } else { "0.0".into() };
        let flag = |b: bool| if b { "true" } else { "false" }.to_string();
        let (family, mut subs): (&'static Kernel, Vec<(&'static str, String)>) = match kernel {
            GemmKernel::Register { wg_x, wg_y, tm, nv } => {
                let body = gemm_body(
                    Tile { wg_x, wg_y, tm, nv },
                    a_mode,
                    b_mode,
                    epilogue.is_some() || looped_stores,
                );
                (
                    &GEMM,
                    vec![
                        ("WG_X", wg_x.to_string()),
                        ("WG_Y", wg_y.to_string()),
                        ("TM", tm.to_string()),
                        ("NV", nv.to_string()),
                        (
                            "K_STEP",
                            if a_mode == Mode::PairK { "8" } else { "4" }.into(),
                        ),
                        ("DECLS", body.decls),
                        ("CHUNK", body.chunk),
                        ("EPILOGUE", body.epilogue),
                    ],
                )
            }
            GemmKernel::Shared { .. } => (
                &GEMM_SHARED,
                gemm_shared::subs(kernel, a_mode, b_mode, epilogue.is_some(), scalar_staging),
            ),
            GemmKernel::SplitK { ks, cq, subgroups } => (
                &GEMM_SPLITK,
                gemm_splitk::subs(ks, cq, subgroups, a_mode, b_mode),
            ),
            GemmKernel::Coop { .. } => (
                &GEMM_COOP,
                gemm_coop::subs(kernel, subgroup, a_mode, b_mode),
            ),
            GemmKernel::Uniform { .. } => {
                debug_assert!(
                    epilogue.is_none(),
                    "the uniform family has no fused epilogue"
                );
                if a_quads > 0 {
                    // The row kernel: one of the device's windows is A's.
                    epilogue_params = gemm_uniform::params_field(windows - 1);
                    (
                        &GEMM_UNIFORM_ROWS,
                        gemm_uniform::row_subs(windows - 1, a_quads, out_binding as u32 + 1),
                    )
                } else {
                    epilogue_params = gemm_uniform::params_field(windows);
                    (
                        &GEMM_UNIFORM,
                        gemm_uniform::subs(kernel, windows, out_binding as u32 + 1),
                    )
                }
            }
        };
        subs.extend([
            ("OUT_VEC", flag(out_vec)),
            ("HAS_BIAS", flag(has_bias)),
            ("HAS_EPILOGUE", flag(epilogue.is_some())),
            ("EPILOGUE_FN", epilogue_fn),
            ("EPILOGUE_PARAMS", epilogue_params),
            ("K_TAIL", flag(k_tail)),
            (
                "ENABLE_F16",
                flag(dtype == DType::F16 || matches!(kernel, GemmKernel::Coop { half: true, .. })),
            ),
            ("BINDINGS", bindings),
            ("A_ONE", aa.one),
            ("A_FOUR", aa.four),
            ("B_ONE", ba.one),
            ("B_FOUR", ba.four),
            ("BIAS_ONE", bias_one),
            ("OUT_ONE", out_one),
            ("OUT_FOUR", out_four),
        ]);
        let subs: Vec<(&'static str, &str)> = subs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let reads = 2 + has_bias as u32;
        let Some(e) = epilogue else {
            let (mut spec, family) = family.spec_with_bindings(&subs, reads, 1);
            if let GemmKernel::Uniform { .. } = kernel {
                let b_windows = if a_quads > 0 { windows - 1 } else { windows };
                spec.windows = vec![WINDOW_BYTES; b_windows as usize];
                if a_quads > 0 {
                    spec.windows.push(16 * a_quads as u64);
                }
                spec.params = (GEMM_WORDS + gemm_uniform::extra_words(b_windows))
                    .next_multiple_of(super::PARAMS_WORDS) as u32;
            }
            return (spec, family);
        };
        // The family's text, its directives (`enable ...;`) moved before the
        // elementwise helpers.
        let (spec, _) = family.spec_with_bindings(&subs, reads, 1);
        let text = family.source_for(&spec);
        let (mut directives, mut body) = (String::new(), String::new());
        for line in text.lines() {
            let to = if line.starts_with("enable ") && body.is_empty() {
                &mut directives
            } else {
                &mut body
            };
            to.push_str(line);
            to.push('\n');
        }
        let (mut spec, kernel) = GEMM_EPILOGUE.spec_with_bindings(
            &[("DIRECTIVES", &directives), ("BODY", &body)],
            reads + e.inputs as u32,
            e.outputs.len() as u32,
        );
        let rank = e.rank as usize;
        spec.params = (GEMM_WORDS + e.layout(4 + rank, &[rank]).words)
            .next_multiple_of(super::PARAMS_WORDS) as u32;
        (spec, kernel)
    }
}

/// Everything the GEMM needs besides the device.
pub(crate) struct Gemm<'a> {
    /// f32, f16 or bf16: the dtype of A, B, the bias and the output.
    pub dtype: DType,
    pub batch_shape: [usize; 4],
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// `[batch.., m, k]` and `[batch.., k, n]` (six strides each).
    pub a: Operand<'a>,
    pub b: Operand<'a>,
    /// `beta * bias` is added to every output; its six strides broadcast it
    /// to `[batch.., m, n]`.
    pub bias: Option<Operand<'a>>,
    pub alpha: f32,
    pub beta: f32,
    /// Dense `[batch.., m, n]` output (with an epilogue, any buffer: the
    /// epilogue's outputs are written instead).
    pub out: &'a wgpu::Buffer,
    /// A fused elementwise epilogue over the `[batch.., m, n]` results
    /// (see `kernels::epilogue`).
    pub epilogue: Option<Epilogue<'a>>,
}

/// The dispatches of the GEMM: one, several when the grid passes the
/// per-dimension workgroup limit, none for an empty output. The kernel is
/// the one forced on the device, else the one chosen for the shape class
/// and dtype (timed on first use, see `kernels::tuning`), else the
/// family's default, where the adapter can run it.
///
/// # Errors
/// [`crate::Error::TooLarge`] for sizes, strides or offsets past `u32`,
/// [`crate::Error::Kernel`] if the specialisation fails to compile; a
/// failed tuning run's errors (a lost device).
pub(crate) fn gemm(cx: &Context, g: &mut Gemm<'_>) -> Result<Vec<Dispatch>> {
    let batch: usize = g.batch_shape.iter().product();
    if batch * g.m * g.n == 0 {
        return Ok(Vec::new());
    }
    let class = ShapeClass::of_layout(g.m, g.n, row_stride(&g.b), col_stride(&g.b));
    let kernel = cx.tuning.kernel(
        cx,
        g.dtype,
        class,
        [batch, g.m, g.n, g.k],
        row_stride(&g.b) == 1 && col_stride(&g.b) != 1,
    )?;
    dispatches(cx, g, kernel)
}

/// The one specialisation of the uniform family for `kernel` (with or
/// without a bias), f32 with no K tail, A read one element at a time. With
/// `a_quads` 0 the column kernel (B along n, vector stores); otherwise the
/// row kernel (A's row as a uniform binding of `a_quads` quads, B through
/// its windows alone, so its storage bindings are declared one element at
/// a time; one store per column).
fn uniform_variant(kernel: GemmKernel, has_bias: bool, a_quads: u32) -> GemmVariant {
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

/// The dispatches of the uniform family (`GemmKernel::Uniform`), or `None`
/// for a product it cannot run: not f32, a batch, more than one row, K = 0,
/// a fused epilogue, or operands that `gemm_uniform::plan` and
/// `gemm_uniform::a_window` cannot place in windows. B unit-stride along K
/// and not along n takes the row kernel (every dispatch stores columns of
/// its own); any other B the column kernel (one dispatch per group of
/// windows, the first storing and the later ones adding).
///
/// # Errors
/// As [`gemm`].
fn uniform_dispatches(
    cx: &Context,
    g: &Gemm<'_>,
    kernel: GemmKernel,
) -> Result<Option<Vec<Dispatch>>> {
    let batch: usize = g.batch_shape.iter().product();
    let windows = gemm_uniform::windows(cx);
    // (K = 0 goes to the register tile, which stores `beta * bias`: the
    // family would plan no dispatch at all.)
    if !usable(cx, kernel, g.dtype) || batch != 1 || g.m != 1 || g.k == 0 || g.epilogue.is_some() {
        return Ok(None);
    }
    // The tuning's test of a transposed B (`ShapeClass` proxies).
    let along_k = row_stride(&g.b) == 1 && col_stride(&g.b) != 1;
    let b_windows = if along_k {
        windows.saturating_sub(1)
    } else {
        windows
    };
    let Some(plan) = gemm_uniform::plan(cx, &g.b, g.k, g.n, along_k, b_windows) else {
        return Ok(None);
    };
    let a_window = if along_k {
        match gemm_uniform::a_window(cx, &g.a, g.k) {
            Some(offset) => Some(Window {
                buffer: g.a.buffer.clone(),
                offset,
                size: 4 * g.k as u64,
            }),
            None => return Ok(None),
        }
    } else {
        None
    };
    let a_quads = if along_k { (g.k / 4) as u32 } else { 0 };
    let variant = uniform_variant(kernel, g.bias.is_some(), a_quads);
    let pipeline = cx.cache.get_quick(QuickKey::Gemm(variant), || {
        variant.spec(cx.subgroup_min_size, windows, None)
    })?;
    cx.tuning.note_used(variant);
    let mut buffers = vec![g.a.buffer.clone(), g.b.buffer.clone()];
    if let Some(c) = &g.bias {
        buffers.push(c.buffer.clone());
    }
    buffers.push(g.out.clone());
    let (_, cols) = kernel.block();
    let mut out = Vec::with_capacity(plan.len());
    for (i, group) in plan.iter().enumerate() {
        // The column kernel's dispatches cover every column; the row
        // kernel's the most columns a window of this one holds.
        let groups = if along_k {
            let most = group.iter().map(|w| w.words[1] - w.words[0]).max();
            most.unwrap_or(0).div_ceil(gemm_uniform::ROW_GROUP)
        } else {
            g.n.div_ceil(cols) as u32
        };
        let mut extra = vec![(i == 0) as u32, 0, 0, 0];
        extra.extend(group.iter().flat_map(|w| w.words));
        let mut bound: Vec<Window> = group
            .iter()
            .map(|w| Window {
                buffer: g.b.buffer.clone(),
                offset: w.offset,
                size: WINDOW_BYTES,
            })
            .collect();
        bound.extend(a_window.iter().map(|w| Window {
            buffer: w.buffer.clone(),
            offset: w.offset,
            size: w.size,
        }));
        out.push(Dispatch {
            pipeline: pipeline.clone(),
            params: gemm_params(g, extra)?.words(),
            buffers: buffers.clone(),
            windows: bound,
            workgroups: [groups, 1, 1],
        });
    }
    Ok(Some(out))
}

/// The GEMM's parameter block for `g` (the families' `Params` in
/// `wgsl/gemm_common.wgsl`), `extra` words after its own [`GEMM_WORDS`]
/// (a fused epilogue's, the uniform family's windows).
///
/// # Errors
/// [`crate::Error::TooLarge`] for sizes, strides or offsets past `u32`, or
/// an output of more than `u32::MAX` elements.
fn gemm_params(g: &Gemm<'_>, extra: Vec<u32>) -> Result<Params> {
    let (m, n, k) = (g.m, g.n, g.k);
    let batch: usize = g.batch_shape.iter().product();
    let zero = Operand {
        buffer: g.out,
        dtype: g.dtype,
        offset: 0,
        strides: vec![0; 6],
    };
    let c = g.bias.as_ref().unwrap_or(&zero);
    let mut p = Params::with_words("matmul", GEMM_WORDS + extra.len());
    p.put_bits(GEMM_WORDS, extra);
    p.put(0, [m as i64, n as i64, k as i64, 0])?;
    for (base, op) in [(4, &g.a), (7, &g.b), (10, c)] {
        put_operand(&mut p, base, op)?;
    }
    p.put_bits(13, [g.alpha.to_bits(), g.beta.to_bits()]);
    p.put(16, g.batch_shape.iter().map(|&x| x as i64))?;
    let strides = batch_strides(&g.a)
        .iter()
        .chain(batch_strides(&g.b))
        .chain(batch_strides(c));
    p.put(20, strides.map(|&x| x as i64))?;
    if batch * m * n > u32::MAX as usize {
        // The kernel's flat output index is a u32.
        return Err(crate::Error::TooLarge {
            op: "matmul",
            limit: crate::Limit::KernelIndex,
            value: (batch * m * n) as u64,
            max: u32::MAX as u64,
        });
    }
    Ok(p)
}

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
                cx.software && dtype == DType::F32 && threads(wg_x) && gemm_uniform::windows(cx) > 0
            }
        }
}

/// The dispatches of `kernel` (see [`gemm`]) on the operands of `g` (whose
/// epilogue's program gets its rank and dense flags).
///
/// # Errors
/// As [`gemm`].
pub(crate) fn dispatches(
    cx: &Context,
    g: &mut Gemm<'_>,
    kernel: GemmKernel,
) -> Result<Vec<Dispatch>> {
    let (m, n, k) = (g.m, g.n, g.k);
    let batch: usize = g.batch_shape.iter().product();
    if batch * m * n == 0 {
        return Ok(Vec::new());
    }
    if let GemmKernel::Uniform { .. } = kernel {
        if let Some(d) = uniform_dispatches(cx, g, kernel)? {
            return Ok(d);
        }
        // What the family cannot run takes the register tile of its class.
        let class = ShapeClass::of_layout(m, n, row_stride(&g.b), col_stride(&g.b));
        let tile = fit_gemv_columns(register_tile(class, cx.software), n);
        return dispatches(cx, g, tile);
    }
    let pair_k = pair_k_ok(cx, g, kernel);
    let a_mode = if pair_k {
        Mode::PairK
    } else if vec_ok(&g.a, m, k, true) {
        Mode::Inner
    } else if kernel.a_outer_ok() && vec_ok(&g.a, m, k, false) {
        Mode::Outer
    } else {
        Mode::Scalar
    };
    let b_mode = if pair_k {
        Mode::PairK
    } else if pair_ok(cx, g, kernel) {
        Mode::Pair
    } else if vec_ok(&g.b, k, n, true) {
        Mode::Inner
    } else if vec_ok(&g.b, k, n, false) {
        Mode::Outer
    } else {
        Mode::Scalar
    };
    let variant = GemmVariant {
        dtype: g.dtype,
        kernel,
        a_mode,
        b_mode,
        out_vec: n.is_multiple_of(4),
        has_bias: g.bias.is_some(),
        k_tail: !k.is_multiple_of(kernel.k_step()),
        scalar_staging: scalar_staging(cx, kernel),
        looped_stores: looped_stores(cx, kernel),
        a_quads: 0,
    };
    let epi_words = match g.epilogue.as_mut() {
        Some(e) => epilogue::params(e)?,
        None => Vec::new(),
    };
    let p = gemm_params(g, epi_words)?;
    let subgroup = cx.subgroup_min_size;
    let mut buffers = vec![g.a.buffer.clone(), g.b.buffer.clone()];
    if let Some(c) = &g.bias {
        buffers.push(c.buffer.clone());
    }
    let pipeline = match &g.epilogue {
        None => {
            buffers.push(g.out.clone());
            let p = cx
                .cache
                .get_quick(QuickKey::Gemm(variant), || variant.spec(subgroup, 0, None))?;
            cx.tuning.note_used(variant);
            p
        }
        Some(e) => {
            buffers.extend(e.bound.inputs.iter().map(|&b| b.clone()));
            buffers.extend(e.bound.outputs.iter().map(|&b| b.clone()));
            cx.cache
                .get_quick(QuickKey::GemmEpilogue(variant, e.program.clone()), || {
                    variant.spec(subgroup, 0, Some(&e.program))
                })?
        }
    };
    // A grid past the per-dimension limit runs as several dispatches, each
    // told its workgroup offset (`group0`).
    let max = cx.limits.max_compute_workgroups_per_dimension as usize;
    let (rows, cols) = kernel.block();
    let groups = [n.div_ceil(cols), m.div_ceil(rows), batch];
    let mut out = Vec::new();
    for z0 in (0..groups[2]).step_by(max) {
        for y0 in (0..groups[1]).step_by(max) {
            for x0 in (0..groups[0]).step_by(max) {
                let origin = [x0, y0, z0];
                let mut params = p.clone();
                params.put(32, origin.map(|o| o as i64))?;
                out.push(Dispatch {
                    windows: Vec::new(),
                    pipeline: pipeline.clone(),
                    params: params.words(),
                    buffers: buffers.clone(),
                    workgroups: [0, 1, 2].map(|d| (groups[d] - origin[d]).min(max) as u32),
                });
            }
        }
    }
    Ok(out)
}
