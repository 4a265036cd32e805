//! The op vocabulary: every [`Primitive`] a graph node can hold, and the
//! enums that name elementwise ops, reductions and distributions.
//!
//! This file is a leaf: it says *what* an op computes (its outputs' dtypes,
//! which dtypes it takes), never *how*. `ops/` builds nodes from it,
//! `graph/lower/` turns nodes into dispatches, and `kernels/` maps each op to
//! WGSL. Nothing here knows about buffers, devices or WGSL.

use crate::DType;

/// One operation of the graph; each lowers to a few kernel launches, or to
/// none (views).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Primitive {
    /// Every element of the output has the bits `bits` (the low
    /// `size_in_bytes` bytes, as `DType::bits_of` gives them).
    Full { bits: u64 },
    /// An elementwise op; inputs broadcast to the output's shape.
    Elementwise(ElementwiseOp),
    /// NumPy matmul (shapes already checked by the op): inputs `a`, `b`
    /// and, for addmm, a bias `c` broadcastable to the output;
    /// `alpha * (a @ b) + beta * c`.
    Matmul { alpha: f32, beta: f32 },
    /// A view: the output shares the input's buffer with other strides
    /// (or a dense copy where strides cannot express it).
    View(View),
    /// Split along `axis`; output `i` starts at `starts[i]` along that axis.
    /// Each live output is a dense copy of its part.
    Split { axis: usize, starts: Vec<usize> },
    /// NumPy `take` along `axis`: inputs `x` and integer indices.
    Take { axis: usize },
    /// A reduction over `axes` (sorted, distinct); outputs drop those axes.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
        ddof: u32,
    },
    /// Philox 4x32-10 numbers under the key input (u32, shape [2]), from
    /// counters `(block, stream, 0, 0)`; see `crate::random`.
    Random { dist: Distribution, stream: u32 },
    /// The inputs (one dtype, equal shapes but for `axis`) joined along `axis`.
    Concatenate { axis: usize },
    /// The `k` largest elements along `axis` (`k <= MAX_TOPK`), sorted:
    /// values and u32 indices.
    TopK { axis: usize, k: usize },
    /// A scan along `axis` with `op` (`Sum`, `Prod`, `Max` or `Min` of
    /// [`ReduceOp`]): output `i` combines the elements before it
    /// (`inclusive`: up to and with it), walking from the end when
    /// `reverse`. Floats accumulate in f32.
    Scan {
        op: ReduceOp,
        axis: usize,
        reverse: bool,
        inclusive: bool,
    },
    /// A stable ascending sort along `axis` (NaN last): values and u32
    /// indices.
    Sort { axis: usize },
    /// Input 1 (updates, f32, i32 or u32) added (`add`; duplicate indices
    /// accumulate) or stored (one of the duplicates wins) into zeros of the
    /// output's shape at input 0's indices (i32 or u32, the updates' shape)
    /// along `axis`.
    Scatter { axis: usize, add: bool },
    /// Input 0 with input 1 (the update, input 0's dtype, already
    /// broadcast to the slice's shape) written over the strided slice that
    /// starts at `starts` and walks `steps` (MLX `slice_update`). Written
    /// into input 0's buffer when nothing else holds it (donation), else
    /// into a copy. With `dynamic: Some(axis)`, input 2 is one i32 or u32
    /// element added to the start on `axis` at run time (clamped so the
    /// slice stays inside; `starts[axis]` is 0 and the steps 1).
    SliceUpdate {
        starts: Vec<usize>,
        steps: Vec<isize>,
        dynamic: Option<usize>,
    },
    /// The input's bits read as the output's dtype, of the same size
    /// (NumPy `view(dtype)`): the output shares the input's buffer, strides
    /// and offset. Not a [`View`]: fusion does not look through it, so the
    /// elements it reads are always in memory.
    Bitcast,
    /// Input `index` of a function being traced by `compile`: it has no
    /// value, so evaluating anything that depends on it is an error.
    Placeholder { index: usize },
    /// MLX's affine quantization of the one input (f32, f16 or bf16, rows
    /// of `k` along its last axis, `k` a multiple of `group_size`): three
    /// outputs, the packed quants (u32, `k * bits / 32` per row), the
    /// scales and the biases (the input's dtype, `k / group_size` per row).
    Quantize { group_size: u32, bits: u32 },
    /// The elements of quantized weights (see [`QuantMode`] for the
    /// inputs), in the output's dtype (f32, f16 or bf16).
    Dequantize(QuantMode),
    /// A normalisation over the last axis in one pass over each row (the
    /// row's statistics, then the normalised row, in one kernel): inputs
    /// `x` (f32, f16 or bf16), then the weight and the bias that
    /// [`Norm`] says it has (f32, of shape `[x.shape[-1]]`); output f32 of
    /// `x`'s shape. Rows longer than [`MAX_ONE_PASS_ROW`] are composed from
    /// a reduction and an elementwise kernel instead (`ops::nn`).
    Normalize(Norm),
    /// `x @ w.T` (`transpose`) or `x @ w` with `w` quantized: inputs `x`
    /// (f32, `[batch.., m, k]`), then the weights as [`QuantMode`] says;
    /// output f32 `[batch.., m, n]`.
    QuantizedMatmul { mode: QuantMode, transpose: bool },
    /// Scaled dot-product attention of one query row per head (MLX's
    /// `sdpa_vector`): inputs `q` `[batch, heads, 1, d]`, `k` and `v`
    /// `[batch, kv_heads, keys, d]` (one float dtype), and with `length`
    /// a fourth, one i32 or u32 element: the keys read (the rest are
    /// masked). Output `[batch, heads, 1, d]` of q's dtype; query head
    /// `h` reads KV head `h / (heads / kv_heads)`. Taken when
    /// [`sdpa_vector_fits`] says so (`ops::fast`).
    SdpaVector { scale: f32, length: bool },
    /// MLX's `fast.rope` of the input `x` (f32, f16 or bf16, `[..., L,
    /// D]`): the first `dims` features of each row rotated in pairs
    /// (`traditional`: adjacent, else the two halves) by `scale *
    /// position * base^(-2i / dims)`, position `offset + l` for row `l` of
    /// axis -2, plus (`dynamic`) the one i32 or u32 element of input 1.
    Rope {
        dims: usize,
        traditional: bool,
        base: f32,
        scale: f32,
        offset: i32,
        dynamic: bool,
    },
}

