//! Elementwise ops in WGSL: the expression of every op, the compute type it
//! works in, and decoding and encoding each dtype's bits. The kernels that
//! use them are generated in `program.rs`.

use crate::DType;
use crate::graph::primitive::{BinaryOp, ElementwiseOp, UnaryOp};

impl UnaryOp {
    /// The WGSL expression in `x0` (of type `ct`) and its result type.
    fn wgsl(self, ct: &'static str) -> (String, &'static str) {
        let f = match self {
            UnaryOp::Neg if ct == "u32" => "0u - x0",
            UnaryOp::Neg => "-x0",
            UnaryOp::Abs if ct == "u32" => "x0",
            UnaryOp::Abs => "abs(x0)",
            UnaryOp::Sign if ct == "u32" => "select(0u, 1u, x0 > 0u)",
            UnaryOp::Sign if ct == "f32" => "select(sign(x0), x0, is_nan(x0))",
            UnaryOp::Sign => "sign(x0)",
            UnaryOp::Exp => "exp(x0)",
            UnaryOp::Log => "log(x0)",
            UnaryOp::Log1p => "log1p_f(x0)",
            UnaryOp::Expm1 => "expm1_f(x0)",
            UnaryOp::Sqrt => "sqrt(x0)",
            UnaryOp::Rsqrt => "inverseSqrt(x0)",
            UnaryOp::Square => "x0 * x0",
            UnaryOp::Reciprocal => "1.0 / x0",
            UnaryOp::Sin => "sin(x0)",
            UnaryOp::Cos => "cos(x0)",
            UnaryOp::Tanh => "tanh_f(x0)",
            UnaryOp::Sigmoid => "sigmoid_f(x0)",
            // NaN passes through (GL folds the plain select into a max).
            UnaryOp::Relu if ct == "f32" => "select(select(x0, 0.0, x0 < 0.0), x0, is_nan(x0))",
            UnaryOp::Relu => "max(x0, 0)",
            UnaryOp::Gelu => "0.5 * x0 * (1.0 + erf_f(x0 * 0.70710678118654752))",
            UnaryOp::GeluTanh => {
                "0.5 * x0 * (1.0 + tanh_f(0.79788456080286536 * (x0 + 0.044715 * x0 * x0 * x0)))"
            }
            UnaryOp::Silu => "x0 * sigmoid_f(x0)",
            UnaryOp::Erf => "erf_f(x0)",
            UnaryOp::Floor if ct == "f32" => "floor(x0)",
            UnaryOp::Ceil if ct == "f32" => "ceil(x0)",
            UnaryOp::Round if ct == "f32" => "round(x0)",
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => "x0",
            UnaryOp::LogicalNot => {
                return (format!("select(1u, 0u, {})", truthy("x0", ct)), "u32");
            }
        };
        (f.to_string(), ct)
    }
}

impl BinaryOp {
    /// The WGSL expression in `x0`, `x1` (of type `ct`) and its result type.
    fn wgsl(self, ct: &'static str) -> (String, &'static str) {
        let sfx = match ct {
            "f32" => "f",
            "i32" => "i",
            _ => "u",
        };
        // Float comparisons test NaN on the bits (`is_nan`): WGSL lets a
        // driver assume no NaN in float comparisons, and NVIDIA's does.
        let ordered = if ct == "f32" {
            "!(is_nan(x0) || is_nan(x1)) && "
        } else {
            ""
        };
        let cmp = |op: &str| (format!("select(0u, 1u, {ordered}x0 {op} x1)"), "u32");
        match self {
            BinaryOp::Add => ("x0 + x1".into(), ct),
            BinaryOp::Sub => ("x0 - x1".into(), ct),
            BinaryOp::Mul => ("x0 * x1".into(), ct),
            BinaryOp::Div => ("x0 / x1".into(), ct),
            BinaryOp::FloorDiv => (format!("fdiv_{sfx}(x0, x1)"), ct),
            BinaryOp::Remainder => (format!("rem_{sfx}(x0, x1)"), ct),
            BinaryOp::Pow => (format!("pow_{sfx}(x0, x1)"), ct),
            BinaryOp::Maximum if ct == "f32" => ("maximum_f(x0, x1)".into(), ct),
            BinaryOp::Minimum if ct == "f32" => ("minimum_f(x0, x1)".into(), ct),
            BinaryOp::Maximum => ("max(x0, x1)".into(), ct),
            BinaryOp::Minimum => ("min(x0, x1)".into(), ct),
            BinaryOp::Equal => cmp("=="),
            // The negation of Equal, not `x0 != x1`: lavapipe's `!=` is
            // ordered (false for NaN).
            BinaryOp::NotEqual => (format!("select(1u, 0u, {ordered}x0 == x1)"), "u32"),
            BinaryOp::Less => cmp("<"),
            BinaryOp::LessEqual => cmp("<="),
            BinaryOp::Greater => cmp(">"),
            BinaryOp::GreaterEqual => cmp(">="),
            BinaryOp::LogicalAnd => (
                format!(
                    "select(0u, 1u, {} && {})",
                    truthy("x0", ct),
                    truthy("x1", ct)
                ),
                "u32",
            ),
            BinaryOp::LogicalOr => (
                format!(
                    "select(0u, 1u, {} || {})",
                    truthy("x0", ct),
                    truthy("x1", ct)
                ),
                "u32",
            ),
        }
    }
}

