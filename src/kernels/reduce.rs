//! Reductions (wgsl/reduce.wgsl): the accumulator of every reduction op,
//! and one generator for every reduction, plain or fused. A plain
//! reduction is the one-load program; a fused one's elementwise prologue
//! (`sum(x * y)`, `mean((x - m)^2)`, `max(abs(x))`, the residual add before
//! a layer norm's moments: whatever group of elementwise ops reads nothing
//! but what the reduction reads, planned by `graph::fuse`) is the program
//! that computes its input, evaluated where the reduction reads it, so that
//! the input is never written. Values the group also writes (extra
//! outputs, 4-byte values of the input's shape) are stored by the thread
//! that folds each element.
//!
//! The program is the elementwise generator's (`kernels::program`): the
//! same op functions, loads, constants and rounding (every value rounded
//! to its dtype, so the result is the unfused path's bit for bit). Its
//! iteration space is the input's shape, split into the kept axes (the
//! output element `o`) and the reduced axes (`r`), each merged where every
//! load walks them alike (`program::coalesce`); every load has an offset
//! and strides over both.
//!
//! Two modes ([`Mode`]): the wide one where the reduced dimension is
//! unit-stride (a row in memory, or constant along it) for every load,
//! which loads 16 bytes per load and lane, as the elementwise wide variant
//! does (`kernels/program/wide.rs`): on lavapipe every storage load whose
//! address varies per lane is a loop over the eight lanes, so bytes per
//! load decide the speed; and the strided one, element by element, for
//! every other layout (a leading axis, a transposed view, several reduced
//! axes that do not merge). Rows longer than a part are cut into parts
//! whose partial accumulators a second dispatch combines in order.
//!
//! A one-pass normalisation ([`plan_rows`]: softmax, log_softmax,
//! layer_norm, rms_norm over the last axis) is the same kernel with an
//! epilogue: once a row's accumulator is whole (after the lane tree, which
//! every lane of the row then reads), the same threads walk the row again
//! (from cache) and write each normalised element as the one value stored
//! at each element (`e{j}`, dense f32). Softmax folds the running maximum
//! and sum of exponentials (Milakov & Gimelshein 2018); rms_norm the mean
//! of squares; layer_norm the mean, then in a second walk the mean of
//! squared deviations from it (the two-pass variance). Its rows are never
//! cut into parts, and its walks together stay under llvmpipe's loop
//! limit ([`ONE_PASS_LOOP_BUDGET`]).

use super::elementwise::{bits_type, compute_type, encode};
use super::program::{Bound, Def, Layout, Program, Source, coalesce, pw, unravel};
use super::{
    Context, Dispatch, Kernel, PARAMS_WORDS, Params, QuickKey, REDUCE, REDUCE_F64, REDUCE_PROLOGUE,
    Spec,
};
use crate::graph::primitive::{Norm, NormKind, ReduceOp};
use crate::shape::contiguous_strides;
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

    /// The statements of `fold(acc, x, r)` (compute type `ct`): folding one
    /// value into an accumulator, bit for bit `combine(acc, lift(x, r))`.
    /// The running maximum and sum of exponentials computes one `exp` per
    /// value where its `combine` computes two (lavapipe runs both sides of
    /// every branch, so the selects below are what it would run anyway).
    fn fold(self, ct: &str) -> String {
        match self {
            ReduceOp::MaxSumExp if ct == "f32" => "    let up = x > acc.m;
    let e = exp(select(x - acc.m, acc.m - x, up));
    let m = select(acc.m, x, up);
    let s = select(acc.s + select(e, 1.0, x == acc.m), acc.s * e + 1.0, up);
    // NaN wins: the first one stays.
    let keep = is_nan(acc.m);
    let first = is_nan(x) && !keep;
    return Acc(select(select(m, x, first), acc.m, keep), select(select(s, 1.0, first), acc.s, keep));"
                .to_string(),
            _ => "    return combine(acc, lift(x, r));".to_string(),
        }
    }
}

pub(crate) use crate::graph::primitive::MAX_REDUCED;

/// Reduced elements per output up to which a software adapter folds each
/// output in one thread (when there are [`THREAD_MODE_OUTPUTS`] outputs);
/// well below llvmpipe's 65535 loop iterations per invocation.
const THREAD_MODE_MAX_R: usize = 16384;

/// Outputs from which a software adapter reduces one output per thread in
/// the strided mode: a workgroup's 32 lane groups of 8 then share the
/// outputs, where a tree would switch between them at each of its 9
/// barriers. On lavapipe (2026-12-01, one run, medians of 9; sum over the
/// last axis) one thread per output against one workgroup per output:
/// f32[8, 384] 0.23 / 0.65 ms, f32[8, 4096] 0.89 / 1.27, f32[80, 384]
/// 0.82 / 5.87, f32[8, 16384] 2.9 / 3.3, f32[64, 16384] 30 / 43, f32[80,
/// 16384] 32 / 58, f32[512, 4096] 68 / 140; with one output the tree wins
/// (f32[1, 4096] 0.82 / 0.23).
const THREAD_MODE_OUTPUTS: usize = 8;

/// Whether the strided mode uses one workgroup per output (a tree) for `r`
/// reduced elements and `n_out` outputs. A GPU takes rows of more than
/// 256 elements a workgroup at a time (its threads then read neighbouring
/// elements). A software adapter runs a workgroup's barriers as context
/// switches, so with a few outputs to share among its lanes it folds each
/// in one thread (see [`THREAD_MODE_OUTPUTS`]).
fn row_mode(r: usize, n_out: usize, software: bool) -> bool {
    if software && n_out >= THREAD_MODE_OUTPUTS && r <= THREAD_MODE_MAX_R {
        return false;
    }
    r > 256
}

/// Threads per workgroup of the strided mode, the combine pass and the
/// wide mode with more than one lane per output.
const WG: usize = super::WORKGROUP as usize;

/// Threads per workgroup of the wide mode with one lane per output: a
/// software adapter shares workgroups, not threads, among its cores, so a
/// few hundred outputs still make several workgroups.
const WG_ONE_LANE: usize = 64;

/// Workers (lane groups) the wide mode aims for on a software adapter:
/// with fewer outputs than this, rows are cut into parts.
const SOFTWARE_WORKERS: usize = 2048;

/// Workgroups the wide mode aims for on a GPU.
const GPU_WORKGROUPS: usize = 1024;

/// Fewest 16-byte chunks per lane in one part of a cut row: below this the
/// second pass costs more than the parallelism gains.
const MIN_PART_CHUNKS: usize = 256;

/// Fewest 16-byte chunks in all (256 KiB) for which rows are cut into
/// parts: a smaller reduction is one dispatch however few its outputs.
const MIN_SPLIT_CHUNKS: usize = 1 << 14;

/// Loop iterations of the wide mode's main loop per lane and part, well
/// under llvmpipe's 65535 (each iteration loads `unroll` chunks).
const MAX_PART_ITERATIONS: usize = 32768;

/// Loop iterations all the walks of a one-pass normalisation may take per
/// invocation, under llvmpipe's 65535 (every loop counts).
const ONE_PASS_LOOP_BUDGET: usize = 60000;

/// Rows from which a software adapter gives each row of a one-pass
/// normalisation one lane (four workgroups of [`WG_ONE_LANE`]); with fewer
/// rows a workgroup shares each row, so that every core has work.
const ONE_LANE_ROWS: usize = 4 * WG_ONE_LANE;

/// Values folded into one of the four block accumulators of a wide lane
/// before the block joins the running accumulator (the rounding error of
/// a sum grows with the block, the block count and the tree, not with R).
const BLOCK_ELEMENTS: usize = 256;

/// How a reduction's threads share the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    /// Every load through element strides, one element at a time: one
    /// thread per output, or one workgroup per output (`row`).
    Strided { row: bool },
    /// One reduced dimension, unit-stride for every load whose bit is set
    /// in `unit` (the others are constant along it: stride 0): `lanes`
    /// threads per output (or per part of one, `split`) load 16 bytes of
    /// each unit load at a time.
    Wide { lanes: u16, split: bool, unit: u64 },
}

/// A reduction's plan: its mode and sizes, made before its scratch buffer
/// (a cut row's partial accumulators) is allocated.
pub(crate) struct Plan {
    op: ReduceOp,
    program: Program,
    mode: Mode,
    /// Kept and reduced sizes after merging.
    outer: Vec<usize>,
    inner: Vec<usize>,
    /// Per load, then per extra output: strides over `outer` then `inner`.
    strides: Vec<Vec<isize>>,
    n_out: usize,
    r: usize,
    /// Parts per output (wide mode; 1 otherwise).
    parts: usize,
    /// The normalisation written after the statistics, if any.
    epi: Option<Norm>,
}

