//! Lowering of top-k: one dispatch writes values and indices.

use super::{Lowering, NodeIo};
use crate::array::Storage;
use crate::kernels::topk as kernel;
use crate::shape::contiguous_strides;
use crate::{DType, Result};

/// The dense layout `[rows.., n]` of a kernel that writes `n` elements per
/// row along `axis` of `shape` last, and the strides through which an
/// output of `shape` (with `n` along `axis`) sees it.
pub(super) fn axis_last(shape: &[usize], axis: usize, n: usize) -> (Vec<usize>, Vec<isize>) {
    let outer: Vec<usize> = (0..shape.len()).filter(|&d| d != axis).collect();
    let mut dense: Vec<usize> = outer.iter().map(|&d| shape[d]).collect();
    dense.push(n);
    let cs = contiguous_strides(&dense);
    let strides = (0..shape.len())
        .map(|d| match outer.iter().position(|&e| e == d) {
            Some(i) => cs[i],
            None => cs[outer.len()],
        })
        .collect();
    (dense, strides)
}

/// The `k` largest elements of input 0 along `axis`. The kernel writes dense
/// `[rows.., k]`; the outputs see that buffer with the k axis back in place.
/// It writes both outputs: a dead one gets a scratch buffer that goes back
/// to the pool when this node is done.
pub(super) fn topk(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    axis: usize,
    k: usize,
) -> Result<Vec<Option<Storage>>> {
    let x = io.input(0);
    let (dense, strides) = axis_last(&x.shape, axis, k);
    let vals = lw.alloc(&dense, x.dtype)?;
    let idx = lw.alloc(&dense, DType::U32)?;
    let src = io.operand(0, io.storages[0].strides.clone());
    let d = kernel::topk(
        lw.cx(),
        &src,
        &x.shape,
        axis,
        k,
        vals.buffer.buffer(),
        idx.buffer.buffer(),
    )?;
    lw.push(d);
    Ok([vals, idx]
        .into_iter()
        .map(|st| Some(st.view(strides.clone(), 0)))
        .collect())
}