/// What [`Primitive::Normalize`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Norm {
    pub kind: NormKind,
    /// Whether a weight (input 1) multiplies the result.
    pub weight: bool,
    /// Whether a bias (the input after the weight) is added.
    pub bias: bool,
    /// The bits of the f32 epsilon of the norms (0 for the softmaxes).
    pub eps_bits: u32,
}

/// The normalisations of [`Primitive::Normalize`], each over one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NormKind {
    /// `exp(x - m) / s` (`m` the row's maximum, `s` the sum of
    /// `exp(x - m)`).
    Softmax,
    /// `(x - m) - log1p(s - 1)`.
    LogSoftmax,
    /// `(x - mean) * rsqrt(var + eps) * weight + bias`, biased variance.
    LayerNorm,
    /// `x * rsqrt(mean(x^2) + eps) * weight`.
    RmsNorm,
}

impl NormKind {
    /// The op's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            NormKind::Softmax => "softmax",
            NormKind::LogSoftmax => "log_softmax",
            NormKind::LayerNorm => "layer_norm",
            NormKind::RmsNorm => "rms_norm",
        }
    }
}

/// The longest row [`Primitive::Normalize`] takes. A longer row is a
/// reduction whose rows are cut into parts across workgroups (two
/// dispatches), then an elementwise kernel: one workgroup per row would
/// lose that parallelism when there are few rows, and every row of that
/// length fills a storage binding's worth of memory in a few rows.
pub(crate) const MAX_ONE_PASS_ROW: usize = 1 << 16;

/// The fewest rows [`Primitive::Normalize`] takes when they are longer
/// than [`SHORT_ONE_PASS_ROW`] (`ops::nn` says why).
pub(crate) const MIN_ONE_PASS_ROWS: usize = 256;

