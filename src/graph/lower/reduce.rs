//! Lowering of reductions: one dispatch (two for rows cut into parts)
//! writes every output over the kept axes, reading the input from memory
//! (the program that loads it) or computing it in a fused elementwise
//! prologue (`kernels::reduce`); and of the one-pass normalisations, the
//! same kernel with an epilogue that writes each normalised row.

use rustc_hash::FxHashSet as HashSet;
use std::sync::Arc;

use super::{Lowered, Lowering, NodeIo};
use crate::array::{ArrayInner, State, Storage};
use crate::graph::Node;
use crate::graph::primitive::{Norm, Primitive, ReduceOp};
use crate::kernels::program::{Bound, Def, LoadData, Program, Source};
use crate::kernels::reduce as kernel;
use crate::{DType, Error, Result};

/// `op` over `axes` of input 0. The kernel writes every output: dead ones get
/// a scratch buffer that goes back to the pool when this node is done.
pub(super) fn reduce(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    op: ReduceOp,
    axes: &[usize],
    ddof: u32,
) -> Lowered {
    let x = io.input(0);
    let storages = alloc_outputs(lw, x, op, axes)?;
    let s = &io.storages[0];
    // The program that loads the input as it is.
    let program = Program {
        defs: vec![Def::Load {
            dtype: x.dtype,
            source: Source::Input(0),
            dense: false,
            gather: None,
        }],
        outputs: vec![0],
        inputs: 1,
        rank: 0,
        vec4: false,
    };
    let bound = Bound {
        shape: x.shape.clone(),
        loads: vec![LoadData {
            offset: s.offset,
            strides: s.strides.clone(),
            gather: None,
        }],
        consts: Vec::new(),
        inputs: vec![s.buffer.buffer()],
        outputs: storages.iter().map(|s| s.buffer.buffer()).collect(),
    };
    run(lw, op, program, &bound, axes, ddof)?;
    drop(bound);
    Ok(storages.into_iter().map(Some).collect())
}

/// A normalisation over the last axis in one dispatch: the reduction
/// kernel's program loads the row (and the weight and bias, f32, read
/// through the row's strides: 0 along the kept axes), folds its
/// statistics, and its epilogue writes the normalised row (f32, dense) as
/// the one value the kernel stores at each element.
pub(super) fn normalize(lw: &mut Lowering<'_>, io: &NodeIo<'_>, norm: Norm) -> Lowered {
    let x = io.input(0);
    let y = lw.alloc(&x.shape, DType::F32)?;
    let n = io.storages.len();
    let defs = (0..n)
        .map(|i| Def::Load {
            dtype: io.input(i).dtype,
            source: Source::Input(i as u8),
            dense: false,
            gather: None,
        })
        .collect();
    let program = Program {
        defs,
        outputs: vec![0],
        inputs: n as u8,
        rank: 0,
        vec4: false,
    };
    let loads = io
        .storages
        .iter()
        .enumerate()
        .map(|(i, s)| LoadData {
            offset: s.offset,
            strides: if i == 0 {
                s.strides.clone()
            } else {
                crate::shape::broadcast_strides(&io.input(i).shape, &s.strides, &x.shape)
            },
            gather: None,
        })
        .collect();
    let bound = Bound {
        shape: x.shape.clone(),
        loads,
        consts: Vec::new(),
        inputs: io.storages.iter().map(|s| s.buffer.buffer()).collect(),
        outputs: vec![y.buffer.buffer()],
    };
    let axes = [x.shape.len() - 1];
    let plan = kernel::plan_rows(lw.cx(), norm, program, &bound, &axes)?;
    if let Some(plan) = plan {
        let d = kernel::dispatch(lw.cx(), plan, &bound, 0, None)?;
        lw.push(d);
    }
    drop(bound);
    Ok(vec![Some(y)])
}

/// Plan `op` over `program` and `bound`, take the scratch buffer a cut
/// row needs from the pool (it goes back when this node is done: the
/// dispatches that use it come first in the queue), and push the
/// dispatches.
fn run(
    lw: &mut Lowering<'_>,
    op: ReduceOp,
    program: Program,
    bound: &Bound<'_>,
    axes: &[usize],
    ddof: u32,
) -> Result<()> {
    let Some(plan) = kernel::plan(lw.cx(), op, program, bound, axes)? else {
        return Ok(());
    };
    let scratch = plan
        .scratch_words()
        .map(|n| lw.alloc(&[n], DType::U32))
        .transpose()?;
    let d = kernel::dispatch(
        lw.cx(),
        plan,
        bound,
        ddof,
        scratch.as_ref().map(|s| s.buffer.buffer()),
    )?;
    lw.push(d);
    Ok(())
}

