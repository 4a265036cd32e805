//! Lowering of concatenate: every input, read through its own strides,
//! written at its place along the joined axis.

use super::{Lowering, NodeIo};
use crate::Result;
use crate::array::Storage;
use crate::kernels::concat::{self as kernel, Part};

pub(super) fn concatenate(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    axis: usize,
) -> Result<Vec<Option<Storage>>> {
    let o = io.output()?;
    let s = lw.alloc(&o.shape, o.dtype)?;
    let mut parts = Vec::with_capacity(io.storages.len());
    let mut start = 0;
    for (i, st) in io.storages.iter().enumerate() {
        let len = io.input(i).shape[axis];
        parts.push(Part {
            src: io.operand(i, st.strides.clone()),
            start,
            len,
        });
        start += len;
    }
    let d = kernel::concat(lw.cx(), &o.shape, axis, &parts, s.buffer.buffer())?;
    lw.push(d);
    Ok(vec![Some(s)])
}