/// The longest row [`Primitive::Normalize`] takes however few the rows
/// are: one workgroup walks such a row twice in about the time of a
/// dispatch, so a decode step's single-row RMSNorm is one kernel, not
/// the reduction's two.
pub(crate) const SHORT_ONE_PASS_ROW: usize = 4096;

/// How the weights of [`Primitive::Dequantize`] and
/// [`Primitive::QuantizedMatmul`] are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum QuantMode {
    /// MLX's affine quantization: three inputs, the packed quants (u32,
    /// each row a little-endian bit stream of `bits`-bit values), the
    /// scales and the biases (one per `group_size` elements of a row);
    /// element = `q * scale + bias`.
    Affine { group_size: u32, bits: u32 },
    /// One input of a block format (`DType::Q4_0` ...): its dtype says
    /// which.
    Blocks,
}

impl Primitive {
    /// Whether the primitive is a GEMM (matmul and addmm, quantized_matmul):
    /// one output whose elementwise readers may run as its epilogue
    /// (`graph::fuse`).
    pub(crate) fn is_gemm(&self) -> bool {
        matches!(
            self,
            Primitive::Matmul { .. } | Primitive::QuantizedMatmul { .. }
        )
    }

    /// Whether the primitive takes inputs (or makes outputs) of a block
    /// format (`DType::is_quantized`): views (the ops keep the last axis
    /// whole), the primitives that move whole rows of blocks (split,
    /// take, concatenate along another axis), the quantized ops, and
    /// compile's placeholders. Eval refuses a graph in which any other
    /// node touches a block format.
    pub(crate) fn takes_blocks(&self) -> bool {
        matches!(
            self,
            Primitive::View(_)
                | Primitive::Split { .. }
                | Primitive::Take { .. }
                | Primitive::Concatenate { .. }
                | Primitive::Dequantize(QuantMode::Blocks)
                | Primitive::QuantizedMatmul {
                    mode: QuantMode::Blocks,
                    ..
                }
                | Primitive::Placeholder { .. }
        )
    }
}

/// How a view maps its input's layout to its output's.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum View {
    /// Same elements in row-major order under a new shape; copies when the
    /// input's strides cannot express it.
    Reshape,
    /// Output axis `i` is input axis `axes[i]`.
    Permute(Vec<usize>),
    /// NumPy broadcasting to the output's shape (stride 0 where repeated).
    Broadcast,
    /// Per axis: the first element and the step (negative steps reverse).
    Slice {
        starts: Vec<usize>,
        steps: Vec<isize>,
    },
    /// The same elements, dense in row-major order (MLX `contiguous`): a
    /// dense input is shared as it is, anything else is copied.
    Contiguous,
}

/// The largest `k` of [`Primitive::TopK`]: each thread keeps `k`
/// candidates in private arrays.
pub(crate) const MAX_TOPK: usize = 64;

/// Threads of a [`Primitive::SdpaVector`] workgroup (one workgroup per
/// batch and KV head).
pub(crate) const SDPA_THREADS: usize = 128;
/// Keys a [`Primitive::SdpaVector`] workgroup scores at once (a block of
/// its online softmax).
pub(crate) const SDPA_BLOCK: usize = 64;
/// The largest `group * d` of [`Primitive::SdpaVector`]: the scaled
/// queries sit in workgroup memory (8 KiB).
pub(crate) const SDPA_MAX_GROUP_DIM: usize = 2048;
/// The most query heads per KV head of [`Primitive::SdpaVector`]: a
/// block's scores sit in workgroup memory (`group * SDPA_BLOCK` floats).
pub(crate) const SDPA_MAX_GROUP: usize = 16;