impl Plan {
    /// Words of scratch the plan needs (`u32`s), if any: each worker's
    /// partial accumulator.
    pub(crate) fn scratch_words(&self) -> Option<usize> {
        match self.mode {
            Mode::Wide { split: true, .. } => {
                Some(self.n_out * self.parts * acc_words(self.op, self.ct()))
            }
            _ => None,
        }
    }

    /// The compute type of the reduction.
    fn ct(&self) -> &'static str {
        self.op.compute_type(self.value_dtype())
    }

    fn value_dtype(&self) -> DType {
        self.program.defs[self.program.outputs[0] as usize].dtype()
    }
}

impl NormKind {
    /// The accumulator of the statistics the row's first walk folds.
    fn stats_op(self) -> ReduceOp {
        match self {
            NormKind::Softmax | NormKind::LogSoftmax => ReduceOp::MaxSumExp,
            NormKind::LayerNorm => ReduceOp::Sum,
            NormKind::RmsNorm => ReduceOp::MeanSquare,
        }
    }

    /// Walks over the row: the statistics, the deviations (layer_norm),
    /// the result.
    fn walks(self) -> usize {
        if self == NormKind::LayerNorm { 3 } else { 2 }
    }
}

/// The dtypes of the values a kernel of `program` stores at each element:
/// the program's other outputs, then a one-pass normalisation's result
/// (f32).
fn written(program: &Program, epi: Option<Norm>) -> Vec<DType> {
    program.outputs[1..]
        .iter()
        .map(|&v| program.defs[v as usize].dtype())
        .chain(epi.map(|_| DType::F32))
        .collect()
}

/// Whether `program` can be reduced by this kernel: its first output is
/// the reduced value, the others (values written as extra outputs) are
/// 4-byte values; no gather, no donated load, and no f64 value but a lone
/// f64 load (the f64 variant has no op helpers).
pub(crate) fn supported(program: &Program) -> bool {
    let f64_ops = program
        .defs
        .iter()
        .any(|d| matches!(d, Def::Op { .. }) && d.dtype() == DType::F64);
    // An f64 load is supported only as the program's one def.
    let lone_f64 = program.defs.len() == 1 || program.defs.iter().all(|d| d.dtype() != DType::F64);
    !program.outputs.is_empty()
        && program.outputs[1..]
            .iter()
            .all(|&v| program.defs[v as usize].dtype().size_in_bytes() == 4)
        && !f64_ops
        && lone_f64
        && program.defs.iter().all(|d| match d {
            Def::Load { gather, source, .. } => {
                gather.is_none() && matches!(source, Source::Input(_))
            }
            _ => true,
        })
}

/// Plan `op` over the reduced `axes` (sorted, distinct) of the value
/// `program` computes over `bound.shape` (a plain reduction: the program
/// that loads its input); `None` when there is no output element.
///
/// # Errors
/// [`Error::TooLarge`] for more than [`MAX_REDUCED`] elements per output;
/// [`Error::InvalidArgument`] for more than 8 kept or reduced dimensions
/// after merging.
pub(crate) fn plan(
    cx: &Context,
    op: ReduceOp,
    program: Program,
    bound: &Bound<'_>,
    axes: &[usize],
) -> Result<Option<Plan>> {
    plan_with(cx, op, program, bound, axes, None)
}

/// Plan the one-pass normalisation `norm` of the rows along the reduced
/// `axes` of `program`'s value (its first load; loads after it are the
/// weight and the bias that `norm` has, f32, addressed like the row); the
/// result is `bound.outputs[0]` (f32, dense over `bound.shape`). `None`
/// when there is no row.
///
/// # Errors
/// As [`plan`].
pub(crate) fn plan_rows(
    cx: &Context,
    norm: Norm,
    program: Program,
    bound: &Bound<'_>,
    axes: &[usize],
) -> Result<Option<Plan>> {
    plan_with(cx, norm.kind.stats_op(), program, bound, axes, Some(norm))
}

fn plan_with(
    cx: &Context,
    op: ReduceOp,
    mut program: Program,
    bound: &Bound<'_>,
    axes: &[usize],
    epi: Option<Norm>,
) -> Result<Option<Plan>> {
    let shape = &bound.shape;
    let extras = written(&program, epi).len();
    // Extra outputs are dense over the shape: addressed like loads.
    let dense = contiguous_strides(shape);
    let split = |keep: bool| {
        let dims: Vec<usize> = (0..shape.len())
            .filter(|a| axes.contains(a) != keep)
            .collect();
        let sizes: Vec<usize> = dims.iter().map(|&a| shape[a]).collect();
        let strides: Vec<Vec<isize>> = bound
            .loads
            .iter()
            .map(|l| &l.strides)
            .chain(std::iter::repeat_n(&dense, extras))
            .map(|st| dims.iter().map(|&a| st[a]).collect())
            .collect();
        coalesce(&sizes, &strides)
    };
    let (outer, outer_strides) = split(true);
    let (mut inner, mut inner_strides) = split(false);
    let n_out: usize = outer.iter().product();
    let r: usize = inner.iter().product();
    if n_out == 0 {
        return Ok(None);
    }
    if outer.len() > 8 || inner.len() > 8 {
        return Err(Error::InvalidArgument(format!(
            "a reduction over more than 8 dimensions after merging (kept {}, reduced {})",
            outer.len(),
            inner.len()
        )));
    }
    if r > MAX_REDUCED {
        // Only broadcast views get here: no buffer holds this many elements.
        return Err(Error::TooLarge {
            op: "reduce",
            limit: crate::Limit::ReducedElements,
            value: r as u64,
            max: MAX_REDUCED as u64,
        });
    }
    // A reduction over one element (every reduced size 1, merged away)
    // still has one reduced dimension.
    if inner.is_empty() {
        inner.push(1);
        inner_strides.iter_mut().for_each(|s| s.push(0));
    }
    let strides: Vec<Vec<isize>> = outer_strides
        .into_iter()
        .zip(inner_strides)
        .map(|(mut o, i)| {
            o.extend(i);
            o
        })
        .collect();
    program.rank = 0;
    for d in program.defs.iter_mut() {
        if let Def::Load { dense, .. } = d {
            *dense = false;
        }
    }
    let walks = epi.map_or(1, |e| e.kind.walks());
    // One thread per row walks it `walks` times, 257 loop iterations per
    // 256 elements.
    let thread_fits = walks * (r + r / WG + 2) <= ONE_PASS_LOOP_BUDGET;
    let row = row_mode(r, n_out, cx.software) || (epi.is_some() && !thread_fits);
    let mut plan = Plan {
        op,
        program,
        mode: Mode::Strided { row },
        outer,
        inner,
        strides,
        n_out,
        r,
        parts: 1,
        epi,
    };
    if let Some(unit) = wide_loads(&plan, bound) {
        let k = elements(&plan.program, unit, epi);
        let chunks = (r + k - 1).div_ceil(k) + 1;
        let unroll = unroll(k);
        if epi.is_some() {
            // One row per lane group, never cut: one lane per row on a
            // software adapter with enough rows whose walks fit, else a
            // workgroup per row (as the GPU takes long rows).
            let block = (BLOCK_ELEMENTS / k).max(unroll);
            let one_lane =
                walks * (chunks / unroll + chunks / block + 2 * k + 8) <= ONE_PASS_LOOP_BUDGET;
            let lanes = if cx.software && n_out >= ONE_LANE_ROWS && one_lane {
                1
            } else if cx.software || chunks >= 16 * WG {
                WG
            } else {
                32
            };
            plan.mode = Mode::Wide {
                lanes: lanes as u16,
                split: false,
                unit,
            };
            plan.program.vec4 = true;
            return Ok(Some(plan));
        }
        let (lanes, aim) = if cx.software {
            (1, SOFTWARE_WORKERS)
        } else if chunks >= 16 * WG {
            (WG, GPU_WORKGROUPS)
        } else {
            (32, GPU_WORKGROUPS * WG / 32)
        };
        let per_lane = chunks.div_ceil(lanes);
        let most = if n_out * chunks >= MIN_SPLIT_CHUNKS {
            per_lane.div_ceil(MIN_PART_CHUNKS).max(1)
        } else {
            1
        };
        let least = per_lane.div_ceil(MAX_PART_ITERATIONS * unroll).max(1);
        let parts = aim.div_ceil(n_out).min(most).max(least);
        plan.parts = parts;
        plan.mode = Mode::Wide {
            lanes: lanes as u16,
            split: parts > 1,
            unit,
        };
        plan.program.vec4 = true;
    }
    Ok(Some(plan))
}

