//! The reduction kernel (wgsl/reduce.wgsl): the accumulator of every
//! reduction, the choice between one workgroup and one thread per output.

use super::elementwise::{compute_type, decode, element_bits};
use super::{
    Context, Dispatch, Kernel, Operand, Params, QuickKey, REDUCE, REDUCE_F64, Spec, WORKGROUP,
};
use crate::graph::primitive::ReduceOp;
use crate::{DType, Error, Result};

impl ReduceOp {
    /// The WGSL compute type for an input dtype.
    pub(super) fn compute_type(self, input: DType) -> &'static str {
        compute_type(self.accumulator(input))
    }

    /// (ACC, INIT, LIFT, COMBINE, FINAL) for compute type `ct`.
    pub(crate) fn parts(self, ct: &str) -> [String; 5] {
        let (lowest, highest) = match ct {
            "f32" => (
                "bitcast<f32>(0xff800000u)".to_string(),
                "bitcast<f32>(0x7f800000u)".to_string(),
            ),
            "f64" => (
                "bitcast<f64>(u64(0xfff00000u) << 32u)".to_string(),
                "bitcast<f64>(u64(0x7ff00000u) << 32u)".to_string(),
            ),
            "i32" => ("i32(-2147483648)".to_string(), "2147483647i".to_string()),
            _ => ("0u".to_string(), "4294967295u".to_string()),
        };
        // The float type of counts and means (f64 stays f64).
        let fl = if ct == "f64" { "f64" } else { "f32" };
        let nan = if ct == "f64" { "is_nan64" } else { "is_nan" };
        let counts = format!("    let count = {fl}(p.head.y);\n    let ddof = {fl}(p.misc.y);\n");
        // Statements writing value `v` (of type `t`) as element o of `out`.
        let store = |out: &str, v: &str, t: &str| match t {
            "f32" | "i32" => format!("    {out}[o] = bitcast<u32>({v});\n"),
            "f64" => format!(
                "    let {out}_bits = bitcast<u64>({v});\n    {out}[2u * o] = u32({out}_bits);\n    {out}[2u * o + 1u] = u32({out}_bits >> 32u);\n"
            ),
            _ => format!("    {out}[o] = {v};\n"),
        };
        let one = |acc: &str, init: &str, lift: &str, comb: &str, fin: &str| {
            [acc, init, lift, comb, fin].map(str::to_string)
        };
        let nan_first = ct == "f32" || ct == "f64";
        match self {
            ReduceOp::Sum | ReduceOp::Mean => {
                let fin = if self == ReduceOp::Mean {
                    format!("{counts}{}", store("out0", "acc.v / count", fl))
                } else {
                    store("out0", "acc.v", ct)
                };
                one(
                    &format!("    v: {ct},"),
                    &format!("Acc({ct}(0))"),
                    "Acc(x)",
                    "    return Acc(a.v + b.v);",
                    &fin,
                )
            }
            ReduceOp::Prod => one(
                &format!("    v: {ct},"),
                &format!("Acc({ct}(1))"),
                "Acc(x)",
                "    return Acc(a.v * b.v);",
                &store("out0", "acc.v", ct),
            ),
            ReduceOp::Max | ReduceOp::Min => {
                let (init, pick) = if self == ReduceOp::Max {
                    (&lowest, "max")
                } else {
                    (&highest, "min")
                };
                let comb = if nan_first {
                    format!(
                        "    if {nan}(a.v) {{ return a; }}\n    if {nan}(b.v) {{ return b; }}\n    return Acc({pick}(a.v, b.v));"
                    )
                } else {
                    format!("    return Acc({pick}(a.v, b.v));")
                };
                one(
                    &format!("    v: {ct},"),
                    &format!("Acc({init})"),
                    "Acc(x)",
                    &comb,
                    &store("out0", "acc.v", ct),
                )
            }
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                let (init, better) = if self == ReduceOp::ArgMax {
                    (&lowest, ">")
                } else {
                    (&highest, "<")
                };
                // NaN wins; among equals (or two NaNs) the smaller index.
                let nan = if nan_first {
                    format!(
                        "    let an = {nan}(a.v);\n    let bn = {nan}(b.v);\n    if an || bn {{\n        if an && bn {{ if a.i <= b.i {{ return a; }} return b; }}\n        if an {{ return a; }}\n        return b;\n    }}\n"
                    )
                } else {
                    String::new()
                };
                one(
                    &format!("    v: {ct},\n    i: u32,"),
                    &format!("Acc({init}, 0xffffffffu)"),
                    "Acc(x, r)",
                    &format!(
                        "{nan}    if a.v {better} b.v || (a.v == b.v && a.i <= b.i) {{ return a; }}\n    return b;"
                    ),
                    "    out0[o] = acc.i;",
                )
            }
            ReduceOp::Moments => one(
                &format!("    n: {fl},\n    mean: {fl},\n    m2: {fl},"),
                "Acc(0.0, 0.0, 0.0)",
                "Acc(1.0, x, 0.0)",
                "    let n = a.n + b.n;\n    if n == 0.0 { return a; }\n    let d = b.mean - a.mean;\n    let f = b.n / n;\n    return Acc(n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f);",
                &format!(
                    "{counts}{}{}",
                    store("out0", "acc.mean", fl),
                    store("out1", "acc.m2 / max(count - ddof, 0.0)", fl)
                ),
            ),
            ReduceOp::LogSumExp => one(
                "    m: f32,\n    s: f32,",
                "Acc(bitcast<f32>(0xff800000u), 0.0)",
                "Acc(x, 1.0)",
                // exp(m - m) is written 1 so that infinite maxima do not give inf - inf.
                "    if a.s == 0.0 { return b; }\n    if b.s == 0.0 { return a; }\n    let m = max(a.m, b.m);\n    let ea = select(exp(a.m - m), 1.0, a.m == m);\n    let eb = select(exp(b.m - m), 1.0, b.m == m);\n    return Acc(m, a.s * ea + b.s * eb);",
                "    out0[o] = bitcast<u32>(acc.m + log(acc.s));",
            ),
            ReduceOp::MaxSumExp => one(
                "    m: f32,\n    s: f32,",
                "Acc(bitcast<f32>(0xff800000u), 0.0)",
                "Acc(x, 1.0)",
                // NaN wins; exp(m - m) is written 1 so that infinite maxima
                // do not give inf - inf.
                "    if a.s == 0.0 { return b; }\n    if b.s == 0.0 { return a; }\n    if is_nan(a.m) { return a; }\n    if is_nan(b.m) { return b; }\n    let m = max(a.m, b.m);\n    let ea = select(exp(a.m - m), 1.0, a.m == m);\n    let eb = select(exp(b.m - m), 1.0, b.m == m);\n    return Acc(m, a.s * ea + b.s * eb);",
                // exp(x - m) is NaN somewhere in a row whose maximum is not
                // finite: the sum says so.
                "    out0[o] = bitcast<u32>(acc.m);\n    let finite = (bitcast<u32>(acc.m) & 0x7f800000u) != 0x7f800000u;\n    out1[o] = select(0x7fc00000u, bitcast<u32>(acc.s), finite);",
            ),
            ReduceOp::MeanSquare => one(
                &format!("    v: {fl},"),
                "Acc(0.0)",
                &format!("Acc({fl}(x) * {fl}(x))"),
                "    return Acc(a.v + b.v);",
                &format!("{counts}{}", store("out0", "acc.v / count", fl)),
            ),
            ReduceOp::All | ReduceOp::Any => {
                let (init, op) = if self == ReduceOp::All {
                    ("1u", "&")
                } else {
                    ("0u", "|")
                };
                one(
                    "    v: u32,",
                    &format!("Acc({init})"),
                    &format!("Acc(select(0u, 1u, !(x == {ct}(0))))"),
                    &format!("    return Acc(a.v {op} b.v);"),
                    "    out0[o] = acc.v;",
                )
            }
        }
    }
}