/// Whether [`Primitive::SdpaVector`] computes attention for `group` query
/// heads per KV head, head dimension `d` and up to `keys` keys: `d` a
/// multiple of 4, `group` and `group * d` within the workgroup memory,
/// and every invocation's loop iterations (counted per block of
/// [`SDPA_BLOCK`] keys, loops unrolled by 4) under llvmpipe's 65535
/// (docs/ARCHITECTURE.md), with a margin.
pub(crate) fn sdpa_vector_fits(group: usize, d: usize, keys: usize) -> bool {
    if group == 0 || d == 0 || !d.is_multiple_of(4) {
        return false;
    }
    let gd = group * d;
    if group > SDPA_MAX_GROUP || gd > SDPA_MAX_GROUP_DIM {
        return false;
    }
    let items = (group * SDPA_BLOCK).div_ceil(SDPA_THREADS);
    let own = gd.div_ceil(SDPA_THREADS);
    // Scores (d / 4 each), the weights, the block max and sum, the
    // weighted values (a quarter block plus the remainder, per output).
    let per_block = items * (d / 4 + 2) + SDPA_BLOCK / 2 + own * (SDPA_BLOCK / 4 + 5) + 1;
    let fixed = 2 * gd.div_ceil(SDPA_THREADS) + 2 * own + 8;
    fixed + keys.div_ceil(SDPA_BLOCK) * per_block <= 60_000
}

/// Batch dimensions [`Primitive::Matmul`] takes (beyond the two matrix ones).
pub(crate) const MAX_MATMUL_BATCH_DIMS: usize = 4;

/// The most elements one output of [`Primitive::Reduce`] folds: the
/// reduction kernel's 256 threads, 8 per loop iteration, under llvmpipe's
/// 65535 loop iterations per invocation (2 per iteration).
pub(crate) const MAX_REDUCED: usize = 1 << 26;

/// Elements of a row [`Primitive::Sort`] sorts in one workgroup
/// (wgsl/sort.wgsl `BLOCK`): longer rows run the bitonic network's global
/// steps through a work buffer.
pub(crate) const SORT_BLOCK: usize = 1024;

/// A sorted row of `len` elements padded to a power of two: the bitonic
/// network's length, which sorts index with 32-bit words.
pub(crate) fn sort_padded(len: usize) -> usize {
    len.next_power_of_two()
}

/// Pairs (two words each) of the work buffer a sort of `rows` rows of
/// `len` elements needs: none past one block per row, but every pass binds
/// it (at least 1). The ops check it against the largest storage binding.
pub(crate) fn sort_work_pairs(rows: usize, len: usize) -> usize {
    let p = sort_padded(len);
    if p <= SORT_BLOCK {
        1
    } else {
        rows.saturating_mul(p)
    }
}

/// What one elementwise node computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ElementwiseOp {
    /// Convert the one input to the output dtype (NumPy `astype`).
    Cast,
    /// A dense copy of the one input, same dtype (always a kernel; see
    /// [`View::Contiguous`] for the copy that shares dense inputs).
    Copy,
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// `where(cond, a, b)`.
    Where,
    /// Floored quotient and remainder of two inputs: two outputs.
    DivMod,
}

/// Unary ops. Float-only ops on integer or bool input compute in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum UnaryOp {
    Neg,
    Abs,
    Sign,
    Exp,
    /// `2^x`.
    Exp2,
    Log,
    Log1p,
    Expm1,
    Sqrt,
    Rsqrt,
    Square,
    Reciprocal,
    Sin,
    Cos,
    Tanh,
    Sigmoid,
    Relu,
    /// GELU, exact: `x * Phi(x)` with erf.
    Gelu,
    /// GELU, tanh approximation (Hendrycks & Gimpel 2016, eq. 2).
    GeluTanh,
    Silu,
    /// `log(1 + e^x)`, as PyTorch `softplus` with beta 1 and no threshold.
    Softplus,
    Erf,
    Floor,
    Ceil,
    /// Round half to even, as NumPy `round`.
    Round,
    /// Logical not: 1 where the input is 0.
    LogicalNot,
    /// `~x` on integers (NumPy `bitwise_invert`; bool uses LogicalNot).
    BitwiseInvert,
    Log2,
    Log10,
    Tan,
    Sinh,
    Cosh,
    Arcsin,
    Arccos,
    Arctan,
    Arcsinh,
    Arccosh,
    Arctanh,
    /// Inverse error function (Giles 2010).
    Erfinv,
    /// Radians to degrees: `x * (180 / pi)`.
    Degrees,
    /// Degrees to radians: `x * (pi / 180)`.
    Radians,
    /// Predicates on float bits, bool results.
    IsNan,
    IsInf,
    IsFinite,
    IsPosInf,
    IsNegInf,
}