/// The unit loads (a bit per load) if the plan can take the wide mode:
/// one reduced dimension of more than one element, along which every load
/// has stride 1 or 0 (at least one has 1), every extra output stride 1,
/// the unit loads and the extra outputs in step (their offsets and kept
/// strides equal modulo the elements per 16 bytes, so that one element of
/// the row sits at the same place of a 16-byte chunk in each), and every
/// buffer a whole number of 16 bytes long.
fn wide_loads(plan: &Plan, bound: &Bound<'_>) -> Option<u64> {
    let ro = plan.outer.len();
    let loads = bound.loads.len();
    if plan.inner.len() != 1 || plan.r < 2 || loads > 64 || !supported(&plan.program) {
        return None;
    }
    let whole = |b: &&wgpu::Buffer| b.size().is_multiple_of(16);
    if !bound.inputs.iter().all(whole) || !bound.outputs.iter().all(whole) {
        return None;
    }
    let mut unit = 0u64;
    for (li, s) in plan.strides[..loads].iter().enumerate() {
        match s[ro] {
            1 => unit |= 1 << li,
            0 => {}
            _ => return None,
        }
    }
    if unit == 0 || plan.strides[loads..].iter().any(|s| s[ro] != 1) {
        return None;
    }
    let k = elements(&plan.program, unit, plan.epi) as i64;
    // Offsets and kept strides of the unit loads and the extras.
    let stepped: Vec<(i64, &[isize])> = (0..loads)
        .filter(|li| unit >> li & 1 == 1)
        .map(|li| (bound.loads[li].offset as i64, &plan.strides[li][..ro]))
        .chain(plan.strides[loads..].iter().map(|s| (0, &s[..ro])))
        .collect();
    let (o0, s0) = stepped[0];
    let in_step = stepped.iter().all(|&(o, s)| {
        (o - o0).rem_euclid(k) == 0
            && s.iter()
                .zip(s0)
                .all(|(&a, &b)| (a as i64 - b as i64).rem_euclid(k) == 0)
    });
    in_step.then_some(unit)
}

/// Bytes of one element of `d` in memory.
fn width(d: DType) -> usize {
    d.size_in_bytes()
}

/// The unit loads' (bit per load in `unit`) and extra outputs' dtypes.
fn unit_dtypes(program: &Program, unit: u64, epi: Option<Norm>) -> Vec<DType> {
    let loads = program.defs.iter().filter_map(|d| match d {
        Def::Load { dtype, .. } => Some(*dtype),
        _ => None,
    });
    loads
        .enumerate()
        .filter(|(li, _)| unit >> li & 1 == 1)
        .map(|(_, d)| d)
        .chain(written(program, epi))
        .collect()
}

/// `K`, the elements of one 16-byte chunk of the narrowest unit load or
/// extra output (4 for f32, 8 for f16, 16 for u8, 2 for f64): what a lane
/// folds per chunk.
fn elements(program: &Program, unit: u64, epi: Option<Norm>) -> usize {
    16 / unit_dtypes(program, unit, epi)
        .into_iter()
        .map(width)
        .min()
        .unwrap_or(4)
        .min(16)
}

/// Chunks per iteration of a wide lane's main loop: 16 values (8 for f64).
fn unroll(k: usize) -> usize {
    (16 / k).clamp(1, 4)
}

/// The fields (name, WGSL type) of struct Acc in `acc`, as `parts` writes it.
fn acc_fields(acc: &str) -> Vec<(String, String)> {
    acc.lines()
        .filter_map(|l| {
            let (n, t) = l.trim().trim_end_matches(',').split_once(':')?;
            Some((n.trim().to_string(), t.trim().to_string()))
        })
        .collect()
}

/// Words of one accumulator of `op` in compute type `ct`, in scratch.
fn acc_words(op: ReduceOp, ct: &str) -> usize {
    let [acc, ..] = op.parts(ct);
    acc_fields(&acc)
        .iter()
        .map(|(_, t)| if t == "f64" { 2 } else { 1 })
        .sum()
}

/// `store_partial(i, a)` (the first pass, `store`) or `load_partial(i)`
/// (the combine pass): accumulator `i` of the scratch buffer `part`, word
/// by word.
fn partial_functions(acc: &str, store_it: bool) -> String {
    let fields = acc_fields(acc);
    let n: usize = fields
        .iter()
        .map(|(_, t)| if t == "f64" { 2 } else { 1 })
        .sum();
    let mut store = format!("fn store_partial(i: u32, a: Acc) {{\n    let w = i * {n}u;\n");
    let mut args = Vec::new();
    let mut load = format!("fn load_partial(i: u32) -> Acc {{\n    let w = i * {n}u;\n");
    let mut at = 0;
    for (name, t) in &fields {
        match t.as_str() {
            "f64" => {
                store.push_str(&format!(
                    "    let {name}_bits = bitcast<u64>(a.{name});\n    part[w + {at}u] = u32({name}_bits);\n    part[w + {}u] = u32({name}_bits >> 32u);\n",
                    at + 1
                ));
                args.push(format!(
                    "bitcast<f64>(word_pair(part[w + {at}u], part[w + {}u]))",
                    at + 1
                ));
                at += 2;
            }
            "u32" => {
                store.push_str(&format!("    part[w + {at}u] = a.{name};\n"));
                args.push(format!("part[w + {at}u]"));
                at += 1;
            }
            _ => {
                store.push_str(&format!("    part[w + {at}u] = bitcast<u32>(a.{name});\n"));
                args.push(format!("bitcast<{t}>(part[w + {at}u])"));
                at += 1;
            }
        }
    }
    store.push_str("}\n");
    load.push_str(&format!("    return Acc({});\n}}\n", args.join(", ")));
    if store_it { store } else { load }
}

/// The kernel family for `program`'s helpers (and a normalisation's
/// `log1p_f`).
fn kernel_for(program: &Program, epi: bool) -> &'static Kernel {
    if program.uses_f64() {
        &REDUCE_F64
    } else if epi || program.defs.iter().any(|d| matches!(d, Def::Op { .. })) {
        &REDUCE_PROLOGUE
    } else {
        &REDUCE
    }
}

/// Parameter words of the program (`p.w`): kept and reduced sizes, the
/// program's loads (offset, strides over both) and constants, then per
/// extra output its offset and strides.
struct Words {
    layout: Layout,
    /// Each extra output's offset word.
    extras: Vec<usize>,
    /// All of them, a multiple of four.
    total: usize,
}

fn words(program: &Program, (ro, ri): (usize, usize), epi: Option<Norm>) -> Words {
    let layout = program.layout(ro + ri, &[ro, ri]);
    let extras: Vec<usize> = (0..written(program, epi).len())
        .map(|j| layout.words + j * (1 + ro + ri))
        .collect();
    let total = (layout.words + extras.len() * (1 + ro + ri)).next_multiple_of(4);
    Words {
        layout,
        extras,
        total,
    }
}

/// The specialisation of `op` over `program`'s first output with `ranks`
/// kept and reduced dimensions (after merging), in `mode`, with `outs`
/// outputs of the reduction (scratch instead in a split wide mode); the
/// program's other outputs are stored at each element (bindings `e{j}`).
pub(crate) fn spec(
    op: ReduceOp,
    program: &Program,
    ranks: (usize, usize),
    mode: Mode,
    outs: usize,
    epi: Option<Norm>,
) -> (Spec, &'static Kernel) {
    let ro = ranks.0;
    let v = program.outputs[0];
    let dtype = program.defs[v as usize].dtype();
    let ct = op.compute_type(dtype);
    let [acc, init, lift, comb, fin] = op.parts(ct);
    let w = words(program, ranks, epi);
    let extras = written(program, epi).len();
    let wide = matches!(mode, Mode::Wide { .. });
    let split = matches!(mode, Mode::Wide { split: true, .. });
    let mut names: Vec<(String, &str)> = if split {
        vec![("part".to_string(), "u32")]
    } else {
        (0..outs).map(|k| (format!("out{k}"), "u32")).collect()
    };
    let extra_ty = if wide { "vec4<u32>" } else { "u32" };
    names.extend((0..extras).map(|j| (format!("e{j}"), extra_ty)));
    let mut bindings = program.storage_bindings(1, &names);
    bindings.push_str(&program.functions());
    let finish = if split || epi.is_some() {
        String::new()
    } else {
        format!("fn finish(o: u32, acc: Acc) {{\n{fin}\n}}\n")
    };
    let partial = if split {
        partial_functions(&acc, true)
    } else {
        String::new()
    };
    let (value, main) = match mode {
        Mode::Strided { row } => (
            strided_value(program, &w, ranks, ct, epi),
            strided_main(program, &w, row, ro, &init, epi),
        ),
        Mode::Wide { lanes, split, unit } => (
            wide_value(program, &w, ct, epi),
            wide_main(program, &w, ro, (lanes as usize, split, unit), &init, epi),
        ),
    };
    let params = format!("    w: array<vec4<u32>, {}>,", (w.total / 4).max(1));
    let (mut spec, kernel) = fill(
        kernel_for(program, epi.is_some()),
        op,
        ct,
        [&acc, &init, &lift, &comb],
        &[
            ("PARAMS", &params),
            ("BINDINGS", &bindings),
            ("FINISH", &finish),
            ("PARTIAL", &partial),
            ("VALUE", &value),
            ("MAIN", &main),
        ],
        (program.inputs as u32, names.len() as u32),
    );
    spec.params = (REDUCE_WORDS + w.total).next_multiple_of(PARAMS_WORDS) as u32;
    (spec, kernel)
}