pub(crate) use crate::graph::primitive::MAX_REDUCED;

/// Reduced elements per output up to which a software adapter folds each
/// output in one thread (when there are [`THREAD_MODE_OUTPUTS`] outputs);
/// well below llvmpipe's 65535 loop iterations per invocation.
const THREAD_MODE_MAX_R: usize = 16384;

/// Outputs from which a software adapter reduces one output per thread: a
/// workgroup's 32 lane groups of 8 then share the outputs, where a tree
/// would switch between them at each of its 9 barriers. On lavapipe
/// (2026-12-01, one run, medians of 9; sum over the last axis) one thread
/// per output against one workgroup per output: f32[8, 384] 0.23 / 0.65 ms,
/// f32[8, 4096] 0.89 / 1.27, f32[80, 384] (MiniLM's layer norms) 0.82 /
/// 5.87, f32[8, 16384] 2.9 / 3.3, f32[64, 16384] 30 / 43, f32[80, 16384]
/// 32 / 58, f32[512, 4096] 68 / 140; with one output the tree wins
/// (f32[1, 4096] 0.82 / 0.23).
const THREAD_MODE_OUTPUTS: usize = 8;

/// Whether one workgroup per output (a tree) is used for `r` reduced
/// elements and `n_out` outputs. A GPU takes rows of more than 256 elements
/// a workgroup at a time (its threads then read neighbouring elements). A
/// software adapter runs a workgroup's barriers as context switches, so
/// with a few outputs to share among its lanes it folds each in one thread
/// (see [`THREAD_MODE_OUTPUTS`]).
pub(super) fn row_mode(r: usize, n_out: usize, software: bool) -> bool {
    if software && n_out >= THREAD_MODE_OUTPUTS && r <= THREAD_MODE_MAX_R {
        return false;
    }
    r > 256
}