impl UnaryOp {
    /// Every unary op, for enumerating specialisations.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) const ALL: [UnaryOp; 46] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Expm1,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Square,
        UnaryOp::Reciprocal,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Softplus,
        UnaryOp::Erf,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::LogicalNot,
        UnaryOp::BitwiseInvert,
        UnaryOp::Log2,
        UnaryOp::Log10,
        UnaryOp::Tan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Arcsin,
        UnaryOp::Arccos,
        UnaryOp::Arctan,
        UnaryOp::Arcsinh,
        UnaryOp::Arccosh,
        UnaryOp::Arctanh,
        UnaryOp::Erfinv,
        UnaryOp::Degrees,
        UnaryOp::Radians,
        UnaryOp::IsNan,
        UnaryOp::IsInf,
        UnaryOp::IsFinite,
        UnaryOp::IsPosInf,
        UnaryOp::IsNegInf,
    ];

    /// The output dtype on an input of dtype `d`, or `None` when the op
    /// does not take `d`: bitwise_invert takes integers and bool (which
    /// `ops` records as logical_not), and f64 takes only the ops WGSL's
    /// f64 builtins compute exactly (Vulkan's GLSL.std.450 has no 64-bit
    /// exp, log, sin, tanh, ...).
    pub(crate) fn out_dtype(self, d: DType) -> Option<DType> {
        Some(match self {
            UnaryOp::LogicalNot => DType::Bool,
            UnaryOp::BitwiseInvert if d.is_float() => return None,
            _ if d == DType::F64 && !self.takes_f64() => return None,
            _ if self.takes_integers() || d.is_float() => d,
            _ => DType::F32,
        })
    }

    /// Whether the op computes on f64.
    pub(crate) fn takes_f64(self) -> bool {
        matches!(
            self,
            UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Sign
                | UnaryOp::Sqrt
                | UnaryOp::Rsqrt
                | UnaryOp::Square
                | UnaryOp::Reciprocal
                | UnaryOp::Relu
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::LogicalNot
        )
    }

    /// Whether the op is defined on integers (else integers compute in f32).
    pub(crate) fn takes_integers(self) -> bool {
        matches!(
            self,
            UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Sign
                | UnaryOp::Square
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::Relu
                | UnaryOp::LogicalNot
                | UnaryOp::BitwiseInvert
        )
    }
}

/// Binary ops; comparisons and logical ops produce bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// True division; integers compute in f32.
    Div,
    /// NumPy `floor_divide`.
    FloorDiv,
    /// NumPy `remainder`: the sign of the divisor.
    Remainder,
    Pow,
    Maximum,
    Minimum,
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    LogicalAnd,
    LogicalOr,
    /// `&`, `|`, `^` on integers and bool.
    BitwiseAnd,
    BitwiseOr,
    BitwiseXor,
    /// NumPy `left_shift`: 0 for counts at or past the dtype's width.
    LeftShift,
    /// NumPy `right_shift` (arithmetic for signed integers): 0, or -1 for a
    /// negative value, for counts at or past the dtype's width.
    RightShift,
    /// `log(e^a + e^b)`; float only (the ops layer casts integers to f32).
    LogAddExp,
    /// `atan2(a, b)`, the angle of the point `(b, a)`; float only.
    Arctan2,
}

