//! A reduction's fused elementwise prologue: the elementwise [`Program`]
//! that computes a reduction's input (`sum(x * y)`, `mean((x - m)^2)`,
//! `max(abs(x))`, the residual add before a layer norm's moments: whatever
//! group of elementwise ops reads nothing but what the reduction reads,
//! planned by `graph::fuse`) evaluated inside the reduction's loads
//! (`element` in `wgsl/reduce.wgsl`), so that the input is never written.
//!
//! The program is the elementwise generator's (`kernels::program`): the
//! same op functions, loads, constants and rounding (every value rounded to
//! its dtype, so the result is the unfused path's bit for bit). Its
//! iteration space is the reduction's input shape, split into the kept axes
//! (the output element `o`) and the reduced axes (`r`), each merged where
//! every load walks them alike (`program::coalesce`); every load has an
//! offset and strides over both. Its parameter words follow the
//! reduction's own ([`REDUCE_WORDS`]) as `p.w`: the kept sizes, the reduced
//! sizes, then the program's loads and constants as the elementwise kernel
//! lays them out.

use super::elementwise::compute_type;
use super::elementwise::encode;
use super::program::{Bound, Def, Layout, Program, coalesce, pw, unravel};
use super::reduce::{MAX_REDUCED, row_mode};
use super::{Context, Dispatch, Kernel, PARAMS_WORDS, Params, QuickKey, REDUCE_PROLOGUE, Spec};
use crate::graph::primitive::ReduceOp;
use crate::{DType, Error, Result};

/// Words of the reduction's own parameter block (`Params` in
/// `wgsl/reduce.wgsl` up to `w`); a prologue's words follow.
pub(crate) const REDUCE_WORDS: usize = 40;

/// Whether `program` can run as a reduction's prologue: its first output
/// is the reduced value, the others (values written as extra outputs) are
/// 4-byte values; no f64 value (the reduction kernel's f64 variant has no
/// op helpers) and no gather.
pub(crate) fn supported(program: &Program) -> bool {
    !program.outputs.is_empty()
        && program.outputs[1..]
            .iter()
            .all(|&v| program.defs[v as usize].dtype().size_in_bytes() == 4)
        && program.defs.iter().all(|d| {
            d.dtype() != DType::F64
                && !matches!(
                    d,
                    Def::Load {
                        gather: Some(_),
                        ..
                    }
                )
        })
}