/// `kernel`'s template filled with `op`'s accumulator in `ct` (its type,
/// initial value, lift and combine from [`ReduceOp::parts`], and its fold)
/// and the substitutions that differ per kernel; `(reads, writes)` as
/// [`Kernel::spec_with_bindings`].
fn fill(
    kernel: &'static Kernel,
    op: ReduceOp,
    ct: &'static str,
    [acc, init, lift, comb]: [&str; 4],
    rest: &[(&'static str, &str)],
    (reads, writes): (u32, u32),
) -> (Spec, &'static Kernel) {
    let fold = op.fold(ct);
    let mut subs = vec![
        ("ACC", acc),
        ("INIT", init),
        ("LIFT", lift),
        ("COMBINE", comb),
        ("FOLD", fold.as_str()),
        ("CT", ct),
    ];
    subs.extend_from_slice(rest);
    kernel.spec_with_bindings(&subs, reads, writes)
}

/// The workgroup memory of the lane trees.
const PARTIAL_MEMORY: &str = "var<workgroup> partial: array<Acc, 256>;\n\n";

/// Words before `p.w`: head and misc.
const REDUCE_WORDS: usize = 8;

/// The row bases of output `o` (a WGSL expression): its kept index
/// unravelled, then `b{li}` for each load and `be{j}` for each extra
/// output, the element where its row starts.
fn row_bases(w: &Words, ro: usize, o: &str) -> String {
    let mut s = String::new();
    if ro > 0 {
        s.push_str(&unravel(o, "i", 0, ro));
    }
    let base = |off: usize| {
        let mut a = pw(off);
        for d in 0..ro {
            a.push_str(&format!(" + i{d} * {}", pw(off + 1 + d)));
        }
        a
    };
    for (li, &lw) in w.layout.loads.iter().enumerate() {
        s.push_str(&format!("    let b{li} = {};\n", base(lw)));
    }
    for (j, &ew) in w.extras.iter().enumerate() {
        s.push_str(&format!("    let be{j} = {};\n", base(ew)));
    }
    s
}

/// The arguments that pass the row bases on.
fn base_args(program: &Program, w: &Words) -> String {
    let loads = (0..w.layout.loads.len()).map(|li| format!(", b{li}"));
    let extras = (0..program.outputs.len() - 1).map(|j| format!(", be{j}"));
    loads.chain(extras).collect()
}

/// `{ct}` of the program's first output value `v{v}`.
fn reduced_value(program: &Program, ct: &str) -> String {
    let v = program.outputs[0];
    if compute_type(program.defs[v as usize].dtype()) == ct {
        format!("v{v}")
    } else {
        format!("{ct}(v{v})")
    }
}

/// The strided mode's `value(r, b0.., be0..)`: the value at reduced index
/// `r` of the row whose loads start at `b{li}` (the reduced index
/// unravelled, each load through its strides); the extra outputs are
/// stored there.
fn strided_value(
    program: &Program,
    w: &Words,
    (ro, ri): (usize, usize),
    ct: &str,
    epi: Option<Norm>,
) -> String {
    let params: String = (0..w.layout.loads.len())
        .map(|li| format!(", b{li}: u32"))
        .chain((0..program.outputs.len() - 1).map(|j| format!(", be{j}: u32")))
        .collect();
    let mut s = match epi {
        Some(_) => format!(
            "struct Val {{\n    v: {ct},\n    a: f32,\n    b: f32,\n}}\n\nfn value(r: u32{params}) -> Val {{\n"
        ),
        None => format!("fn value(r: u32{params}) -> {ct} {{\n"),
    };
    s.push_str(&unravel("r", "j", ro, ri));
    let address = |base: String, wd: usize| {
        let mut a = base;
        for d in 0..ri {
            a.push_str(&format!(" + j{d} * {}", pw(wd + 1 + ro + d)));
        }
        a
    };
    s.push_str(&program.statements(&w.layout, &|li, wd| address(format!("b{li}"), wd)));
    for (j, (&x, &ew)) in program.outputs[1..].iter().zip(&w.extras).enumerate() {
        let d = program.defs[x as usize].dtype();
        s.push_str(&format!(
            "    e{j}[{}] = {};\n",
            address(format!("be{j}"), ew),
            encode(d, &format!("v{x}"), compute_type(d))
        ));
    }
    let Some(norm) = epi else {
        s.push_str(&format!("    return {};\n}}\n", reduced_value(program, ct)));
        return s;
    };
    let (a, b) = norm_params(norm);
    s.push_str(&format!(
        "    return Val({}, {a}, {b});\n}}\n\n",
        reduced_value(program, ct)
    ));
    // The normalised row's element r, dense f32 (the last value stored).
    let j = w.extras.len() - 1;
    s.push_str("fn store_y(r: u32, be: u32, y: f32) {\n");
    s.push_str(&unravel("r", "j", ro, ri));
    s.push_str(&format!(
        "    e{j}[{}] = bitcast<u32>(y);\n}}\n",
        address("be".to_string(), w.extras[j])
    ));
    s
}

/// A normalisation's weight and bias at an element: the values of the
/// loads after the row's (`v1`, `v2`), or 1 and 0 where it has none.
fn norm_params(norm: Norm) -> (String, String) {
    let a = if norm.weight {
        "v1".to_string()
    } else {
        "1.0".to_string()
    };
    let b = if norm.bias {
        format!("v{}", 1 + norm.weight as usize)
    } else {
        "0.0".to_string()
    };
    (a, b)
}

/// A WGSL expression of one value `x` (what a walk folds).
type Fold<'a> = &'a dyn Fn(&str) -> String;

/// A WGSL expression of one value `x`, its weight and its bias (what a
/// normalisation writes).
type Out<'a> = &'a dyn Fn(&str, &str, &str) -> String;

/// A one-pass normalisation's epilogue, after the row's first walk has
/// folded `acc`: `gather(acc, tot)` makes the row's whole accumulator
/// `tot` (after the lane tree where there is one), `walk(acc, f)` folds
/// `f(x)` over the row's values into a new accumulator `acc`, and
/// `write(f)` stores `f(x, weight, bias)` at each element.
fn epilogue(
    norm: Norm,
    gather: &dyn Fn(&str, &str) -> String,
    walk: &dyn Fn(&str, Fold<'_>) -> String,
    write: &dyn Fn(Out<'_>) -> String,
) -> String {
    let mut s = gather("acc", "tot");
    s.push_str("    let count = f32(big_r);\n    let eps = bitcast<f32>(p.misc.z);\n");
    type Formula = Box<dyn Fn(&str, &str, &str) -> String>;
    let y: Formula = match norm.kind {
        NormKind::Softmax | NormKind::LogSoftmax => {
            // As the statistics' finish: a row whose maximum is not
            // finite has a NaN sum.
            s.push_str(
                "    let m = tot.m;\n\
                 \x20   let finite = (bitcast<u32>(m) & 0x7f800000u) != 0x7f800000u;\n\
                 \x20   let s = select(bitcast<f32>(0x7fc00000u), tot.s, finite);\n",
            );
            if norm.kind == NormKind::Softmax {
                Box::new(|x, _, _| format!("exp({x} - m) / s"))
            } else {
                s.push_str("    let ls = log1p_f(s - 1.0);\n");
                Box::new(|x, _, _| format!("({x} - m) - ls"))
            }
        }
        NormKind::RmsNorm => {
            s.push_str("    let rstd = inverseSqrt(tot.v / count + eps);\n");
            if norm.weight {
                Box::new(|x, a, _| format!("{x} * rstd * {a}"))
            } else {
                Box::new(|x, _, _| format!("{x} * rstd"))
            }
        }
        NormKind::LayerNorm => {
            s.push_str("    let mean = tot.v / count;\n");
            s.push_str(&walk("dev", &|x| format!("({x} - mean) * ({x} - mean)")));
            s.push_str(&gather("dev", "dtot"));
            s.push_str("    let rstd = inverseSqrt(dtot.v / count + eps);\n");
            match (norm.weight, norm.bias) {
                (false, false) => Box::new(|x, _, _| format!("({x} - mean) * rstd")),
                (true, false) => Box::new(|x, a, _| format!("({x} - mean) * rstd * {a}")),
                (false, true) => Box::new(|x, _, b| format!("({x} - mean) * rstd + {b}")),
                (true, true) => Box::new(|x, a, b| format!("({x} - mean) * rstd * {a} + {b}")),
            }
        }
    };
    s.push_str(&write(&*y));
    s
}

/// The entry point's signature and the sizes every mode reads.
fn main_head(wg: usize) -> String {
    format!(
        "@compute @workgroup_size({wg})\n\
         fn main(\n\
         \x20   @builtin(local_invocation_id) lid: vec3<u32>,\n\
         \x20   @builtin(workgroup_id) wid: vec3<u32>,\n\
         \x20   @builtin(global_invocation_id) gid: vec3<u32>,\n\
         \x20   @builtin(num_workgroups) nwg: vec3<u32>,\n\
         ) {{\n\
         \x20   let n_out = p.head.x;\n\
         \x20   let big_r = p.head.y;\n"
    )
}

/// The strided mode's entry point: one workgroup per output (`row`: 256
/// strided shares, eight per loop iteration, then a tree), or one thread
/// per output folding blocks of 256 in order.
fn strided_main(
    program: &Program,
    w: &Words,
    row: bool,
    ro: usize,
    init: &str,
    epi: Option<Norm>,
) -> String {
    let args = base_args(program, w);
    // The value's field where value() returns a struct.
    let dot = if epi.is_some() { ".v" } else { "" };
    let jy = w.extras.len().saturating_sub(1);
    let mut s = if row {
        PARTIAL_MEMORY.to_string()
    } else {
        String::new()
    };
    s.push_str(&main_head(WG));
    if row {
        s.push_str(&format!(
            "    let o = wid.x + wid.y * nwg.x;\n    let oc = min(o, n_out - 1u);\n{}",
            row_bases(w, ro, "oc")
        ));
        s.push_str(&format!("    var acc = {init};\n    var r = lid.x;\n"));
        // Eight values per iteration keep the loop count far below
        // llvmpipe's limit: 2^16 / 2 * 8 * 256 values per row.
        s.push_str(&format!(
            "    for (; r + 7u * {WG}u < big_r; r += 8u * {WG}u) {{\n"
        ));
        for k in 0..8 {
            s.push_str(&format!(
                "        acc = fold(acc, value(r + {k}u * {WG}u{args}){dot}, r + {k}u * {WG}u);\n"
            ));
        }
        s.push_str(&format!(
            "    }}\n    for (; r < big_r; r += {WG}u) {{\n        acc = fold(acc, value(r{args}){dot}, r);\n    }}\n"
        ));
        match epi {
            None => {
                s.push_str(&tree("acc", "lid.x", WG));
                s.push_str(
                    "    if lid.x == 0u && o < n_out {\n        finish(o, partial[lid.x]);\n    }\n",
                );
            }
            Some(norm) => s.push_str(&epilogue(
                norm,
                &|acc, tot| {
                    format!(
                        "{}    let {tot} = partial[0];\n    workgroupBarrier();\n",
                        tree(acc, "lid.x", WG)
                    )
                },
                &|acc, f| {
                    format!(
                        "    var {acc} = {init};\n    for (var r = lid.x; r < big_r; r += {WG}u) {{\n        {acc} = fold({acc}, {}, r);\n    }}\n",
                        f(&format!("value(r{args}).v"))
                    )
                },
                &|y| {
                    format!(
                        "    if o < n_out {{\n        for (var r = lid.x; r < big_r; r += {WG}u) {{\n            let v = value(r{args});\n            store_y(r, be{jy}, {});\n        }}\n    }}\n",
                        y("v.v", "v.a", "v.b")
                    )
                },
            )),
        }
    } else {
        s.push_str(&format!(
            "    let o = gid.x + gid.y * nwg.x * {WG}u;\n    if o >= n_out {{\n        return;\n    }}\n{}",
            row_bases(w, ro, "o")
        ));
        // Blocks of 256 folded in order, then combined: the rounding error
        // of a sum grows with 256 + R / 256 terms, not R (every iteration
        // of both loops counts towards llvmpipe's limit: R stays below it).
        let blocks = |acc: &str, x: &str| {
            format!(
                "    var {acc} = {init};\n\
                 \x20   for (var r0 = 0u; r0 < big_r; r0 += {WG}u) {{\n\
                 \x20       var block = {init};\n\
                 \x20       let end = min(r0 + {WG}u, big_r);\n\
                 \x20       for (var r = r0; r < end; r++) {{\n\
                 \x20           block = fold(block, {x}, r);\n\
                 \x20       }}\n\
                 \x20       {acc} = combine({acc}, block);\n\
                 \x20   }}\n"
            )
        };
        s.push_str(&blocks("acc", &format!("value(r{args}){dot}")));
        match epi {
            None => s.push_str("    finish(o, acc);\n"),
            Some(norm) => s.push_str(&epilogue(
                norm,
                &|acc, tot| format!("    let {tot} = {acc};\n"),
                &|acc, f| blocks(acc, &f(&format!("value(r{args}).v"))),
                &|y| {
                    format!(
                        "    for (var r = 0u; r < big_r; r++) {{\n        let v = value(r{args});\n        store_y(r, be{jy}, {});\n    }}\n",
                        y("v.v", "v.a", "v.b")
                    )
                },
            )),
        }
    }
    s.push_str("}\n");
    s
}

/// The lane tree: the `lanes` accumulators `acc` of each lane group (lane
/// `lane`, the group's lane 0 at `lid.x - lane`) combined in workgroup
/// memory, the result in the group's lane 0 slot. Every thread of the
/// workgroup runs the same barriers.
fn tree(acc: &str, lane: &str, lanes: usize) -> String {
    format!(
        "    partial[lid.x] = {acc};\n\
         \x20   workgroupBarrier();\n\
         \x20   for (var s = {}u; s > 0u; s >>= 1u) {{\n\
         \x20       if {lane} < s {{\n\
         \x20           partial[lid.x] = combine(partial[lid.x], partial[lid.x + s]);\n\
         \x20       }}\n\
         \x20       workgroupBarrier();\n\
         \x20   }}\n",
        lanes / 2
    )
}

/// The wide mode's `value(l0, ..)`: the value and the extra outputs' words
/// at one element, from each load's bits there (the program in its wide
/// form decodes its loads from `l{li}`).
fn wide_value(program: &Program, w: &Words, ct: &str, epi: Option<Norm>) -> String {
    let extras = program.outputs.len() - 1;
    let mut s = format!("struct Val {{\n    v: {ct},\n");
    for j in 0..extras {
        s.push_str(&format!("    e{j}: u32,\n"));
    }
    if epi.is_some() {
        s.push_str("    a: f32,\n    b: f32,\n");
    }
    s.push_str("}\n\n");
    let params: Vec<String> = program
        .defs
        .iter()
        .filter_map(|d| match d {
            Def::Load { dtype, .. } => Some(bits_type(*dtype)),
            _ => None,
        })
        .enumerate()
        .map(|(li, t)| format!("l{li}: {t}"))
        .collect();
    s.push_str(&format!("fn value({}) -> Val {{\n", params.join(", ")));
    let none = |_: usize, _: usize| String::new();
    s.push_str(&program.statements(&w.layout, &none));
    let mut fields = vec![reduced_value(program, ct)];
    for &x in &program.outputs[1..] {
        let d = program.defs[x as usize].dtype();
        fields.push(encode(d, &format!("v{x}"), compute_type(d)));
    }
    if let Some(norm) = epi {
        let (a, b) = norm_params(norm);
        fields.extend([a, b]);
    }
    s.push_str(&format!("    return Val({});\n}}\n", fields.join(", ")));
    s
}

/// The bits of element `q` (a constant) of a chunk of dtype `d` whose
/// vec4s are `x{tag}_{m}`.
fn chunk_bits(d: DType, tag: &str, q: usize) -> String {
    let word = |i: usize| format!("x{tag}_{}.{}", i / 4, ["x", "y", "z", "w"][i % 4]);
    match width(d) {
        1 => format!("byte_of({}, {q}u)", word(q / 4)),
        2 => format!("half_word({}, {q}u)", word(q / 2)),
        4 => word(q),
        _ => format!("word_pair({}, {})", word(2 * q), word(2 * q + 1)),
    }
}

/// The bits of element `e` (a `u32` expression) of dtype `d` in the
/// `array<vec4<u32>>` named `array`, a word at a time.
fn vec4_element_bits(d: DType, array: &str, e: &str) -> String {
    let word = |w: String| format!("{array}[({w}) >> 2u][({w}) & 3u]");
    match width(d) {
        1 => format!("byte_of({}, {e})", word(format!("({e}) >> 2u"))),
        2 => format!("half_word({}, {e})", word(format!("({e}) >> 1u"))),
        4 => word(e.to_string()),
        _ => format!(
            "word_pair({}, {})",
            word(format!("2u * ({e})")),
            word(format!("2u * ({e}) + 1u"))
        ),
    }
}

/// The wide mode's entry point (see the module docs and wgsl/reduce.wgsl).
fn wide_main(
    program: &Program,
    w: &Words,
    ro: usize,
    (lanes, split, unit): (usize, bool, u64),
    init: &str,
    epi: Option<Norm>,
) -> String {
    let k = elements(program, unit, epi);
    let u = unroll(k);
    let block = (BLOCK_ELEMENTS / k).max(u);
    let loads: Vec<(usize, DType, u8)> = program
        .defs
        .iter()
        .filter_map(|d| match d {
            Def::Load {
                dtype,
                source: Source::Input(i),
                ..
            } => Some((*dtype, *i)),
            _ => None,
        })
        .enumerate()
        .map(|(li, (d, i))| (li, d, i))
        .collect();
    let is_unit = |li: usize| unit >> li & 1 == 1;
    let first_unit = loads.iter().find(|l| is_unit(l.0)).map_or(0, |l| l.0);
    let extras = w.extras.len();
    // The program's own extra outputs (a normalisation's result is the
    // last value stored, written by its epilogue).
    let own_extras = program.outputs.len() - 1;
    let wg = if lanes == 1 { WG_ONE_LANE } else { WG };
    let mut s = if lanes > 1 {
        PARTIAL_MEMORY.to_string()
    } else {
        String::new()
    };
    s.push_str(&main_head(wg));
    s.push_str("    let parts = p.head.z;\n    let workers = p.head.w;\n");
    if lanes == 1 {
        s.push_str(&format!(
            "    let worker = gid.x + gid.y * nwg.x * {wg}u;\n    if worker >= workers {{\n        return;\n    }}\n    let lane = 0u;\n    let w = worker;\n"
        ));
    } else {
        // Lane groups never leave early: every thread runs the tree's
        // barriers. A group past the last worker redoes the last one and
        // stores nothing.
        s.push_str(&format!(
            "    let worker = (wid.x + wid.y * nwg.x) * {}u + lid.x / {lanes}u;\n    let lane = lid.x % {lanes}u;\n    let w = min(worker, workers - 1u);\n",
            wg / lanes
        ));
    }
    s.push_str("    let o = w / parts;\n    let k = w - o * parts;\n");
    s.push_str(&row_bases(w, ro, "o"));
    // The row's chunks: chunk c holds the row's elements c * K - phase ..
    // c * K - phase + K - 1 (those inside the row); the first and last
    // may be partial, the others are whole and split among the parts.
    s.push_str(&format!(
        "    let phase = b{first_unit} % {k}u;\n\
         \x20   let nc = select(0u, (phase + big_r + {km1}u) / {k}u, big_r > 0u);\n\
         \x20   let head = phase != 0u && nc > 0u;\n\
         \x20   let tail = (phase + big_r) % {k}u != 0u && nc > 0u;\n\
         \x20   let lo = select(0u, 1u, head);\n\
         \x20   let hi = max(lo, nc - select(0u, 1u, tail));\n\
         \x20   let per = (hi - lo + parts - 1u) / parts;\n\
         \x20   let c0 = min(lo + k * per, hi);\n\
         \x20   let c1 = min(c0 + per, hi);\n",
        km1 = k - 1
    ));
    // Each unit load's first vec4 (the row's chunk 0), each splat load's
    // bits, each extra output's first vec4.
    for &(li, d, i) in &loads {
        if is_unit(li) {
            s.push_str(&format!(
                "    let vb{li} = (b{li} - phase) / {}u;\n",
                16 / width(d)
            ));
        } else {
            s.push_str(&format!(
                "    let s{li} = {};\n",
                vec4_element_bits(d, &format!("in{i}"), &format!("b{li}"))
            ));
        }
    }
    for j in 0..extras {
        s.push_str(&format!("    let vbe{j} = (be{j} - phase) / 4u;\n"));
    }
    // A normalisation's statistics read the row's value alone: its weight
    // and bias are loaded by the walk that writes.
    let needed = |li: usize, writes: bool| epi.is_none() || writes || li == 0;
    // The value's arguments at one element: each load's bits (`bits` for a
    // unit load), `0u` for a load the walk does not need.
    let value_args = |bits: &dyn Fn(usize, DType, u8) -> String, writes: bool| -> String {
        loads
            .iter()
            .map(|&(li, d, i)| {
                if !needed(li, writes) {
                    "0u".to_string()
                } else if is_unit(li) {
                    bits(li, d, i)
                } else {
                    format!("s{li}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    // One whole chunk at `cc` (tag `t` names its loads): with `fold`,
    // folded into accumulator slots a0..a3 (`fold(x)` of each value `x`,
    // the program's extra outputs stored); else each element's `write(x,
    // weight, bias)` stored as the last extra output.
    let chunk = |cc: &str, t: usize, fold: Option<Fold<'_>>, write: Option<Out<'_>>| -> String {
        let writes = write.is_some();
        let mut c = format!("        {{\n            let cc = {cc};\n");
        for &(li, d, i) in &loads {
            if !is_unit(li) || !needed(li, writes) {
                continue;
            }
            let vecs = k * width(d) / 16;
            for m in 0..vecs {
                c.push_str(&format!(
                    "            let x{t}_{li}_{m} = in{i}[vb{li} + cc * {vecs}u + {m}u];\n"
                ));
            }
        }
        for q in 0..k {
            let args = value_args(&|li, d, _| chunk_bits(d, &format!("{t}_{li}"), q), writes);
            c.push_str(&format!("            let v{q} = value({args});\n"));
            if let Some(f) = fold {
                c.push_str(&format!(
                    "            a{} = fold(a{}, {}, cc * {k}u + {q}u - phase);\n",
                    (t * k + q) % 4,
                    (t * k + q) % 4,
                    f(&format!("v{q}.v"))
                ));
            }
            if let Some(y) = write {
                c.push_str(&format!(
                    "            let y{q} = bitcast<u32>({});\n",
                    y(&format!("v{q}.v"), &format!("v{q}.a"), &format!("v{q}.b"))
                ));
            }
        }
        let stored: Vec<(usize, String)> = match write {
            Some(_) => vec![(extras - 1, "y".to_string())],
            None => (0..own_extras).map(|j| (j, format!("v.e{j}"))).collect(),
        };
        for (j, name) in stored {
            for m in 0..k / 4 {
                let words: Vec<String> = (0..4)
                    .map(|c| match name.strip_prefix("v.") {
                        Some(field) => format!("v{}.{field}", 4 * m + c),
                        None => format!("{name}{}", 4 * m + c),
                    })
                    .collect();
                c.push_str(&format!(
                    "            e{j}[vbe{j} + cc * {}u + {m}u] = vec4<u32>({});\n",
                    k / 4,
                    words.join(", ")
                ));
            }
        }
        c.push_str("        }\n");
        c
    };
    // The partial chunks, element by element: the head by the first part,
    // the tail by the last, each by its lane 0; `body` of the value `v` at
    // row index `r`.
    let ends = |body: &str, writes: bool| -> String {
        let args = value_args(
            &|li, d, i| vec4_element_bits(d, &format!("in{i}"), &format!("b{li} + r")),
            writes,
        );
        format!(
            "    for (var t = 0u; t < 2u; t++) {{\n\
             \x20       let cm = select(0u, nc - 1u, t == 1u);\n\
             \x20       let take = lane == 0u && select(head && k == 0u, tail && cm >= lo && k == parts - 1u, t == 1u);\n\
             \x20       if take {{\n\
             \x20           for (var q = 0u; q < {k}u; q++) {{\n\
             \x20               let r = cm * {k}u + q - phase;\n\
             \x20               if r < big_r {{\n\
             \x20                   let v = value({args});\n\
             {body}\
             \x20               }}\n\
             \x20           }}\n\
             \x20       }}\n\
             \x20   }}\n"
        )
    };
    // A walk folding `f(x)` of this lane's values into `acc`: chunks
    // c0 + lane, c0 + lane + lanes, ..., in blocks of `block` per lane,
    // each folded into four accumulators, then the partial chunks.
    let walk = |acc: &str, f: Fold<'_>| -> String {
        let mut s = format!(
            "    var {acc} = {init};\n\
             \x20   {{\n\
             \x20   var c = c0 + lane;\n\
             \x20   for (; c < c1; ) {{\n\
             \x20       let stop = min(c + {}u, c1);\n\
             \x20       var a0 = {init};\n\
             \x20       var a1 = {init};\n\
             \x20       var a2 = {init};\n\
             \x20       var a3 = {init};\n",
            block * lanes
        );
        s.push_str(&format!(
            "        for (; c + {}u < stop; c += {}u) {{\n",
            (u - 1) * lanes,
            u * lanes
        ));
        for t in 0..u {
            s.push_str(&chunk(&format!("c + {}u", t * lanes), t, Some(f), None));
        }
        s.push_str(&format!(
            "        }}\n        for (; c < stop; c += {lanes}u) {{\n"
        ));
        s.push_str(&chunk("c", 0, Some(f), None));
        s.push_str(&format!(
            "        }}\n        {acc} = combine({acc}, combine(combine(a0, a1), combine(a2, a3)));\n    }}\n    }}\n"
        ));
        let mut body = format!(
            "                    {acc} = fold({acc}, {}, r);\n",
            f("v.v")
        );
        for j in 0..own_extras {
            body.push_str(&format!(
                "                    e{j}[(be{j} + r) >> 2u][(be{j} + r) & 3u] = v.e{j};\n"
            ));
        }
        s.push_str(&ends(&body, false));
        s
    };
    s.push_str(&walk("acc", &|x| x.to_string()));
    let Some(norm) = epi else {
        let store = if split {
            "store_partial(worker, acc)"
        } else {
            "finish(o, acc)"
        };
        if lanes == 1 {
            s.push_str(&format!("    {store};\n"));
        } else {
            s.push_str(&tree("acc", "lane", lanes));
            s.push_str(&format!(
                "    if lane == 0u && worker < workers {{\n        {};\n    }}\n",
                store.replace("acc", "partial[lid.x]")
            ));
        }
        s.push_str("}\n");
        return s;
    };
    // The epilogue: every lane of the row reads its accumulator, walks the
    // row again and writes its chunks (a group past the last row writes
    // nothing).
    let jy = extras - 1;
    s.push_str(&epilogue(
        norm,
        &|acc, tot| {
            if lanes == 1 {
                format!("    let {tot} = {acc};\n")
            } else {
                format!(
                    "{}    let {tot} = partial[lid.x - lane];\n    workgroupBarrier();\n",
                    tree(acc, "lane", lanes)
                )
            }
        },
        &walk,
        &|y| {
            let mut s = format!(
                "    if worker < workers {{\n\
                 \x20   var c = c0 + lane;\n\
                 \x20   for (; c + {}u < c1; c += {}u) {{\n",
                (u - 1) * lanes,
                u * lanes
            );
            for t in 0..u {
                s.push_str(&chunk(&format!("c + {}u", t * lanes), t, None, Some(y)));
            }
            s.push_str(&format!("    }}\n    for (; c < c1; c += {lanes}u) {{\n"));
            s.push_str(&chunk("c", 0, None, Some(y)));
            s.push_str("    }\n");
            s.push_str(&ends(
                &format!(
                    "                    e{jy}[(be{jy} + r) >> 2u][(be{jy} + r) & 3u] = bitcast<u32>({});\n",
                    y("v.v", "v.a", "v.b")
                ),
                true,
            ));
            s.push_str("    }\n");
            s
        },
    ));
    s.push_str("}\n");
    s
}

/// The combine pass of a split wide mode: one thread per output folds its
/// parts' accumulators in order and finishes.
fn combine_spec(op: ReduceOp, ct: &'static str, outs: usize) -> (Spec, &'static Kernel) {
    let [acc, init, lift, comb, fin] = op.parts(ct);
    let mut bindings = "@group(0) @binding(1) var<storage, read> part: array<u32>;\n".to_string();
    for k in 0..outs {
        bindings.push_str(&format!(
            "@group(0) @binding({}) var<storage, read_write> out{k}: array<u32>;\n",
            2 + k
        ));
    }
    let main = format!(
        "{}\
         \x20   let o = gid.x + gid.y * nwg.x * {WG}u;\n\
         \x20   if o >= n_out {{\n        return;\n    }}\n\
         \x20   let parts = p.head.z;\n\
         \x20   var acc = {init};\n\
         \x20   for (var k = 0u; k < parts; k++) {{\n\
         \x20       acc = combine(acc, load_partial(o * parts + k));\n\
         \x20   }}\n\
         \x20   finish(o, acc);\n\
         }}\n",
        main_head(WG)
    );
    let kernel = if ct == "f64" { &REDUCE_F64 } else { &REDUCE };
    let (mut spec, kernel) = fill(
        kernel,
        op,
        ct,
        [&acc, &init, &lift, &comb],
        &[
            ("PARAMS", "    w: array<vec4<u32>, 1>,"),
            ("BINDINGS", &bindings),
            (
                "FINISH",
                &format!("fn finish(o: u32, acc: Acc) {{\n{fin}\n}}\n"),
            ),
            ("PARTIAL", &partial_functions(&acc, false)),
            ("VALUE", ""),
            ("MAIN", &main),
        ],
        (1, outs as u32),
    );
    spec.params = (REDUCE_WORDS + 4).next_multiple_of(PARAMS_WORDS) as u32;
    (spec, kernel)
}

/// The dispatches of `plan` over `bound` (inputs: the program's loads; outputs: the
/// reduction's, then the extra outputs), with `scratch` (at least
/// [`Plan::scratch_words`] words) when it needs one.
///
/// # Errors
/// [`Error::TooLarge`] for sizes, strides or offsets past `u32`, or past
/// the dispatch limits; [`Error::Kernel`] if the WGSL fails to compile;
/// [`Error::Internal`] without the scratch buffer a split plan needs.
pub(crate) fn dispatch(
    cx: &Context,
    plan: Plan,
    bound: &Bound<'_>,
    ddof: u32,
    scratch: Option<&wgpu::Buffer>,
) -> Result<Vec<Dispatch>> {
    let Plan {
        op,
        program,
        mode,
        outer,
        inner,
        strides,
        n_out,
        r,
        parts,
        epi,
    } = plan;
    let (ro, ri) = (outer.len(), inner.len());
    let extras = written(&program, epi).len();
    let outs = bound.outputs.len() - extras;
    let ct = op.compute_type(program.defs[program.outputs[0] as usize].dtype());
    let w = words(&program, (ro, ri), epi);
    let workers = n_out * parts;
    let mut p = Params::with_words("reduce", REDUCE_WORDS + w.total);
    p.put(0, [n_out as i64, r as i64, parts as i64, workers as i64])?;
    p.put(4, [0, ddof as i64])?;
    p.put_bits(6, [epi.map_or(0, |e| e.eps_bits)]);
    let base = REDUCE_WORDS;
    p.put(base, outer.iter().chain(&inner).map(|&d| d as i64))?;
    for (li, &lw) in w.layout.loads.iter().enumerate() {
        p.put(base + lw, [bound.loads[li].offset as i64])?;
        p.put(base + lw + 1, strides[li].iter().map(|&s| s as i64))?;
    }
    for (&cw, &c) in w.layout.consts.iter().zip(&bound.consts) {
        p.put_bits(base + cw, [c as u32]);
    }
    for (j, &ew) in w.extras.iter().enumerate() {
        let s = &strides[bound.loads.len() + j];
        p.put(base + ew + 1, s.iter().map(|&s| s as i64))?;
    }
    if matches!(mode, Mode::Wide { .. }) {
        cx.wide_dispatches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let split = matches!(mode, Mode::Wide { split: true, .. });
    let scratch = match (split, scratch) {
        (true, Some(b)) => Some(b),
        (true, None) => {
            return Err(Error::Internal(
                "a split reduction without its scratch buffer".into(),
            ));
        }
        (false, _) => None,
    };
    let pipeline = cx.cache.get_quick(
        QuickKey::Reduce {
            op,
            mode,
            ranks: (ro as u8, ri as u8),
            program: program.clone(),
            epi,
        },
        || spec(op, &program, (ro, ri), mode, outs, epi),
    )?;
    let threads = match mode {
        Mode::Strided { row: true } => n_out as u64 * WG as u64,
        Mode::Strided { row: false } => n_out as u64,
        Mode::Wide { lanes: 1, .. } => workers as u64,
        Mode::Wide { lanes, .. } => (workers as u64).div_ceil(WG as u64 / lanes as u64) * WG as u64,
    };
    let wg = match mode {
        Mode::Wide { lanes: 1, .. } => WG_ONE_LANE as u64,
        _ => WG as u64,
    };
    let mut buffers: Vec<wgpu::Buffer> = bound.inputs.iter().map(|&b| b.clone()).collect();
    match scratch {
        Some(s) => buffers.push(s.clone()),
        None => buffers.extend(bound.outputs[..outs].iter().map(|&b| b.clone())),
    }
    buffers.extend(bound.outputs[outs..].iter().map(|&b| b.clone()));
    let mut dispatches = vec![Dispatch {
        windows: Vec::new(),
        pipeline,
        params: p.words(),
        buffers,
        workgroups: grid_of(cx, threads, wg)?,
    }];
    if let Some(s) = scratch {
        let pipeline = cx.cache.get_quick(QuickKey::ReduceCombine { op, ct }, || {
            combine_spec(op, ct, outs)
        })?;
        let mut q = Params::with_words("reduce", REDUCE_WORDS + 4);
        q.put(0, [n_out as i64, r as i64, parts as i64, workers as i64])?;
        q.put(4, [0, ddof as i64])?;
        let mut buffers = vec![s.clone()];
        buffers.extend(bound.outputs[..outs].iter().map(|&b| b.clone()));
        dispatches.push(Dispatch {
            windows: Vec::new(),
            pipeline,
            params: q.words(),
            buffers,
            workgroups: cx.grid(n_out as u64)?,
        });
    }
    Ok(dispatches)
}

/// Workgroups for `threads` threads in workgroups of `wg` (the grid folds
/// into two dimensions as [`Context::grid`] does for 256).
fn grid_of(cx: &Context, threads: u64, wg: u64) -> Result<[u32; 3]> {
    // Context::grid counts threads in workgroups of 256.
    cx.grid(threads.div_ceil(wg) * WG as u64)
}

/// Representative specialisations, for the portability test: every op on
/// every dtype it takes, plain, in the strided modes and the wide ones
/// (one lane and split, a lane group), each op's combine pass; and fused
/// prologues: a product of two loads summed, a scaled difference squared
/// and averaged (f16 in, a constant), the absolute value's maximum, a
/// residual add's moments with the sum written beside them, a row-splat
/// load (`sum((x - m)^2)`).
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    use crate::graph::primitive::{BinaryOp, ElementwiseOp, UnaryOp};
    let load = |dtype, i| Def::Load {
        dtype,
        source: Source::Input(i),
        dense: false,
        gather: None,
    };
    let program = |defs: Vec<Def>, inputs: u8, vec4: bool| Program {
        outputs: vec![(defs.len() - 1) as u16],
        defs,
        inputs,
        rank: 0,
        vec4,
    };
    let modes = [
        Mode::Strided { row: false },
        Mode::Strided { row: true },
        Mode::Wide {
            lanes: 1,
            split: true,
            unit: 1,
        },
        Mode::Wide {
            lanes: 32,
            split: false,
            unit: 1,
        },
    ];
    let mut out = Vec::new();
    for op in ReduceOp::ALL {
        let outs = op.out_dtypes(DType::F32).len();
        for d in DType::ALL {
            if !op.takes(d) {
                continue;
            }
            for mode in [modes[0], modes[2]] {
                let wide = matches!(mode, Mode::Wide { .. });
                let p = program(vec![load(d, 0)], 1, wide);
                out.push(spec(op, &p, (1, 1), mode, op.out_dtypes(d).len(), None));
            }
            out.push(combine_spec(op, op.compute_type(d), op.out_dtypes(d).len()));
        }
        for mode in [modes[1], modes[3]] {
            let wide = matches!(mode, Mode::Wide { .. });
            let p = program(vec![load(DType::F32, 0)], 1, wide);
            out.push(spec(op, &p, (2, 1), mode, outs, None));
        }
    }
    let bin = |op, a, b| Def::Op {
        op: ElementwiseOp::Binary(op),
        args: smallvec::smallvec![a, b],
        dtype: DType::F32,
    };
    // An f32 result of `op` on def 0.
    let of_first = |op| Def::Op {
        op,
        args: smallvec::smallvec![0],
        dtype: DType::F32,
    };
    let dot_defs = vec![
        load(DType::F32, 0),
        load(DType::F32, 1),
        bin(BinaryOp::Mul, 0, 1),
    ];
    let centred_defs = vec![
        load(DType::F16, 0),
        of_first(ElementwiseOp::Cast),
        Def::Const { dtype: DType::F32 },
        bin(BinaryOp::Sub, 1, 2),
        bin(BinaryOp::Mul, 3, 3),
    ];
    let abs_defs = vec![
        load(DType::F32, 0),
        of_first(ElementwiseOp::Unary(UnaryOp::Abs)),
    ];
    // x and a per-row mean m (constant along the row): sum((x - m)^2).
    let splat_defs = vec![
        load(DType::F32, 0),
        load(DType::F32, 1),
        bin(BinaryOp::Sub, 0, 1),
        bin(BinaryOp::Mul, 2, 2),
    ];
    let dot = |wide| program(dot_defs.clone(), 2, wide);
    let centred = |wide| program(centred_defs.clone(), 1, wide);
    let abs = |wide| program(abs_defs.clone(), 1, wide);
    let splat = |wide| program(splat_defs.clone(), 2, wide);
    for mode in modes {
        let wide = matches!(mode, Mode::Wide { .. });
        let unit_all = |m: Mode, bits: u64| match m {
            Mode::Wide { lanes, split, .. } => Mode::Wide {
                lanes,
                split,
                unit: bits,
            },
            m => m,
        };
        out.push(spec(
            ReduceOp::Sum,
            &dot(wide),
            (1, 1),
            unit_all(mode, 3),
            1,
            None,
        ));
        out.push(spec(ReduceOp::Mean, &centred(wide), (2, 1), mode, 1, None));
        out.push(spec(ReduceOp::Max, &abs(wide), (0, 1), mode, 1, None));
        out.push(spec(
            ReduceOp::Moments,
            &dot(wide),
            (1, 1),
            unit_all(mode, 3),
            2,
            None,
        ));
        out.push(spec(ReduceOp::Sum, &splat(wide), (1, 1), mode, 1, None));
        // The sum written beside its moments (a layer norm's residual add).
        let mut held = dot(wide);
        held.outputs.push(2);
        out.push(spec(
            ReduceOp::Moments,
            &held,
            (1, 1),
            unit_all(mode, 3),
            2,
            None,
        ));
        if !wide {
            out.push(spec(ReduceOp::Max, &abs(false), (0, 2), mode, 1, None));
        }
    }
    // One-pass normalisations: every kind, with a weight and a bias
    // (f16 rows for layer_norm), in each mode they take.
    let one_pass = [
        modes[0],
        modes[1],
        Mode::Wide {
            lanes: 1,
            split: false,
            unit: 7,
        },
        Mode::Wide {
            lanes: 32,
            split: false,
            unit: 7,
        },
    ];
    for kind in [
        NormKind::Softmax,
        NormKind::LogSoftmax,
        NormKind::LayerNorm,
        NormKind::RmsNorm,
    ] {
        let x = if kind == NormKind::LayerNorm {
            DType::F16
        } else {
            DType::F32
        };
        let norm = Norm {
            kind,
            weight: true,
            bias: true,
            eps_bits: 0,
        };
        for mode in one_pass {
            let wide = matches!(mode, Mode::Wide { .. });
            let mut p = program(
                vec![load(x, 0), load(DType::F32, 1), load(DType::F32, 2)],
                3,
                wide,
            );
            p.outputs = vec![0];
            out.push(spec(kind.stats_op(), &p, (1, 1), mode, 0, Some(norm)));
        }
    }
    out
}