impl BinaryOp {
    /// Every binary op, for enumerating specialisations.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) const ALL: [BinaryOp; 24] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::FloorDiv,
        BinaryOp::Remainder,
        BinaryOp::Pow,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Equal,
        BinaryOp::NotEqual,
        BinaryOp::Less,
        BinaryOp::LessEqual,
        BinaryOp::Greater,
        BinaryOp::GreaterEqual,
        BinaryOp::LogicalAnd,
        BinaryOp::LogicalOr,
        BinaryOp::BitwiseAnd,
        BinaryOp::BitwiseOr,
        BinaryOp::BitwiseXor,
        BinaryOp::LeftShift,
        BinaryOp::RightShift,
        BinaryOp::LogAddExp,
        BinaryOp::Arctan2,
    ];

    /// NumPy's name for the op.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "subtract",
            BinaryOp::Mul => "multiply",
            BinaryOp::Div => "divide",
            BinaryOp::FloorDiv => "floor_divide",
            BinaryOp::Remainder => "remainder",
            BinaryOp::Pow => "power",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Equal => "equal",
            BinaryOp::NotEqual => "not_equal",
            BinaryOp::Less => "less",
            BinaryOp::LessEqual => "less_equal",
            BinaryOp::Greater => "greater",
            BinaryOp::GreaterEqual => "greater_equal",
            BinaryOp::LogicalAnd => "logical_and",
            BinaryOp::LogicalOr => "logical_or",
            BinaryOp::BitwiseAnd => "bitwise_and",
            BinaryOp::BitwiseOr => "bitwise_or",
            BinaryOp::BitwiseXor => "bitwise_xor",
            BinaryOp::LeftShift => "left_shift",
            BinaryOp::RightShift => "right_shift",
            BinaryOp::LogAddExp => "logaddexp",
            BinaryOp::Arctan2 => "arctan2",
        }
    }

    /// The output dtype for operands promoted to `t`, or `None` when the op
    /// does not take `t`: bitwise ops take integers and bool (shifts of
    /// bool give int8, as NumPy's), power has no f64 (no 64-bit `pow`).
    pub(crate) fn out_dtype(self, t: DType) -> Option<DType> {
        Some(match self {
            _ if self.is_bitwise() && t.is_float() => return None,
            BinaryOp::LeftShift | BinaryOp::RightShift if t == DType::Bool => DType::I8,
            BinaryOp::Pow if t == DType::F64 => return None,
            _ if self.is_predicate() => DType::Bool,
            BinaryOp::Div if !t.is_float() => DType::F32,
            _ => t,
        })
    }

    /// Whether the op takes integers and bool only (bitwise ops, shifts).
    pub(crate) fn is_bitwise(self) -> bool {
        matches!(
            self,
            BinaryOp::BitwiseAnd
                | BinaryOp::BitwiseOr
                | BinaryOp::BitwiseXor
                | BinaryOp::LeftShift
                | BinaryOp::RightShift
        )
    }

    /// Whether the result is bool.
    pub(crate) fn is_predicate(self) -> bool {
        matches!(
            self,
            BinaryOp::Equal
                | BinaryOp::NotEqual
                | BinaryOp::Less
                | BinaryOp::LessEqual
                | BinaryOp::Greater
                | BinaryOp::GreaterEqual
                | BinaryOp::LogicalAnd
                | BinaryOp::LogicalOr
        )
    }
}

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    /// Index (u32) of the first maximum; NaN counts as the maximum.
    ArgMax,
    /// Index (u32) of the first minimum; NaN counts as the minimum.
    ArgMin,
    Mean,
    /// Mean and variance (divided by `count - ddof`) in one pass: Welford's
    /// update per thread, Chan et al.'s pairwise combination across threads.
    Moments,
    /// `log(sum(exp(x)))` in one pass with a running maximum.
    LogSumExp,
    /// The maximum `m` and `sum(exp(x - m))` in one pass with a running
    /// maximum (Milakov & Gimelshein 2018, "Online normalizer calculation
    /// for softmax"): softmax's two statistics. `m` is NaN if an element is;
    /// the sum is NaN where `m` is not finite (as `exp(x - max)` is then).
    MaxSumExp,
    /// `mean(x * x)` (rms_norm's statistic), accumulated in f32.
    MeanSquare,
    All,
    Any,
}