/// The specialisation of `op` over `program`'s first output, with `ranks`
/// kept and reduced dimensions (after merging), one or a workgroup of
/// threads per output (`row`), and `outs` outputs of the reduction; the
/// program's other outputs are stored at each element (bindings `e{j}`
/// after the reduction's, addresses at [`extra_words`]).
pub(crate) fn spec(
    op: ReduceOp,
    program: &Program,
    ranks: (usize, usize),
    row: bool,
    outs: usize,
) -> (Spec, &'static Kernel) {
    let (ro, ri) = ranks;
    let v = program.outputs[0];
    let dtype = program.defs[v as usize].dtype();
    let ct = op.compute_type(dtype);
    let [acc, init, lift, comb, fin] = op.parts(ct);
    let layout = program.layout(ro + ri, &[ro, ri]);
    let extras = program.outputs.len() - 1;
    let mut names: Vec<(String, &str)> = (0..outs).map(|k| (format!("out{k}"), "u32")).collect();
    names.extend((0..extras).map(|j| (format!("e{j}"), "u32")));
    let mut bindings = program.storage_bindings(1, &names);
    bindings.push_str(&program.functions());
    // Element (o, r): o unravelled over the kept sizes (words 0..ro), r over
    // the reduced ones (ro..ro + ri); load li at its offset plus both.
    let mut element = unravel("o", "i", 0, ro.max(1));
    element.push_str(&unravel("r", "j", ro, ri.max(1)));
    let address = |_li: usize, w: usize| {
        let mut a = pw(w);
        for d in 0..ro {
            a.push_str(&format!(" + i{d} * {}", pw(w + 1 + d)));
        }
        for d in 0..ri {
            a.push_str(&format!(" + j{d} * {}", pw(w + 1 + ro + d)));
        }
        a
    };
    element.push_str(&program.statements(&layout, &address));
    // Values someone holds (or other kernels read): each element written
    // once, by the thread that reduces it.
    for (j, &x) in program.outputs[1..].iter().enumerate() {
        let w = extra_words(&layout, ranks, j);
        let d = program.defs[x as usize].dtype();
        element.push_str(&format!(
            "    e{j}[{}] = {};\n",
            address(0, w),
            encode(d, &format!("v{x}"), compute_type(d))
        ));
    }
    let value = if compute_type(dtype) == ct {
        format!("v{v}")
    } else {
        format!("{ct}(v{v})")
    };
    element.push_str(&format!("    return {value};"));
    let params = format!(
        "    w: array<vec4<u32>, {}>,",
        words(&layout, ranks, extras) / 4
    );
    let (mut spec, kernel) = REDUCE_PROLOGUE.spec_with_bindings(
        &[
            ("ROW", if row { "true" } else { "false" }),
            ("BINDINGS", &bindings),
            ("ACC", &acc),
            ("INIT", &init),
            ("LIFT", &lift),
            ("COMBINE", &comb),
            ("FINAL", &fin),
            ("CT", ct),
            ("LOAD", &format!("    return {ct}(i);")),
            ("ELEMENT", &element),
            ("PROLOGUE_PARAMS", &params),
        ],
        program.inputs as u32,
        (outs + extras) as u32,
    );
    spec.params =
        (REDUCE_WORDS + words(&layout, ranks, extras)).next_multiple_of(PARAMS_WORDS) as u32;
    (spec, kernel)
}

/// The word (in `p.w`) of extra output `j`'s offset; its strides over the
/// kept and the reduced dimensions follow.
fn extra_words(layout: &Layout, (ro, ri): (usize, usize), j: usize) -> usize {
    layout.words + j * (1 + ro + ri)
}

/// Words of `p.w`, a multiple of four.
fn words(layout: &Layout, ranks: (usize, usize), extras: usize) -> usize {
    extra_words(layout, ranks, extras).next_multiple_of(4)
}

/// Encode `op` over the reduced `axes` (sorted, distinct) of the value
/// `program` computes over `bound.shape`, into the dense outputs `outs`
/// (one per output dtype, over the kept axes in order).
///
/// # Errors
/// [`Error::TooLarge`] for more than [`MAX_REDUCED`] elements per output
/// or sizes, strides or offsets past `u32`; [`Error::InvalidArgument`] for
/// more than 8 kept or reduced dimensions after merging.
pub(crate) fn reduce(
    cx: &Context,
    op: ReduceOp,
    mut program: Program,
    bound: &Bound<'_>,
    axes: &[usize],
    ddof: u32,
) -> Result<Option<Dispatch>> {
    let shape = &bound.shape;
    let extras = program.outputs.len() - 1;
    // Extra outputs are dense over the shape: addressed like loads.
    let dense = crate::shape::contiguous_strides(shape);
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
    let (inner, inner_strides) = split(false);
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
        return Err(Error::TooLarge {
            op: "reduce",
            limit: crate::Limit::ReducedElements,
            value: r as u64,
            max: MAX_REDUCED as u64,
        });
    }
    let (ro, ri) = (outer.len(), inner.len());
    program.rank = 0;
    for d in program.defs.iter_mut() {
        if let Def::Load { dense, .. } = d {
            *dense = false;
        }
    }
    let layout = program.layout(ro + ri, &[ro, ri]);
    let mut p = Params::with_words("reduce", REDUCE_WORDS + words(&layout, (ro, ri), extras));
    // The reduction's own block: its outer and inner offsets are 0 (head.z
    // = 0 kept and one reduced dimension of stride 0); the prologue's loads
    // carry the strides.
    p.put(0, [n_out as i64, r as i64, 0, 1])?;
    p.put(4, [0, ddof as i64])?;
    p.put(24, [1])?;
    let w = REDUCE_WORDS;
    p.put(w, outer.iter().chain(&inner).map(|&d| d as i64))?;
    let mut li = 0;
    for d in &program.defs {
        if let Def::Load { .. } = d {
            let lw = w + layout.loads[li];
            p.put(lw, [bound.loads[li].offset as i64])?;
            let strides = outer_strides[li].iter().chain(&inner_strides[li]);
            p.put(lw + 1, strides.map(|&s| s as i64))?;
            li += 1;
        }
    }
    for (&cw, &c) in layout.consts.iter().zip(&bound.consts) {
        p.put_bits(w + cw, [c as u32]);
    }
    for j in 0..extras {
        let ew = w + extra_words(&layout, (ro, ri), j);
        let li = bound.loads.len() + j;
        let strides = outer_strides[li].iter().chain(&inner_strides[li]);
        p.put(ew + 1, strides.map(|&s| s as i64))?;
    }
    let row = row_mode(r, n_out, cx.software);
    let outs = bound.outputs.len() - extras;
    let pipeline = cx.cache.get_quick(
        QuickKey::ReducePrologue {
            op,
            row,
            ranks: (ro as u8, ri as u8),
            program: program.clone(),
        },
        || spec(op, &program, (ro, ri), row, outs),
    )?;
    let threads = if row {
        n_out as u64 * super::WORKGROUP as u64
    } else {
        n_out as u64
    };
    let mut buffers: Vec<wgpu::Buffer> = bound.inputs.iter().map(|&b| b.clone()).collect();
    buffers.extend(bound.outputs.iter().map(|&b| b.clone()));
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline,
        params: p.words(),
        buffers,
        workgroups: cx.grid(threads)?,
    }))
}

