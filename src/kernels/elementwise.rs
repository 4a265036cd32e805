//! Elementwise ops in WGSL: the expression of every op, the compute type it
//! works in, and decoding and encoding each dtype's bits. The kernels that
//! use them are generated in `program.rs`.

use crate::DType;
use crate::graph::primitive::{BinaryOp, ElementwiseOp, UnaryOp};

impl UnaryOp {
    /// The WGSL expression in `x0` (of type `ct`) and its result type.
    fn wgsl(self, ct: &'static str) -> (String, &'static str) {
        let nan = nan_test(ct);
        let f = match self {
            UnaryOp::Neg if ct == "u32" => "0u - x0".to_string(),
            UnaryOp::Neg => "-x0".to_string(),
            UnaryOp::Abs if ct == "u32" => "x0".to_string(),
            UnaryOp::Abs => "abs(x0)".to_string(),
            UnaryOp::Sign if ct == "u32" => "select(0u, 1u, x0 > 0u)".to_string(),
            UnaryOp::Sign if is_float_ct(ct) => format!("select(sign(x0), x0, {nan}(x0))"),
            UnaryOp::Sign => "sign(x0)".to_string(),
            UnaryOp::Exp => "exp_f(x0)".to_string(),
            UnaryOp::Exp2 => "exp2_f(x0)".to_string(),
            UnaryOp::Log => "log_f(x0)".to_string(),
            UnaryOp::Log1p => "log1p_f(x0)".to_string(),
            UnaryOp::Expm1 => "expm1_f(x0)".to_string(),
            UnaryOp::Sqrt => "sqrt(x0)".to_string(),
            UnaryOp::Rsqrt => "inverseSqrt(x0)".to_string(),
            UnaryOp::Square => "x0 * x0".to_string(),
            UnaryOp::Reciprocal => "1.0 / x0".to_string(),
            UnaryOp::Sin => "sin_f(x0)".to_string(),
            UnaryOp::Cos => "cos_f(x0)".to_string(),
            UnaryOp::Tanh => "tanh_f(x0)".to_string(),
            UnaryOp::Sigmoid => "sigmoid_f(x0)".to_string(),
            // NaN passes through (GL folds the plain select into a max).
            UnaryOp::Relu if is_float_ct(ct) => {
                format!("select(select(x0, 0.0, x0 < 0.0), x0, {nan}(x0))")
            }
            UnaryOp::Relu => "max(x0, 0)".to_string(),
            UnaryOp::Gelu => "gelu_f(x0)".to_string(),
            // 0.5 (1 + tanh z) = sigmoid(2 z): no cancellation for x < 0.
            UnaryOp::GeluTanh => {
                "x0 * sigmoid_f(1.5957691216057308 * (x0 + 0.044715 * x0 * x0 * x0))".to_string()
            }
            UnaryOp::Silu => "x0 * sigmoid_f(x0)".to_string(),
            UnaryOp::Softplus => "softplus_f(x0)".to_string(),
            UnaryOp::Erf => "erf_f(x0)".to_string(),
            UnaryOp::Floor if is_float_ct(ct) => "floor(x0)".to_string(),
            UnaryOp::Ceil if is_float_ct(ct) => "ceil(x0)".to_string(),
            UnaryOp::Round if is_float_ct(ct) => "round(x0)".to_string(),
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => "x0".to_string(),
            UnaryOp::LogicalNot => {
                return (format!("select(1u, 0u, {})", truthy("x0", ct)), "u32");
            }
            // Integers only (bool inverts as logical_not, see ops): the
            // encode to the dtype's width keeps the low bits.
            UnaryOp::BitwiseInvert => "~x0".to_string(),
            UnaryOp::Log2 => "log2_f(x0)".to_string(),
            UnaryOp::Log10 => "log10_f(x0)".to_string(),
            UnaryOp::Tan => "tan_f(x0)".to_string(),
            UnaryOp::Sinh => "sinh_f(x0)".to_string(),
            UnaryOp::Cosh => "cosh_f(x0)".to_string(),
            UnaryOp::Arcsin => "asin_f(x0)".to_string(),
            UnaryOp::Arccos => "acos_f(x0)".to_string(),
            UnaryOp::Arctan => "atan_f(x0)".to_string(),
            UnaryOp::Arcsinh => "asinh_f(x0)".to_string(),
            UnaryOp::Arccosh => "acosh_f(x0)".to_string(),
            UnaryOp::Arctanh => "atanh_f(x0)".to_string(),
            UnaryOp::Erfinv => "erfinv_f(x0)".to_string(),
            // 180 / pi and pi / 180, correctly rounded to f32.
            UnaryOp::Degrees => "x0 * 57.295779513082321".to_string(),
            UnaryOp::Radians => "x0 * 0.017453292519943295".to_string(),
            // Tests on the bits (f32 compute type: every float dtype).
            UnaryOp::IsNan => return ("select(0u, 1u, is_nan(x0))".into(), "u32"),
            UnaryOp::IsInf => {
                let e = "select(0u, 1u, (bitcast<u32>(x0) & 0x7fffffffu) == 0x7f800000u)";
                return (e.into(), "u32");
            }
            UnaryOp::IsFinite => {
                let e = "select(0u, 1u, (bitcast<u32>(x0) & 0x7f800000u) != 0x7f800000u)";
                return (e.into(), "u32");
            }
            UnaryOp::IsPosInf => {
                return (
                    "select(0u, 1u, bitcast<u32>(x0) == 0x7f800000u)".into(),
                    "u32",
                );
            }
            UnaryOp::IsNegInf => {
                return (
                    "select(0u, 1u, bitcast<u32>(x0) == 0xff800000u)".into(),
                    "u32",
                );
            }
        };
        (f, ct)
    }
}