impl ReduceOp {
    /// Every reduction, for enumerating specialisations.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) const ALL: [ReduceOp; 13] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::ArgMax,
        ReduceOp::ArgMin,
        ReduceOp::Mean,
        ReduceOp::Moments,
        ReduceOp::LogSumExp,
        ReduceOp::MaxSumExp,
        ReduceOp::MeanSquare,
        ReduceOp::All,
        ReduceOp::Any,
    ];

    /// The dtype the accumulator works in for an `input` dtype: f64 for
    /// f64, f32 for every other float dtype and for the ops that average
    /// (mean, moments, logsumexp), else a 32-bit integer of the input's
    /// signedness (bool as u32).
    pub(crate) fn accumulator(self, input: DType) -> DType {
        match (self, input) {
            (_, DType::F64) => DType::F64,
            (
                ReduceOp::Mean
                | ReduceOp::Moments
                | ReduceOp::LogSumExp
                | ReduceOp::MaxSumExp
                | ReduceOp::MeanSquare,
                _,
            ) => DType::F32,
            (_, d) if d.is_float() => DType::F32,
            (_, d) if d.is_signed_integer() => DType::I32,
            _ => DType::U32,
        }
    }

    /// Whether the reduction takes `input` (logsumexp and the softmax
    /// statistics have no f64: WGSL's `exp` and `log` are 32-bit on
    /// Vulkan).
    pub(crate) fn takes(self, input: DType) -> bool {
        !(matches!(self, ReduceOp::LogSumExp | ReduceOp::MaxSumExp) && input == DType::F64)
    }

    /// The op's name if it has no identity (nothing to return for an
    /// empty reduction), else `None`.
    pub(crate) fn without_identity(self) -> Option<&'static str> {
        match self {
            ReduceOp::Max => Some("max"),
            ReduceOp::Min => Some("min"),
            ReduceOp::ArgMax => Some("argmax"),
            ReduceOp::ArgMin => Some("argmin"),
            _ => None,
        }
    }

    /// Output dtypes for an input dtype (4-byte dtypes: the ops layer casts
    /// to f16/bf16 afterwards).
    pub(crate) fn out_dtypes(self, input: DType) -> Vec<DType> {
        match self {
            ReduceOp::ArgMax | ReduceOp::ArgMin => vec![DType::U32],
            ReduceOp::All | ReduceOp::Any => vec![DType::Bool],
            ReduceOp::Moments | ReduceOp::MaxSumExp => vec![self.accumulator(input); 2],
            _ => vec![self.accumulator(input)],
        }
    }
}

/// What the random kernel writes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Distribution {
    /// Raw u32 words.
    Bits,
    /// `low + (high - low) * u`, `u` in [0, 1) from the top 24 bits, clamped
    /// into [`low`, `max`], where `max` is the output dtype's largest value
    /// below `high`.
    Uniform { low: f32, scale: f32, max: f32 },
    /// `mean + std * z`, `z` standard normal by Box-Muller.
    Normal { mean: f32, std: f32 },
    /// `low + floor(w * range / 2^64)` (wrapping u32 arithmetic) from 64
    /// random bits `w` per element; `range` 0 stands for 2^32.
    Integer { low: u32, range: u32 },
    /// `loc - scale * sign(w) * log(1 - |w|)`, `w` uniform in (-1, 1).
    Laplace { loc: f32, scale: f32 },
    /// Standard Gumbel: `-log(-log(u))`, `u` uniform in (0, 1).
    Gumbel,
    /// The normal CDF inverted over `[u0, u0 + du]` of `u` (`tail` 0:
    /// `u` is `erf(x / sqrt 2)`; 1: `u` is `erfc(x / sqrt 2)`, the upper
    /// tail; 2: the upper tail negated), clamped to `[lo, hi]`.
    TruncatedNormal {
        u0: f32,
        du: f32,
        lo: f32,
        hi: f32,
        tail: u32,
    },
}

