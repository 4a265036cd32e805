//! The elementwise kernel (wgsl/elementwise.wgsl) and the fill kernel: the
//! WGSL expression of every elementwise op, dtype decoding and encoding,
//! strided operands, donation.

use super::{Context, Dispatch, ELEMENTWISE, FILL, Kernel, Operand, Params, QuickKey, Spec};
use crate::graph::primitive::{BinaryOp, ElementwiseOp, UnaryOp};
use crate::shape::is_contiguous;
use crate::{DType, Error, Result};

/// Maximum rank the strided kernels take.
pub(crate) const MAX_NDIM: usize = 8;

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

/// The compute type the op works in, given its input dtypes (already
/// promoted to one dtype for binary ops, except `Where`'s condition).
fn op_compute_type(op: ElementwiseOp, inputs: &[DType], out: DType) -> &'static str {
    match op {
        ElementwiseOp::Cast | ElementwiseOp::Copy => compute_type(inputs[0]),
        ElementwiseOp::Unary(u) if !u.takes_integers() => "f32",
        ElementwiseOp::Unary(_) => compute_type(inputs[0]),
        ElementwiseOp::Binary(BinaryOp::Div) => "f32",
        ElementwiseOp::Binary(_) | ElementwiseOp::DivMod => compute_type(inputs[0]),
        ElementwiseOp::Where => compute_type(out),
        ElementwiseOp::Gather => compute_type(inputs[0]),
    }
}

/// Parameters of the strided family (see wgsl/strided.wgsl), and whether
/// the CONTIGUOUS specialisation applies.
fn strided_params(
    n: usize,
    shape: &[usize],
    ops: &[Operand<'_>],
    extra: [i64; 2],
) -> Result<(Params, bool)> {
    if shape.len() > MAX_NDIM {
        return Err(Error::InvalidArgument(format!(
            "arrays of more than {MAX_NDIM} dimensions are not supported (got {})",
            shape.len()
        )));
    }
    let mut p = Params::new("strided kernel");
    p.put(0, [n as i64, shape.len() as i64, extra[0], extra[1]])?;
    p.put(8, shape.iter().map(|&d| d as i64))?;
    let mut contiguous = true;
    for (k, o) in ops.iter().enumerate() {
        p.put(4 + k, [o.offset as i64])?;
        p.put(16 + 8 * k, o.strides.iter().map(|&s| s as i64))?;
        contiguous &= is_contiguous(shape, &o.strides);
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
        ElementwiseOp::Cast | ElementwiseOp::Copy | ElementwiseOp::Gather => ("x0".to_string(), ct),
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
        let bits = element_bits(dtype, &var);
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

/// Encode `outs = op(inputs...)` over `shape`: every output dense, of
/// `out_dtype` (DivMod writes two); inputs read through strides over
/// `shape`. `donated` names the input whose buffer *is* `outs[0]` (dense, of
/// the output's shape): it is read through `out`, because wgpu forbids
/// binding one buffer as read-only and read-write in one dispatch. `extra`
/// is Gather's axis stride and length.
#[allow(clippy::too_many_arguments)]
pub(crate) fn elementwise(
    cx: &Context,
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
    let (params, contiguous) = strided_params(n, shape, inputs, extra)?;
    let dtypes: Vec<DType> = inputs.iter().map(|o| o.dtype).collect();
    let key = QuickKey::Elementwise {
        op,
        inputs: dtypes.clone(),
        out: out_dtype,
        contiguous,
        donated,
    };
    let pipeline = cx
        .cache
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
        params: params.words(),
        buffers,
        workgroups: cx.grid(threads as u64)?,
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
    cx: &Context,
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
        pipeline: cx.cache.get(kernel, &spec)?,
        params: params.words(),
        buffers: vec![out.clone()],
        workgroups: cx.grid(words as u64)?,
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