impl BinaryOp {
    /// The WGSL expression in `x0`, `x1` (of type `ct`, holding values of
    /// `dtype`) and its result type.
    fn wgsl(self, ct: &'static str, dtype: DType) -> (String, &'static str) {
        let sfx = match ct {
            "f32" => "f",
            "f64" => "d",
            "i32" => "i",
            _ => "u",
        };
        // Float comparisons test NaN on the bits (`is_nan`): WGSL lets a
        // driver assume no NaN in float comparisons, and NVIDIA's does.
        let nan = nan_test(ct);
        let ordered = if is_float_ct(ct) {
            format!("!({nan}(x0) || {nan}(x1)) && ")
        } else {
            String::new()
        };
        let cmp = |op: &str| (format!("select(0u, 1u, {ordered}x0 {op} x1)"), "u32");
        // Shifts: NumPy's, on the dtype's own width `w` (C's `<<` and `>>`
        // for counts below it; 0, or -1 for a negative `x0 >> n`, for
        // counts at or past it, and for negative counts, which NumPy casts
        // to a huge unsigned count). WGSL would take the count mod 32.
        let w = 8 * dtype.size_in_bytes();
        let count = if ct == "i32" { "u32(x1)" } else { "x1" };
        match self {
            BinaryOp::Add => ("x0 + x1".into(), ct),
            BinaryOp::Sub => ("x0 - x1".into(), ct),
            BinaryOp::Mul => ("x0 * x1".into(), ct),
            BinaryOp::Div => ("x0 / x1".into(), ct),
            BinaryOp::FloorDiv => (format!("fdiv_{sfx}(x0, x1)"), ct),
            BinaryOp::Remainder => (format!("rem_{sfx}(x0, x1)"), ct),
            BinaryOp::Pow => (format!("pow_{sfx}(x0, x1)"), ct),
            BinaryOp::Maximum if is_float_ct(ct) => (format!("maximum_{sfx}(x0, x1)"), ct),
            BinaryOp::Minimum if is_float_ct(ct) => (format!("minimum_{sfx}(x0, x1)"), ct),
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
            BinaryOp::BitwiseAnd => ("x0 & x1".into(), ct),
            BinaryOp::BitwiseOr => ("x0 | x1".into(), ct),
            BinaryOp::BitwiseXor => ("x0 ^ x1".into(), ct),
            BinaryOp::LeftShift => (
                format!("select({ct}(0), x0 << {count}, {count} < {w}u)"),
                ct,
            ),
            BinaryOp::RightShift if ct == "i32" => (
                format!("select(select(0, -1, x0 < 0), x0 >> {count}, {count} < {w}u)"),
                ct,
            ),
            BinaryOp::RightShift => (
                format!("select({ct}(0), x0 >> {count}, {count} < {w}u)"),
                ct,
            ),
            // Float only: the ops layer casts integers to f32 first, and
            // any other compute type converts here.
            BinaryOp::LogAddExp if ct == "f32" => ("logaddexp_f(x0, x1)".into(), ct),
            BinaryOp::LogAddExp => ("logaddexp_f(f32(x0), f32(x1))".into(), "f32"),
            BinaryOp::Arctan2 if ct == "f32" => ("atan2_f(x0, x1)".into(), ct),
            BinaryOp::Arctan2 => ("atan2_f(f32(x0), f32(x1))".into(), "f32"),
        }
    }
}