impl Primitive {
    /// The op's name as memory history reports it ([`crate::Origin::op`]):
    /// NumPy's name where there is one (`add`, `sum`, `reshape`, `take`).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Primitive::Full { .. } => "full",
            Primitive::Elementwise(op) => match op {
                ElementwiseOp::Cast => "astype",
                ElementwiseOp::Copy => "copy",
                ElementwiseOp::Unary(u) => u.name(),
                ElementwiseOp::Binary(b) => b.name(),
                ElementwiseOp::Where => "where",
                ElementwiseOp::DivMod => "divmod",
            },
            Primitive::Matmul { .. } => "matmul",
            Primitive::View(v) => match v {
                View::Reshape => "reshape",
                View::Permute(_) => "permute",
                View::Broadcast => "broadcast_to",
                View::Slice { .. } => "slice",
                View::Contiguous => "contiguous",
            },
            Primitive::Split { .. } => "split",
            Primitive::Take { .. } => "take",
            Primitive::Reduce { op, .. } => op.name(),
            Primitive::Normalize(n) => n.kind.name(),
            Primitive::Random { dist, .. } => match dist {
                Distribution::Bits => "random::bits",
                Distribution::Uniform { .. } => "random::uniform",
                Distribution::Normal { .. } => "random::normal",
                Distribution::Integer { .. } => "random::randint",
                Distribution::Laplace { .. } => "random::laplace",
                Distribution::Gumbel => "random::gumbel",
                Distribution::TruncatedNormal { .. } => "random::truncated_normal",
            },
            Primitive::Concatenate { .. } => "concatenate",
            Primitive::TopK { .. } => "topk",
            Primitive::Scan { op, .. } => match op {
                ReduceOp::Prod => "cumprod",
                ReduceOp::Max => "cummax",
                ReduceOp::Min => "cummin",
                _ => "cumsum",
            },
            Primitive::Sort { .. } => "sort",
            Primitive::Scatter { add: true, .. } => "scatter_add",
            Primitive::Scatter { add: false, .. } => "put_along_axis",
            Primitive::SliceUpdate { .. } => "slice_update",
            Primitive::Bitcast => "view",
            Primitive::Placeholder { .. } => "compile input",
            Primitive::Quantize { .. } => "quantize",
            Primitive::Dequantize(_) => "dequantize",
            Primitive::QuantizedMatmul { .. } => "quantized_matmul",
            Primitive::SdpaVector { .. } => "scaled_dot_product_attention",
            Primitive::Rope { .. } => "rope",
        }
    }
}

impl UnaryOp {
    /// NumPy's (or PyTorch's) name for the op.
    pub(crate) fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "negative",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Exp => "exp",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log => "log",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Square => "square",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_approx",
            UnaryOp::Silu => "silu",
            UnaryOp::Softplus => "softplus",
            UnaryOp::Erf => "erf",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::LogicalNot => "logical_not",
            UnaryOp::BitwiseInvert => "bitwise_invert",
            UnaryOp::Log2 => "log2",
            UnaryOp::Log10 => "log10",
            UnaryOp::Tan => "tan",
            UnaryOp::Sinh => "sinh",
            UnaryOp::Cosh => "cosh",
            UnaryOp::Arcsin => "arcsin",
            UnaryOp::Arccos => "arccos",
            UnaryOp::Arctan => "arctan",
            UnaryOp::Arcsinh => "arcsinh",
            UnaryOp::Arccosh => "arccosh",
            UnaryOp::Arctanh => "arctanh",
            UnaryOp::Erfinv => "erfinv",
            UnaryOp::Degrees => "degrees",
            UnaryOp::Radians => "radians",
            UnaryOp::IsNan => "isnan",
            UnaryOp::IsInf => "isinf",
            UnaryOp::IsFinite => "isfinite",
            UnaryOp::IsPosInf => "isposinf",
            UnaryOp::IsNegInf => "isneginf",
        }
    }
}

impl ReduceOp {
    /// The output dtype of a scan ([`Primitive::Scan`]) with this op of
    /// `input`: bool sums and products count in i32 (NumPy and MLX promote
    /// bool), everything else keeps its dtype.
    pub(crate) fn scan_dtype(self, input: DType) -> DType {
        match (self, input) {
            (ReduceOp::Sum | ReduceOp::Prod, DType::Bool) => DType::I32,
            _ => input,
        }
    }

    /// NumPy's name for the reduction.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
            ReduceOp::Mean => "mean",
            ReduceOp::Moments => "moments",
            ReduceOp::LogSumExp => "logsumexp",
            ReduceOp::MaxSumExp => "max_sumexp",
            ReduceOp::MeanSquare => "mean_square",
            ReduceOp::All => "all",
            ReduceOp::Any => "any",
        }
    }
}