/// The specialisation for `op` over an input of `dtype`.
pub(crate) fn spec(op: ReduceOp, dtype: DType, row: bool) -> (Spec, &'static Kernel) {
    let ct = op.compute_type(dtype);
    let [acc, init, lift, comb, fin] = op.parts(ct);
    let outs = op.out_dtypes(dtype).len();
    let mut bindings = "@group(0) @binding(1) var<storage, read> x: array<u32>;\n".to_string();
    for k in 0..outs {
        bindings.push_str(&format!(
            "@group(0) @binding({}) var<storage, read_write> out{k}: array<u32>;\n",
            2 + k
        ));
    }
    let decoded = decode(dtype, "b");
    let value = if compute_type(dtype) == ct {
        decoded
    } else {
        format!("{ct}({decoded})")
    };
    let bits = element_bits(dtype, "x", "i");
    let load = format!("    let b = {bits};\n    return {value};");
    let kernel = if ct == "f64" { &REDUCE_F64 } else { &REDUCE };
    kernel.spec_with_bindings(
        &[
            ("ROW", if row { "true" } else { "false" }),
            ("BINDINGS", &bindings),
            ("ACC", &acc),
            ("INIT", &init),
            ("LIFT", &lift),
            ("COMBINE", &comb),
            ("FINAL", &fin),
            ("CT", ct),
            ("LOAD", &load),
            ("ELEMENT", "    return load(base + inner_offset(r));"),
            ("PROLOGUE_PARAMS", ""),
        ],
        1,
        outs as u32,
    )
}

/// Representative specialisations, for validation tests.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for op in ReduceOp::ALL {
        for d in DType::ALL {
            if op.takes(d) {
                out.push(spec(op, d, true));
            }
        }
        out.push(spec(op, DType::F32, false));
    }
    out
}

/// Encode `op` over the `axes` (sorted, distinct) of `x`, an array of
/// `shape`, into the dense outputs `outs` (one per output dtype, over the
/// kept axes in order).
pub(crate) fn reduce(
    cx: &Context,
    op: ReduceOp,
    x: &Operand<'_>,
    shape: &[usize],
    axes: &[usize],
    ddof: u32,
    outs: &[&wgpu::Buffer],
) -> Result<Option<Dispatch>> {
    let (mut outer_shape, mut outer_strides) = (Vec::new(), Vec::new());
    let (mut inner_shape, mut inner_strides) = (Vec::new(), Vec::new());
    for (a, (&d, &st)) in shape.iter().zip(&x.strides).enumerate() {
        if axes.contains(&a) {
            inner_shape.push(d);
            inner_strides.push(st);
        } else {
            outer_shape.push(d);
            outer_strides.push(st);
        }
    }
    let n_out: usize = outer_shape.iter().product();
    let r: usize = inner_shape.iter().product();
    if n_out == 0 {
        return Ok(None);
    }
    if outer_shape.len() > 8 || inner_shape.len() > 8 {
        // Every array has at most MAX_DIMS dimensions (checked when it is made).
        return Err(Error::Internal(
            "a reduction over more than 8 dimensions".into(),
        ));
    }
    // A reduction over nothing (R = 0) still has one (empty) inner dim.
    if inner_shape.is_empty() {
        (inner_shape, inner_strides) = (vec![1], vec![0]);
    }
    let mut p = Params::new("reduce");
    p.put(
        0,
        [
            n_out as i64,
            r as i64,
            outer_shape.len() as i64,
            inner_shape.len() as i64,
        ],
    )?;
    p.put(4, [x.offset as i64, ddof as i64])?;
    p.put(8, outer_shape.iter().map(|&d| d as i64))?;
    p.put(16, outer_strides.iter().map(|&d| d as i64))?;
    p.put(24, inner_shape.iter().map(|&d| d as i64))?;
    p.put(32, inner_strides.iter().map(|&d| d as i64))?;
    if r > MAX_REDUCED {
        // Only broadcast views get here: no buffer holds this many elements.
        return Err(Error::TooLarge {
            op: "reduce",
            limit: crate::Limit::ReducedElements,
            value: r as u64,
            max: MAX_REDUCED as u64,
        });
    }
    let row = row_mode(r, n_out, cx.software);
    let pipeline = cx.cache.get_quick(
        QuickKey::Reduce {
            op,
            input: x.dtype,
            row,
        },
        || spec(op, x.dtype, row),
    )?;
    // Row mode: one workgroup per output, folded into two dimensions.
    let threads = if row {
        n_out as u64 * WORKGROUP as u64
    } else {
        n_out as u64
    };
    let mut buffers = vec![x.buffer.clone()];
    buffers.extend(outs.iter().map(|b| (*b).clone()));
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline,
        params: p.words(),
        buffers,
        workgroups: cx.grid(threads)?,
    }))
}
