//! Lowering of scans: one to three dispatches into a dense output.

use super::{Lowered, Lowering, NodeIo};
use crate::DType;
use crate::graph::primitive::ReduceOp;
use crate::kernels::scan as kernel;

/// A scan with `op` of input 0 along `axis` (see [`kernel::scan`]); the
/// block totals take a scratch buffer that goes back to the pool when the
/// node is done.
pub(super) fn scan(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    op: ReduceOp,
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> Lowered {
    let x = io.input(0);
    let o = io.output()?;
    let out = lw.alloc(&x.shape, o.dtype)?;
    let rows = x.shape.iter().product::<usize>() / x.shape[axis].max(1);
    let totals = lw.alloc(&[kernel::totals_words(rows, x.shape[axis])], DType::U32)?;
    let src = io.operand(0, io.storages[0].strides.clone());
    let d = kernel::scan(
        lw.cx(),
        op,
        &src,
        &x.shape,
        axis,
        reverse,
        inclusive,
        out.buffer.buffer(),
        o.dtype,
        totals.buffer.buffer(),
    )?;
    lw.push(d);
    Ok(vec![Some(out)])
}
