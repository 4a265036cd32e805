//! Lowering of the elementwise family: fills, elementwise ops (with
//! donation), split (a dense copy per live part) and take (a gather).

use std::sync::Arc;

use super::{Lowering, NodeIo};
use crate::array::{ArrayInner, Storage};
use crate::graph::Node;
use crate::graph::primitive::{ElementwiseOp, Primitive};
use crate::kernels::elementwise as kernel;
use crate::shape::{broadcast_strides, numel};
use crate::{DType, Result};

/// Donation: an elementwise op may write into an input's buffer when nothing
/// but this node holds that input or its buffer, and the input is dense with
/// the output's shape and dtype width. Must be asked before anything else
/// takes a reference to the inputs' storages.
pub(super) fn donation(node: &Node, outputs: &[Option<Arc<ArrayInner>>]) -> Option<usize> {
    match (&node.primitive, outputs.first()) {
        (Primitive::Elementwise(_), Some(Some(o))) => node.inputs.iter().position(|i| {
            Arc::strong_count(&i.inner) == 1 && i.inner.is_sole_dense(&o.shape, o.dtype)
        }),
        _ => None,
    }
}

/// Every 32-bit word of the output is `word`.
pub(super) fn full(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    word: u32,
) -> Result<Vec<Option<Storage>>> {
    let o = io.output()?;
    let s = lw.alloc(&o.shape, o.dtype)?;
    let words = (numel(&o.shape) * o.dtype.size_in_bytes()).div_ceil(4);
    lw.push(kernel::fill(lw.cx(), words, word, s.buffer.buffer())?);
    Ok(vec![Some(s)])
}

/// An elementwise op over inputs broadcast to the output's shape. Every
/// output is written: dead ones (a dropped divmod half) get a scratch
/// buffer. A donated input's buffer becomes output 0.
pub(super) fn elementwise(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    op: ElementwiseOp,
    donated: Option<usize>,
) -> Result<Vec<Option<Storage>>> {
    let o = io.output()?;
    let operands: Vec<_> = (0..io.storages.len())
        .map(|i| {
            let strides = broadcast_strides(&io.input(i).shape, &io.storages[i].strides, &o.shape);
            io.operand(i, strides)
        })
        .collect();
    let mut storages = Vec::with_capacity(op.outputs());
    for i in 0..op.outputs() {
        storages.push(match donated {
            Some(k) if i == 0 => io.storages[k].dense_alias(),
            _ => lw.alloc(&o.shape, o.dtype)?,
        });
    }
    let bufs: Vec<&wgpu::Buffer> = storages.iter().map(|s| s.buffer.buffer()).collect();
    let d = kernel::elementwise(
        lw.cx(),
        op,
        &o.shape,
        &operands,
        o.dtype,
        &bufs,
        donated,
        [0, 0],
    )?;
    lw.push(d);
    Ok(storages.into_iter().map(Some).collect())
}

/// A dense copy of `src` (an array of `shape` and `dtype`).
pub(super) fn copy(
    lw: &mut Lowering<'_>,
    src: &Storage,
    shape: &[usize],
    dtype: DType,
) -> Result<Storage> {
    let dense = lw.alloc(shape, dtype)?;
    let d = kernel::elementwise(
        lw.cx(),
        ElementwiseOp::Copy,
        shape,
        &[super::operand(src, dtype)],
        dtype,
        &[dense.buffer.buffer()],
        None,
        [0, 0],
    )?;
    lw.push(d);
    Ok(dense)
}

/// Split along `axis`: each live output is a dense copy of its part; dead
/// outputs are skipped, since nobody can read them.
pub(super) fn split(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    axis: usize,
    starts: &[usize],
) -> Result<Vec<Option<Storage>>> {
    let src = &io.storages[0];
    let dtype = io.input(0).dtype;
    let mut results = Vec::with_capacity(starts.len());
    for (o, &start) in io.outputs.iter().zip(starts) {
        results.push(match o {
            Some(o) => {
                let offset = src.offset as isize + start as isize * src.strides[axis];
                let part = src.view(src.strides.clone(), offset as usize);
                Some(copy(lw, &part, &o.shape, dtype)?)
            }
            None => None,
        });
    }
    Ok(results)
}

/// NumPy `take` along `axis`. Over the output's axes `[pre.., index..,
/// post..]`, `x` moves along pre and post and the indices along their own
/// axes; the gather adds `index * x_stride[axis]`.
pub(super) fn take(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    axis: usize,
) -> Result<Vec<Option<Storage>>> {
    let o = io.output()?;
    let (x, idx) = (io.input(0), io.input(1));
    let (xs, is) = (&io.storages[0], &io.storages[1]);
    let k = idx.shape.len();
    let mut x_strides = xs.strides[..axis].to_vec();
    x_strides.extend(std::iter::repeat_n(0, k));
    x_strides.extend_from_slice(&xs.strides[axis + 1..]);
    let mut i_strides = vec![0; axis];
    i_strides.extend_from_slice(&is.strides);
    i_strides.extend(std::iter::repeat_n(0, x.shape.len() - axis - 1));
    let s = lw.alloc(&o.shape, o.dtype)?;
    let d = kernel::elementwise(
        lw.cx(),
        ElementwiseOp::Gather,
        &o.shape,
        &[io.operand(0, x_strides), io.operand(1, i_strides)],
        o.dtype,
        &[s.buffer.buffer()],
        None,
        [xs.strides[axis] as i64, x.shape[axis] as i64],
    )?;
    lw.push(d);
    Ok(vec![Some(s)])
}
