//! Lowering of sorts: one dispatch for rows of up to 1024 elements, a
//! bitonic network of dispatches for longer ones.

use super::topk::RowOutputs;
use super::{Lowered, Lowering, NodeIo};
use crate::DType;
use crate::kernels::sort as kernel;

/// The stable ascending sort of input 0 along `axis`: values and u32
/// indices. The kernel writes dense `[rows.., len]`; the outputs see that
/// buffer with the sorted axis back in place. It writes both outputs: a
/// dead one gets a scratch buffer, as does the bitonic network's work
/// buffer, and both go back to the pool when this node is done.
pub(super) fn sort(lw: &mut Lowering<'_>, io: &NodeIo<'_>, axis: usize) -> Lowered {
    let x = io.input(0);
    let out = RowOutputs::new(lw, &x.shape, x.dtype, axis, x.shape[axis])?;
    let rows: usize = out.dense[..out.dense.len() - 1].iter().product();
    let pairs = crate::graph::primitive::sort_work_pairs(rows, x.shape[axis]);
    let work = lw.alloc(&[pairs.saturating_mul(2)], DType::U32)?;
    let src = io.operand(0, io.storages[0].strides.clone());
    let (vals, idx) = out.buffers();
    let d = kernel::sort(
        lw.cx(),
        &src,
        &x.shape,
        axis,
        vals,
        idx,
        work.buffer.buffer(),
    )?;
    lw.push(d);
    Ok(out.outputs())
}
