//! The shape classes the GEMM picks (and tunes) a kernel for, and their
//! names in the tuning file.

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
