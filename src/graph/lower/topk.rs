//! Lowering of top-k: one dispatch writes values and indices.

use super::{Lowering, NodeIo};
use crate::array::Storage;
use crate::kernels::topk as kernel;
use crate::shape::contiguous_strides;
use crate::{DType, Result};

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
    let outer: Vec<usize> = (0..x.shape.len()).filter(|&d| d != axis).collect();
    let mut dense: Vec<usize> = outer.iter().map(|&d| x.shape[d]).collect();
    dense.push(k);
    let cs = contiguous_strides(&dense);
    let strides: Vec<isize> = (0..x.shape.len())
        .map(|d| match outer.iter().position(|&e| e == d) {
            Some(i) => cs[i],
            None => cs[outer.len()],
        })
        .collect();
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
