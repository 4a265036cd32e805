//! Lowering of the `ops::fast` primitives (MLX's `mx.fast`): attention
//! for one query row per head (`Primitive::SdpaVector`) and rotary
//! position embedding (`Primitive::Rope`); the inputs read through their
//! strides, one dense output, one dispatch.

use super::{Lowered, Lowering, NodeIo};
use crate::kernels::attention as kernel;

/// Inputs `q` `[b, heads, 1, d]`, `k` and `v` `[b, kv_heads, keys, d]`
/// and, with `length`, the key count (one element).
pub(super) fn sdpa_vector(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    scale: f32,
    length: bool,
) -> Lowered {
    let o = io.output()?;
    let (shape, dtype) = (o.shape.clone(), o.dtype);
    let out = lw.alloc(&shape, dtype)?;
    let q = io.operand(0, io.storages[0].strides.clone());
    let k = io.operand(1, io.storages[1].strides.clone());
    let v = io.operand(2, io.storages[2].strides.clone());
    let len = length.then(|| io.operand(3, vec![0]));
    let ks = &io.input(1).shape;
    let d = kernel::sdpa_vector(
        lw.cx(),
        &q,
        &k,
        &v,
        len.as_ref(),
        [shape[0], shape[1], ks[1], ks[2], shape[3]],
        scale,
        out.buffer.buffer(),
    )?;
    lw.push([d]);
    Ok(vec![Some(out)])
}

/// MLX `fast.rope` of input 0, the offset's run-time part in input 1
/// (`dynamic`).
pub(super) fn rope(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    r: &crate::kernels::rope::Rotation,
    dynamic: bool,
) -> Lowered {
    let o = io.output()?;
    let (shape, dtype) = (o.shape.clone(), o.dtype);
    let out = lw.alloc(&shape, dtype)?;
    let x = io.operand(0, io.storages[0].strides.clone());
    let offset = dynamic.then(|| io.operand(1, vec![0]));
    let d =
        crate::kernels::rope::rope(lw.cx(), &x, offset.as_ref(), &shape, r, out.buffer.buffer())?;
    lw.push(d);
    Ok(vec![Some(out)])
}