/// Representative specialisations, for the portability test: a product of
/// two strided loads summed, a scaled difference squared and averaged (f16
/// in, a constant), the absolute value's maximum and a residual add's
/// moments (two outputs), each in both modes.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    use super::program::Source;
    use crate::graph::primitive::{BinaryOp, ElementwiseOp, UnaryOp};
    let load = |dtype, i| Def::Load {
        dtype,
        source: Source::Input(i),
        dense: false,
        gather: None,
    };
    let bin = |op, a, b| Def::Op {
        op: ElementwiseOp::Binary(op),
        args: smallvec::smallvec![a, b],
        dtype: DType::F32,
    };
    let program = |defs: Vec<Def>, inputs: u8| Program {
        outputs: vec![(defs.len() - 1) as u16],
        defs,
        inputs,
        rank: 0,
        vec4: false,
    };
    let dot = program(
        vec![
            load(DType::F32, 0),
            load(DType::F32, 1),
            bin(BinaryOp::Mul, 0, 1),
        ],
        2,
    );
    let centred = program(
        vec![
            load(DType::F16, 0),
            Def::Op {
                op: ElementwiseOp::Cast,
                args: smallvec::smallvec![0],
                dtype: DType::F32,
            },
            Def::Const { dtype: DType::F32 },
            bin(BinaryOp::Sub, 1, 2),
            bin(BinaryOp::Mul, 3, 3),
        ],
        1,
    );
    let abs = program(
        vec![
            load(DType::F32, 0),
            Def::Op {
                op: ElementwiseOp::Unary(UnaryOp::Abs),
                args: smallvec::smallvec![0],
                dtype: DType::F32,
            },
        ],
        1,
    );
    let mut out = Vec::new();
    for row in [false, true] {
        out.push(spec(ReduceOp::Sum, &dot, (1, 1), row, 1));
        out.push(spec(ReduceOp::Mean, &centred, (2, 1), row, 1));
        out.push(spec(ReduceOp::Max, &abs, (0, 2), row, 1));
        out.push(spec(ReduceOp::Moments, &dot, (1, 1), row, 2));
        // The sum written beside its moments (a layer norm's residual add).
        let mut held = dot.clone();
        held.outputs.push(2);
        out.push(spec(ReduceOp::Moments, &held, (1, 1), row, 2));
    }
    out
}
