//! Lowering of reductions: one dispatch writes every output over the kept
//! axes.

use super::{Lowering, NodeIo};
use crate::Result;
use crate::array::Storage;
use crate::graph::primitive::ReduceOp;
use crate::kernels::reduce as kernel;

/// `op` over `axes` of input 0. The kernel writes every output: dead ones get
/// a scratch buffer that goes back to the pool when this node is done.
pub(super) fn reduce(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    op: ReduceOp,
    axes: &[usize],
    ddof: u32,
) -> Result<Vec<Option<Storage>>> {
    let x = io.input(0);
    let kept: Vec<usize> = (0..x.shape.len())
        .filter(|a| !axes.contains(a))
        .map(|a| x.shape[a])
        .collect();
    let storages: Vec<Storage> = op
        .out_dtypes(x.dtype)
        .iter()
        .map(|&d| lw.alloc(&kept, d))
        .collect::<Result<_>>()?;
    let bufs: Vec<&wgpu::Buffer> = storages.iter().map(|s| s.buffer.buffer()).collect();
    let src = io.operand(0, io.storages[0].strides.clone());
    let d = kernel::reduce(lw.cx(), op, &src, &x.shape, axes, ddof, &bufs)?;
    lw.push(d);
    Ok(storages.into_iter().map(Some).collect())
}
