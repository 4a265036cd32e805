//! Lowering of scatters: a zeroed dense output, then one atomic add or
//! store per update (two dispatches).

use super::{Lowering, NodeIo};
use crate::Result;
use crate::array::Storage;
use crate::kernels::scatter as kernel;

/// Input 1 (updates) added (`add`) or stored into a zeroed output of the
/// node's shape at input 0's indices along `axis`; both inputs are read
/// through their strides (broadcast views included).
pub(super) fn scatter(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    axis: usize,
    add: bool,
) -> Result<Vec<Option<Storage>>> {
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
