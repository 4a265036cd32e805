//! The elementwise kernel (wgsl/elementwise.wgsl) and the fill kernel: the
//! WGSL expression of every elementwise op, dtype decoding and encoding,
//! strided operands, donation.

use super::{Dispatch, ELEMENTWISE, FILL, Kernel, PARAMS_WORDS, QuickKey, Spec, grid};
use crate::device::DeviceInner;
use crate::shape::is_contiguous;
use crate::{DType, Error, Result};

/// A kernel operand: a buffer of `dtype` read through element strides
/// (two's complement, may be negative or 0) from `offset`.
pub(crate) struct Operand<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub strides: &'a [isize],
    pub offset: usize,
    pub dtype: DType,
}

/// Maximum rank the strided kernels take.
pub(crate) const MAX_NDIM: usize = 8;

/// Unary ops. Float-only ops on integer or bool input compute in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum UnaryOp {
    Neg,
    Abs,
    Sign,
    Exp,
    Log,
    Log1p,
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
    Erf,
    Floor,
    Ceil,
    /// Round half to even, as NumPy `round`.
    Round,
    /// Logical not: 1 where the input is 0.
    LogicalNot,
}

impl UnaryOp {
    /// Every unary op, for enumerating specialisations.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) const ALL: [UnaryOp; 23] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Log1p,
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
        UnaryOp::Erf,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::LogicalNot,
    ];

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
        )
    }

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
}

impl BinaryOp {
    /// Every binary op, for enumerating specialisations.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) const ALL: [BinaryOp; 17] = [
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
        }
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

/// What one elementwise dispatch computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ElementwiseOp {
    /// Convert (or copy, for the same dtype) the one input to the output dtype.
    Cast,
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// `where(cond, a, b)`.
    Where,
    /// Floored quotient and remainder of two inputs: two outputs.
    DivMod,
    /// `x0[offset + index * axis_stride]` with `index` read from the second
    /// input (i32 or u32; negative counts from the end, then clamped):
    /// NumPy `take`. The caller gives the operands gather strides.
    Gather,
}