/// Whether a compute type is a float type.
fn is_float_ct(ct: &str) -> bool {
    ct == "f32" || ct == "f64"
}

/// The NaN test (on the bits) of a float compute type.
fn nan_test(ct: &str) -> &'static str {
    if ct == "f64" { "is_nan64" } else { "is_nan" }
}

/// The WGSL compute type of a dtype: f32 for every float but f64, f64,
/// i32 for signed integers, u32 for unsigned ones and bool.
pub(crate) fn compute_type(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::F16 | DType::BF16 => "f32",
        DType::F64 => "f64",
        DType::I32 | DType::I16 | DType::I8 => "i32",
        DType::U32 | DType::U16 | DType::U8 | DType::Bool => "u32",
        // Never an elementwise operand (refused before planning): raw bits.
        DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => "u32",
    }
}

/// The WGSL type of a dtype's raw bits: `u64` for f64, else `u32` (the low
/// 8 or 16 bits for the packed dtypes).
pub(crate) fn bits_type(d: DType) -> &'static str {
    if d == DType::F64 { "u64" } else { "u32" }
}

/// The raw bits (see [`bits_type`]) of element `i` (a `u32` expression) of
/// the `array<u32>` named `array` holding elements of `d`: a byte of a word
/// for 1-byte dtypes, a half word for 2-byte ones, two words for f64.
pub(crate) fn element_bits(d: DType, array: &str, i: &str) -> String {
    match d.size_in_bytes() {
        1 => format!("byte_of({array}[({i}) >> 2u], {i})"),
        2 => format!("half_word({array}[({i}) >> 1u], {i})"),
        4 => format!("{array}[{i}]"),
        _ => format!("word_pair({array}[2u * ({i})], {array}[2u * ({i}) + 1u])"),
    }
}

/// The compute-type value of raw element bits `b` of dtype `d`.
pub(crate) fn decode(d: DType, b: &str) -> String {
    match d {
        DType::F32 => format!("bitcast<f32>({b})"),
        DType::F64 => format!("bitcast<f64>({b})"),
        DType::I32 => format!("bitcast<i32>({b})"),
        // Sign-extend the low byte or half word.
        DType::I8 => format!("(bitcast<i32>(({b}) << 24u) >> 24u)"),
        DType::I16 => format!("(bitcast<i32>(({b}) << 16u) >> 16u)"),
        DType::U32 | DType::U16 | DType::U8 | DType::Bool => b.to_string(),
        DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => b.to_string(),
        DType::F16 => format!("f16_bits_to_f32({b})"),
        DType::BF16 => format!("bitcast<f32>(({b}) << 16u)"),
    }
}

/// Whether `x` (of compute type `ct`) is true as NumPy's `bool(x)`: nonzero,
/// NaN included. Not `x != 0`: lavapipe's `!=` is ordered, and NaN is tested
/// on the bits because drivers may assume no NaN in float comparisons.
fn truthy(x: &str, ct: &str) -> String {
    if is_float_ct(ct) {
        format!("({}({x}) || !({x} == 0.0))", nan_test(ct))
    } else {
        format!("!({x} == {ct}(0))")
    }
}

