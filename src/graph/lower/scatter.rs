//! Lowering of scatters: a zeroed dense output, then one atomic add or
//! store per update (two dispatches); and of slice updates, which store
//! each update into the source's buffer when nobody else holds it
//! (donation, one dispatch) or into a copy of it (two).

use std::sync::Arc;

use super::{Lowered, Lowering, NodeIo};
use crate::array::ArrayInner;
use crate::graph::Node;
use crate::kernels::{Operand, scatter as kernel};

/// Input 1 (updates) added (`add`) or stored into a zeroed output of the
/// node's shape at input 0's indices along `axis`; both inputs are read
/// through their strides (broadcast views included).
pub(super) fn scatter(lw: &mut Lowering<'_>, io: &NodeIo<'_>, axis: usize, add: bool) -> Lowered {
    let o = io.output()?;
    let (shape, dtype) = (o.shape.clone(), o.dtype);
    let out = lw.alloc(&shape, dtype)?;
    let indices = io.operand(0, io.storages[0].strides.clone());
    let updates = io.operand(1, io.storages[1].strides.clone());
    let d = kernel::scatter(
        lw.cx(),
        add,
        &indices,
        &updates,
        &io.input(1).shape,
        axis,
        out.buffer.buffer(),
        &shape,
    )?;
    lw.push(d);
    Ok(vec![Some(out)])
}

/// MLX `slice_update`: input 1 (the update, of input 0's dtype and the
/// slice's shape) stored over the slice of input 0 at `starts` with
/// `steps`.
///
/// Donation: when the node is the source's only holder (no user handle, no
/// other node, no tape) and the source owns its whole buffer densely (no
/// view or other array shares it), the result takes that buffer and only
/// the slice is written: nobody can observe the old values any more. This
/// is asked before the source's storage is cloned here. Every earlier
/// reader of the buffer in this eval was encoded before this dispatch on
/// the same queue, so the write is ordered after it. Otherwise the result
/// is a dense copy of the source, then the write.
///
/// With `dynamic: Some(axis)`, input 2 holds the start on `axis`, read by
/// the kernel (the scatter kernel's index, every update element reading the
/// one start; clamped to the starts that keep the slice inside).
pub(super) fn slice_update(
    lw: &mut Lowering<'_>,
    node: &Arc<Node>,
    outputs: &[Option<Arc<ArrayInner>>],
    starts: &[usize],
    steps: &[isize],
    dynamic: Option<usize>,
) -> Lowered {
    let (src, update) = (&node.inputs[0].inner, &node.inputs[1].inner);
    let donate = Arc::strong_count(src) == 1 && src.is_sole_dense(&src.shape, src.dtype);
    if outputs.iter().all(Option::is_none) {
        return Ok(outputs.iter().map(|_| None).collect());
    }
    let (src_storage, upd_storage) = (src.storage()?, update.storage()?);
    let base = match donate {
        true => src_storage.dense_alias(),
        false => super::program::copy(lw, &src_storage, &src.shape, src.dtype)?,
    };
    drop(src_storage);
    let offset: isize = starts
        .iter()
        .zip(&base.strides)
        .map(|(&s, &st)| s as isize * st)
        .sum();
    let strides: Vec<isize> = base
        .strides
        .iter()
        .zip(steps)
        .map(|(&a, &b)| a * b)
        .collect();
    let updates = Operand {
        buffer: upd_storage.buffer.buffer(),
        dtype: update.dtype,
        offset: upd_storage.offset,
        strides: upd_storage.strides.clone(),
    };
    let d = match dynamic {
        None => kernel::slice_write(
            lw.cx(),
            &updates,
            &update.shape,
            base.buffer.buffer(),
            offset as usize,
            &strides,
        )?,
        Some(axis) => {
            let start = &node.inputs[2].inner;
            let start_storage = start.storage()?;
            let index = Operand {
                buffer: start_storage.buffer.buffer(),
                dtype: start.dtype,
                offset: start_storage.offset,
                strides: vec![0; update.shape.len()],
            };
            kernel::dynamic_slice_write(
                lw.cx(),
                &index,
                &updates,
                &update.shape,
                base.buffer.buffer(),
                offset as usize,
                &strides,
                axis,
                src.shape[axis] - update.shape[axis] + 1,
            )?
        }
    };
    lw.push(d);
    Ok(vec![Some(base)])
}