/// One dense storage per output of `op` over `axes` of `x` (the kept axes).
fn alloc_outputs(
    lw: &Lowering<'_>,
    x: &ArrayInner,
    op: ReduceOp,
    axes: &[usize],
) -> Result<Vec<Storage>> {
    let kept: Vec<usize> = (0..x.shape.len())
        .filter(|a| !axes.contains(a))
        .map(|a| x.shape[a])
        .collect();
    op.out_dtypes(x.dtype)
        .iter()
        .map(|&d| lw.alloc(&kept, d))
        .collect()
}

/// A fused group led by the reduction `red` (see `graph::fuse`): one
/// reduction whose loads compute its input from the group's elementwise
/// `members`; `outputs` are the reduction's live outputs and values of the
/// input's shape the kernel writes beside them (held by the user or read by
/// later kernels). Returns their storages, in order. A prologue the kernel
/// cannot run (an f64 value, a gather, a packed extra output) is run as
/// an elementwise kernel first, then reduced as usual.
pub(super) fn with_prologue(
    lw: &mut Lowering<'_>,
    red: &Arc<Node>,
    members: &HashSet<*const Node>,
    outputs: &[Arc<ArrayInner>],
) -> Result<Vec<Storage>> {
    let Primitive::Reduce { op, axes, ddof } = &red.primitive else {
        return Err(Error::Internal("a prologue without its reduction".into()));
    };
    let input = &red.inputs[0].inner;
    let slots = red.outputs.get().map(|o| o.as_slice()).unwrap_or_default();
    let own = |o: &Arc<ArrayInner>| {
        slots
            .iter()
            .position(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(o)))
    };
    let extras: Vec<Arc<ArrayInner>> = outputs
        .iter()
        .filter(|o| own(o).is_none())
        .cloned()
        .collect();
    let e = super::program::prologue(members, input, &extras)?;
    let (mut all, mut written): (Vec<Option<Storage>>, Vec<Option<Storage>>) =
        if kernel::supported(&e.program) {
            let storages = alloc_outputs(lw, input, *op, axes)?;
            let written = extras
                .iter()
                .map(|x| lw.alloc_for(&x.shape, x.dtype, x.origin.or(lw.origin)))
                .collect::<Result<Vec<_>>>()?;
            let bound = Bound {
                shape: input.shape.clone(),
                loads: e.loads,
                consts: e.consts,
                inputs: e.buffers.iter().map(|b| b.buffer()).collect(),
                outputs: storages
                    .iter()
                    .chain(&written)
                    .map(|s| s.buffer.buffer())
                    .collect(),
            };
            run(lw, *op, e.program, &bound, axes, *ddof)?;
            drop(bound);
            (
                storages.into_iter().map(Some).collect(),
                written.into_iter().map(Some).collect(),
            )
        } else {
            drop(e);
            fallback(lw, red, members, input, &extras)?
        };
    outputs
        .iter()
        .map(|o| {
            let s = match own(o) {
                Some(k) => all.get_mut(k).and_then(Option::take),
                None => extras
                    .iter()
                    .position(|x| Arc::ptr_eq(x, o))
                    .and_then(|j| written[j].take()),
            };
            s.ok_or_else(|| Error::Internal("a reduction group's output without storage".into()))
        })
        .collect()
}

/// The unfused way of a group [`with_prologue`] cannot run as one kernel:
/// an elementwise kernel writes the reduction's input and `extras`, then
/// the reduction reads it. Returns the reduction's storages (one per
/// output) and the extras'.
#[allow(clippy::type_complexity)]
fn fallback(
    lw: &mut Lowering<'_>,
    red: &Arc<Node>,
    members: &HashSet<*const Node>,
    input: &Arc<ArrayInner>,
    extras: &[Arc<ArrayInner>],
) -> Result<(Vec<Option<Storage>>, Vec<Option<Storage>>)> {
    let mut values = vec![Arc::clone(input)];
    values.extend(extras.iter().filter(|x| !Arc::ptr_eq(x, input)).cloned());
    let mut storages = super::program::run(lw, members, &values)?.into_iter();
    let s = storages
        .next()
        .ok_or_else(|| Error::Internal("a prologue without its storage".into()))?;
    drop(input.set_state(State::Ready(s)));
    let mut written = Vec::with_capacity(extras.len());
    for x in extras {
        written.push(if Arc::ptr_eq(x, input) {
            Some(input.storage()?)
        } else {
            storages.next()
        });
    }
    let live: Vec<Option<Arc<ArrayInner>>> = red
        .outputs
        .get()
        .map(|o| o.iter().map(|w| w.upgrade()).collect())
        .unwrap_or_default();
    Ok((super::lower(lw, red, &live)?, written))
}