/// `r` (of compute type `ct`) converted to compute type `to`, saturating
/// floats at the limits of the integer dtype `d` (NaN to 0).
fn convert(r: &str, ct: &str, to: &str, d: DType) -> String {
    let (lo, hi) = d.integer_range().unwrap_or((0, 0));
    let narrow = d.size_in_bytes() < 4;
    match (ct, to) {
        (a, b) if a == b => r.to_string(),
        // Saturate to the integer type's own limits, NaN to 0
        // (convert.wgsl): WGSL defines float to int conversion as
        // saturating, but SPIR-V and GLSL leave out-of-range values
        // undefined and backends differ.
        ("f32" | "f64", "i32") => {
            let f = if ct == "f32" {
                "f32_to_i32_sat"
            } else {
                "f64_to_i32_sat"
            };
            if narrow {
                format!("clamp({f}({r}), {lo}, {hi})")
            } else {
                format!("{f}({r})")
            }
        }
        ("f32" | "f64", "u32") => {
            let f = if ct == "f32" {
                "f32_to_u32_sat"
            } else {
                "f64_to_u32_sat"
            };
            if narrow {
                format!("min({f}({r}), {hi}u)")
            } else {
                format!("{f}({r})")
            }
        }
        // Exact (f32 to f64) and round to nearest even, on the bits
        // (math_f64.wgsl).
        ("f32", "f64") => format!("f32_to_f64({r})"),
        ("f64", "f32") => format!("f64_to_f32({r})"),
        // Integers to floats; i32 and u32 into each other keep the bits.
        (_, to) => format!("{to}({r})"),
    }
}

/// The output bits (see [`bits_type`]) of `r` (of compute type `ct`) as
/// dtype `d`: integers wrap to their width (the low bits of the 32-bit
/// result, as NumPy's integer arithmetic), floats to integers saturate.
pub(crate) fn encode(d: DType, r: &str, ct: &str) -> String {
    if d == DType::Bool {
        return format!("select(0u, 1u, {})", truthy(r, ct));
    }
    let v = convert(r, ct, compute_type(d), d);
    match d {
        DType::F32 | DType::I32 => format!("bitcast<u32>({v})"),
        DType::U32 | DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => v,
        DType::F64 => format!("bitcast<u64>({v})"),
        DType::I8 => format!("(bitcast<u32>({v}) & 0xffu)"),
        DType::I16 => format!("(bitcast<u32>({v}) & 0xffffu)"),
        DType::U8 => format!("(({v}) & 0xffu)"),
        DType::U16 => format!("(({v}) & 0xffffu)"),
        DType::F16 => format!("f32_to_f16_bits(bitcast<u32>({v}))"),
        DType::BF16 => format!("f32_to_bf16_bits(bitcast<u32>({v}))"),
        DType::Bool => unreachable!("returned above"),
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
        ElementwiseOp::Binary(b) => b.wgsl(ct, inputs[0]),
        ElementwiseOp::DivMod => BinaryOp::FloorDiv.wgsl(ct, inputs[0]),
        ElementwiseOp::Where => {
            let cond = compute_type(inputs[0]);
            (format!("select(x2, x1, !(x0 == {cond}(0)))"), ct)
        }
    }
}

/// The compute type the op works in, given its input dtypes (already
/// promoted to one dtype for binary ops, except `Where`'s condition):
/// float-only ops (and `divide`) on integers work in f32, on f64 in f64.
pub(crate) fn op_compute_type(op: ElementwiseOp, inputs: &[DType], out: DType) -> &'static str {
    let float = if inputs[0] == DType::F64 {
        "f64"
    } else {
        "f32"
    };
    match op {
        ElementwiseOp::Cast | ElementwiseOp::Copy => compute_type(inputs[0]),
        ElementwiseOp::Unary(u) if !u.takes_integers() => float,
        ElementwiseOp::Unary(_) => compute_type(inputs[0]),
        ElementwiseOp::Binary(BinaryOp::Div) => float,
        ElementwiseOp::Binary(_) | ElementwiseOp::DivMod => compute_type(inputs[0]),
        ElementwiseOp::Where => compute_type(out),
    }
}
