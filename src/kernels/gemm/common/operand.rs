//! The operand description every GEMM family reads: the product
//! ([`Gemm`]: dtype, sizes, A, B, the bias, the output, a fused epilogue),
//! the six strides of a matmul operand, and how a kernel loads an operand
//! ([`Mode`], chosen by the planner from the strides) with the WGSL
//! expressions of each load mode and dtype ([`access`], [`pair_loads`]).

use super::epilogue::Epilogue;
use crate::DType;
use crate::kernels::Operand;

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
    /// (see `common::epilogue`).
    pub epilogue: Option<Epilogue<'a>>,
}

/// The strides of a matmul [`Operand`]: six, over `[batch0..batch3, rows,
/// cols]` (the four batch dimensions already broadcast, 0 where repeated).
pub(crate) fn batch_strides<'o>(op: &'o Operand<'_>) -> &'o [isize] {
    &op.strides[..4]
}

pub(crate) fn row_stride(op: &Operand<'_>) -> isize {
    op.strides[4]
}

pub(crate) fn col_stride(op: &Operand<'_>) -> isize {
    op.strides[5]
}

/// How the kernel loads an operand (see `common::block`).
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
    pub(crate) const ALL: [Mode; 5] = [
        Mode::Scalar,
        Mode::Inner,
        Mode::Outer,
        Mode::Pair,
        Mode::PairK,
    ];

    pub(crate) fn vec(self) -> bool {
        self != Mode::Scalar
    }

    /// The mode's name in a `GemmVariant::key`.
    pub(crate) fn name(self) -> &'static str {
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
pub(crate) const PAIR_HELPERS: &str = "
fn pair_lo(w: u64) -> f32 { return bitcast<f32>(u32(w & 0xfffffffflu)); }
fn pair_hi(w: u64) -> f32 { return bitcast<f32>(u32(w >> 32u)); }
fn pair_first(w: vec4<u64>) -> vec4<f32> { return vec4<f32>(pair_lo(w.x), pair_hi(w.x), pair_lo(w.y), pair_hi(w.y)); }
fn pair_second(w: vec4<u64>) -> vec4<f32> { return vec4<f32>(pair_lo(w.z), pair_hi(w.z), pair_lo(w.w), pair_hi(w.w)); }
";

/// The element loads of binding `name` (an `array<vec4<u64>>` of f32
/// pairs): `{name}_pair_one(e)` (one element) and `{name}_pair_four(e)`
/// (four from a multiple of four), with their [`Access`].
pub(crate) fn pair_loads(name: &str) -> (String, Access) {
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
pub(crate) fn vec_ok(op: &Operand<'_>, rows: usize, cols: usize, along_cols: bool) -> bool {
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

/// Whether `g`'s B is laid out for [`Mode::Pair`] loads: unit-stride along
/// n, its offset and other strides multiples of eight elements (what the
/// kernel and the device must offer too is the planner's to check).
pub(crate) fn pair_layout_ok(g: &Gemm<'_>) -> bool {
    let b = &g.b;
    vec_ok(b, g.k, g.n, true)
        && (g.k == 1 || row_stride(b).rem_euclid(8) == 0)
        && b.offset.is_multiple_of(8)
        && batch_strides(b).iter().all(|s| s.rem_euclid(8) == 0)
}

/// Whether `g` is laid out for [`Mode::PairK`] loads of A and B: K a
/// multiple of eight, A unit-stride along k and B along k (`x @ W^T`),
/// their offsets and other strides multiples of eight elements (the kernel
/// and device conditions are the planner's).
pub(crate) fn pair_k_layout_ok(g: &Gemm<'_>) -> bool {
    let eights = |op: &Operand<'_>, other: isize, other_len: usize| {
        (other_len == 1 || other.rem_euclid(8) == 0)
            && op.offset.is_multiple_of(8)
            && batch_strides(op).iter().all(|s| s.rem_euclid(8) == 0)
    };
    g.k >= 8
        && g.k.is_multiple_of(8)
        && col_stride(&g.a) == 1
        && row_stride(&g.b) == 1
        && eights(&g.a, row_stride(&g.a), g.m)
        && eights(&g.b, col_stride(&g.b), g.n)
}

/// The WGSL for one operand: its binding's element type, and expressions
/// for one element and for four consecutive ones (index `e`, a multiple of
/// four for the latter) as f32.
pub(crate) struct Access {
    pub arr: &'static str,
    pub one: String,
    pub four: String,
}

/// The loads of binding `name` holding `dtype`, as vec4s (`vec`) or
/// scalars.
pub(crate) fn access(dtype: DType, vec: bool, name: &str) -> Access {
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
