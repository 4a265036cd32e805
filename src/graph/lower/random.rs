//! Lowering of random numbers: Philox blocks under the key input.

use super::{Lowered, Lowering, NodeIo};
use crate::graph::primitive::Distribution;
use crate::kernels::random as kernel;
use crate::shape::numel;

pub(super) fn random(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    dist: Distribution,
    stream: u32,
) -> Lowered {
    let o = io.output()?;
    let s = lw.alloc(&o.shape, o.dtype)?;
    let key = io.operand(0, io.storages[0].strides.clone());
    let d = kernel::random(
        lw.cx(),
        dist,
        &key,
        stream,
        numel(&o.shape),
        o.dtype,
        s.buffer.buffer(),
    )?;
    lw.push(d);
    Ok(vec![Some(s)])
}