impl ElementwiseOp {
    /// How many outputs the op writes.
    pub(crate) fn outputs(self) -> usize {
        if self == ElementwiseOp::DivMod { 2 } else { 1 }
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

/// The compute-type value of raw element bits `b` of dtype `d`.
fn decode(d: DType, b: &str) -> String {
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
fn encode(d: DType, r: &str, ct: &str) -> String {
    match d {
        DType::Bool => format!("select(0u, 1u, {})", truthy(r, ct)),
        _ => {
            let v = match (ct, compute_type(d)) {
                (a, b) if a == b => r.to_string(),
                // Saturate (NaN to 0) before converting: WGSL defines float
                // to int conversion as saturating, but SPIR-V and GLSL leave
                // out-of-range values undefined and backends differ.
                ("f32", "i32") => {
                    format!("select(i32(clamp({r}, -2147483648.0, 2147483520.0)), 0, is_nan({r}))")
                }
                ("f32", "u32") => {
                    format!("select(u32(clamp({r}, 0.0, 4294967040.0)), 0u, is_nan({r}))")
                }
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

/// The compute type the op works in, given its input dtypes (already
/// promoted to one dtype for binary ops, except `Where`'s condition).
fn op_compute_type(op: ElementwiseOp, inputs: &[DType], out: DType) -> &'static str {
    match op {
        ElementwiseOp::Cast => compute_type(inputs[0]),
        ElementwiseOp::Unary(u) if !u.takes_integers() => "f32",
        ElementwiseOp::Unary(_) => compute_type(inputs[0]),
        ElementwiseOp::Binary(BinaryOp::Div) => "f32",
        ElementwiseOp::Binary(_) | ElementwiseOp::DivMod => compute_type(inputs[0]),
        ElementwiseOp::Where => compute_type(out),
        ElementwiseOp::Gather => compute_type(inputs[0]),
    }
}

fn put(v: &mut [u32; PARAMS_WORDS], base: usize, xs: impl IntoIterator<Item = i64>) -> Result<()> {
    for (i, x) in xs.into_iter().enumerate() {
        v[base + i] = if (i32::MIN as i64..=u32::MAX as i64).contains(&x) {
            x as u32 // negative strides wrap to two's complement on purpose
        } else {
            return Err(Error::TooLarge {
                op: "strided kernel",
                bytes: x.unsigned_abs(),
                max: u32::MAX as u64,
            });
        };
    }
    Ok(())
}

/// Parameters of the strided family (see wgsl/strided.wgsl), and whether
/// the CONTIGUOUS specialisation applies.
fn strided_params(
    n: usize,
    shape: &[usize],
    ops: &[&Operand<'_>],
    extra: [i64; 2],
) -> Result<([u32; PARAMS_WORDS], bool)> {
    if shape.len() > MAX_NDIM {
        return Err(Error::InvalidArgument(format!(
            "arrays of more than {MAX_NDIM} dimensions are not supported (got {})",
            shape.len()
        )));
    }
    let mut p = [0u32; PARAMS_WORDS];
    put(
        &mut p,
        0,
        [n as i64, shape.len() as i64, extra[0], extra[1]],
    )?;
    put(&mut p, 8, shape.iter().map(|&d| d as i64))?;
    let mut contiguous = true;
    for (k, o) in ops.iter().enumerate() {
        put(&mut p, 4 + k, [o.offset as i64])?;
        put(&mut p, 16 + 8 * k, o.strides.iter().map(|&s| s as i64))?;
        contiguous &= is_contiguous(shape, o.strides);
    }
    Ok((p, contiguous))
}

fn flag(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// The specialisation of the elementwise kernel for `op` on inputs of
/// `dtypes` (read through `out` for the `donated` one) writing `out_dtype`.
pub(crate) fn spec(
    op: ElementwiseOp,
    dtypes: &[DType],
    out_dtype: DType,
    contiguous: bool,
    donated: Option<usize>,
) -> (Spec, &'static Kernel) {
    let ct = op_compute_type(op, dtypes, out_dtype);
    let (expr, rt) = match op {
        ElementwiseOp::Cast | ElementwiseOp::Gather => ("x0".to_string(), ct),
        ElementwiseOp::Unary(u) => u.wgsl(ct),
        ElementwiseOp::Binary(b) => b.wgsl(ct),
        ElementwiseOp::DivMod => BinaryOp::FloorDiv.wgsl(ct),
        ElementwiseOp::Where => {
            let cond = compute_type(dtypes[0]);
            (format!("select(x2, x1, !(x0 == {cond}(0)))"), ct)
        }
    };
    let two = op.outputs() == 2;
    let (expr1, encoded1, store1) = if two {
        let (e1, rt1) = BinaryOp::Remainder.wgsl(ct);
        (
            e1,
            encode(out_dtype, "r1", rt1),
            "        out1[t] = v.y;".to_string(),
        )
    } else {
        ("0u".to_string(), "0u".to_string(), String::new())
    };
    let mut bindings = String::new();
    let mut loads = String::new();
    let mut args = String::new();
    let mut binding = 1;
    for (k, &dtype) in dtypes.iter().enumerate() {
        let var = if donated == Some(k) {
            "out".to_string()
        } else {
            bindings.push_str(&format!(
                "@group(0) @binding({binding}) var<storage, read> in{k}: array<u32>;\n"
            ));
            binding += 1;
            format!("in{k}")
        };
        let bits = if dtype.size_in_bytes() == 2 {
            format!("half_word({var}[i >> 1u], i)")
        } else {
            format!("{var}[i]")
        };
        // Where's condition and Gather's indices keep their own type;
        // every other input takes the op's.
        let own = matches!(
            (op, k),
            (ElementwiseOp::Where, 0) | (ElementwiseOp::Gather, 1)
        );
        let want = if own { compute_type(dtype) } else { ct };
        let mut value = decode(dtype, "b");
        if compute_type(dtype) != want {
            value = format!("{want}({value})");
        }
        loads.push_str(&format!(
            "fn load{k}(i: u32) -> {want} {{\n    let b = {bits};\n    return {value};\n}}\n"
        ));
        if op != ElementwiseOp::Gather {
            args.push_str(&format!("    let x{k} = load{k}(offset_of(e, {k}u));\n"));
        }
    }
    if op == ElementwiseOp::Gather {
        args.push_str("    let x1 = load1(offset_of(e, 1u));\n");
        let index = if dtypes[1] == DType::U32 {
            "min(x1, p.head.w - 1u)"
        } else {
            "gather_index(i32(x1))"
        };
        args.push_str(&format!(
            "    let x0 = load0(offset_of(e, 0u) + {index} * p.head.z);\n"
        ));
    }
    bindings.push_str(&format!(
        "@group(0) @binding({binding}) var<storage, read_write> out: array<u32>;\n"
    ));
    if two {
        bindings.push_str(&format!(
            "@group(0) @binding({}) var<storage, read_write> out1: array<u32>;\n",
            binding + 1
        ));
    }
    let out_bytes = out_dtype.size_in_bytes().to_string();
    let encoded = encode(out_dtype, "r", rt);
    ELEMENTWISE.spec_with_bindings(
        &[
            ("BINDINGS", &bindings),
            ("LOADS", &loads),
            ("ARGS", &args),
            ("OP", &expr),
            ("ENCODE", &encoded),
            ("OP1", &expr1),
            ("ENCODE1", &encoded1),
            ("STORE1_WORD", &store1),
            ("OUT_BYTES", &out_bytes),
            ("CONTIGUOUS", flag(contiguous)),
        ],
        (binding - 1) as u32,
        op.outputs() as u32,
    )
}

/// Encode `out = op(inputs...)` over `shape`; `out` is dense, of dtype
/// `out_dtype`. `donated` names the input whose buffer *is* `out` (dense, of
/// the output's shape): it is read through `out`, because wgpu forbids
/// binding one buffer as read-only and read-write in one dispatch.
pub(crate) fn elementwise(
    dev: &DeviceInner,
    op: ElementwiseOp,
    shape: &[usize],
    inputs: &[Operand<'_>],
    out_dtype: DType,
    out: &wgpu::Buffer,
    donated: Option<usize>,
) -> Result<Option<Dispatch>> {
    elementwise_n(dev, op, shape, inputs, out_dtype, &[out], donated, [0, 0])
}

/// [`elementwise`] for ops with several outputs (all dense, of `out_dtype`)
/// or extra parameters (Gather: the axis stride and length).
#[allow(clippy::too_many_arguments)]
pub(crate) fn elementwise_n(
    dev: &DeviceInner,
    op: ElementwiseOp,
    shape: &[usize],
    inputs: &[Operand<'_>],
    out_dtype: DType,
    outs: &[&wgpu::Buffer],
    donated: Option<usize>,
    extra: [i64; 2],
) -> Result<Option<Dispatch>> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(None);
    }
    let refs: Vec<&Operand<'_>> = inputs.iter().collect();
    let (params, contiguous) = strided_params(n, shape, &refs, extra)?;
    let dtypes: Vec<DType> = inputs.iter().map(|o| o.dtype).collect();
    let key = QuickKey::Elementwise {
        op,
        inputs: dtypes.clone(),
        out: out_dtype,
        contiguous,
        donated,
    };
    let pipeline = dev
        .kernels
        .get_quick(key, || spec(op, &dtypes, out_dtype, contiguous, donated))?;
    let mut buffers: Vec<wgpu::Buffer> = inputs
        .iter()
        .enumerate()
        .filter(|(k, _)| donated != Some(*k))
        .map(|(_, o)| o.buffer.clone())
        .collect();
    buffers.extend(outs.iter().map(|b| (*b).clone()));
    let threads = if out_dtype.size_in_bytes() == 2 {
        n.div_ceil(2)
    } else {
        n
    };
    Ok(Some(Dispatch {
        pipeline,
        params,
        buffers,
        workgroups: grid(
            threads as u64,
            dev.limits.max_compute_workgroups_per_dimension,
        )?,
    }))
}

/// The specialisations this family dispatches, for the portability test:
/// every op on every dtype, strided and dense, with and without donation,
/// 2-byte outputs, every cast. (The op expressions and dtype codecs are the
/// whole space; shapes only change parameters.)
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for d in DType::ALL {
        for u in UnaryOp::ALL {
            out.push(spec(ElementwiseOp::Unary(u), &[d], d, false, None));
        }
        for b in BinaryOp::ALL {
            let o = if b.is_predicate() { DType::Bool } else { d };
            for (contiguous, donated) in [(false, None), (true, Some(0)), (false, Some(1))] {
                out.push(spec(
                    ElementwiseOp::Binary(b),
                    &[d, d],
                    o,
                    contiguous,
                    donated,
                ));
            }
        }
        for to in DType::ALL {
            out.push(spec(ElementwiseOp::Cast, &[d], to, true, None));
        }
        out.push(spec(
            ElementwiseOp::Where,
            &[DType::Bool, d, d],
            d,
            false,
            None,
        ));
    }
    out
}

/// Write the 32-bit `word` into the first `words` words of `out`.
pub(crate) fn fill(
    dev: &DeviceInner,
    words: usize,
    word: u32,
    out: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    if words == 0 {
        return Ok(None);
    }
    let (params, _) = strided_params(words, &[words], &[], [word as i64, 0])?;
    let (spec, kernel) = FILL.spec(&[("CONTIGUOUS", "true")]);
    Ok(Some(Dispatch {
        pipeline: dev.kernels.get(kernel, &spec)?,
        params,
        buffers: vec![out.clone()],
        workgroups: grid(
            words as u64,
            dev.limits.max_compute_workgroups_per_dimension,
        )?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity() {
        assert!(is_contiguous(&[2, 3], &[3, 1]));
        assert!(!is_contiguous(&[2, 3], &[1, 2]));
        assert!(is_contiguous(&[1, 3], &[99, 1]));
        assert!(!is_contiguous(&[2, 3], &[0, 1]));
        assert!(!is_contiguous(&[3], &[-1]));
    }
}