/// The WGSL compute type of a dtype: f32 for every float, i32, u32 (bool too).
pub(crate) fn compute_type(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::F16 | DType::BF16 => "f32",
        DType::I32 => "i32",
        DType::U32 | DType::Bool => "u32",
    }
}

/// The raw bits (a `u32`; the low 16 for 2-byte dtypes) of element `i` of
/// the `array<u32>` named `array` holding elements of `d`.
pub(crate) fn element_bits(d: DType, array: &str) -> String {
    if d.size_in_bytes() == 2 {
        format!("half_word({array}[i >> 1u], i)")
    } else {
        format!("{array}[i]")
    }
}

/// The compute-type value of raw element bits `b` of dtype `d`.
pub(crate) fn decode(d: DType, b: &str) -> String {
    match d {
        DType::F32 => format!("bitcast<f32>({b})"),
        DType::I32 => format!("bitcast<i32>({b})"),
        DType::U32 | DType::Bool => b.to_string(),
        DType::F16 => format!("f16_bits_to_f32({b})"),
        DType::BF16 => format!("bitcast<f32>({b} << 16u)"),
    }
}

/// Whether `x` (of compute type `ct`) is true as NumPy's `bool(x)`: nonzero,
/// NaN included. Not `x != 0`: lavapipe's `!=` is ordered, and NaN is tested
/// on the bits because drivers may assume no NaN in float comparisons.
fn truthy(x: &str, ct: &str) -> String {
    if ct == "f32" {
        format!("(is_nan({x}) || !({x} == 0.0))")
    } else {
        format!("!({x} == {ct}(0))")
    }
}

/// The output bits of `r` (of compute type `ct`) as dtype `d`.
pub(crate) fn encode(d: DType, r: &str, ct: &str) -> String {
    match d {
        DType::Bool => format!("select(0u, 1u, {})", truthy(r, ct)),
        _ => {
            let v = match (ct, compute_type(d)) {
                (a, b) if a == b => r.to_string(),
                // Saturate to the integer type's own limits, NaN to 0
                // (convert.wgsl): WGSL defines float to int conversion as
                // saturating, but SPIR-V and GLSL leave out-of-range values
                // undefined and backends differ.
                ("f32", "i32") => format!("f32_to_i32_sat({r})"),
                ("f32", "u32") => format!("f32_to_u32_sat({r})"),
                (_, to) => format!("{to}({r})"),
            };
            match d {
                DType::F32 | DType::I32 => format!("bitcast<u32>({v})"),
                DType::U32 => v,
                DType::F16 => format!("f32_to_f16_bits(bitcast<u32>({v}))"),
                DType::BF16 => format!("f32_to_bf16_bits(bitcast<u32>({v}))"),
                DType::Bool => unreachable!(),
            }
        }
    }
}

/// The WGSL expression of `op` in `x0`, `x1`, `x2` (each of the type
/// [`op_compute_type`] gives, except Where's condition, in its own compute
/// type) and the expression's type. DivMod is its quotient here (a program
/// writes it as two ops).
pub(crate) fn op_wgsl(
    op: ElementwiseOp,
    ct: &'static str,
    inputs: &[DType],
) -> (String, &'static str) {
    match op {
        ElementwiseOp::Cast | ElementwiseOp::Copy => ("x0".to_string(), ct),
        ElementwiseOp::Unary(u) => u.wgsl(ct),
        ElementwiseOp::Binary(b) => b.wgsl(ct),
        ElementwiseOp::DivMod => BinaryOp::FloorDiv.wgsl(ct),
        ElementwiseOp::Where => {
            let cond = compute_type(inputs[0]);
            (format!("select(x2, x1, !(x0 == {cond}(0)))"), ct)
        }
    }
}

/// The compute type the op works in, given its input dtypes (already
/// promoted to one dtype for binary ops, except `Where`'s condition).
pub(crate) fn op_compute_type(op: ElementwiseOp, inputs: &[DType], out: DType) -> &'static str {
    match op {
        ElementwiseOp::Cast | ElementwiseOp::Copy => compute_type(inputs[0]),
        ElementwiseOp::Unary(u) if !u.takes_integers() => "f32",
        ElementwiseOp::Unary(_) => compute_type(inputs[0]),
        ElementwiseOp::Binary(BinaryOp::Div) => "f32",
        ElementwiseOp::Binary(_) | ElementwiseOp::DivMod => compute_type(inputs[0]),
        ElementwiseOp::Where => compute_type(out),
    }
}
