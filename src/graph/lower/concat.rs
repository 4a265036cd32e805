//! Lowering of concatenate: every input, read through its own strides,
//! written at its place along the joined axis. A block format joins as
//! bytes, whole blocks at a time (`quant::byte_view`).

use super::{Lowered, Lowering, NodeIo};
use crate::DType;
use crate::kernels::Operand;
use crate::kernels::concat::{self as kernel, Part};

pub(super) fn concatenate(lw: &mut Lowering<'_>, io: &NodeIo<'_>, axis: usize) -> Lowered {
    let o = io.output()?;
    let s = lw.alloc(&o.shape, o.dtype)?;
    let blocks = o.dtype.is_quantized();
    // Block formats: each input's bytes (kept alive for the parts).
    let mut views = Vec::with_capacity(io.storages.len());
    for (i, st) in io.storages.iter().enumerate() {
        let x = io.input(i);
        views.push(if blocks {
            super::quant::byte_view("concatenate", &x.shape, st, x.dtype)?
        } else {
            (x.shape.clone(), st.clone())
        });
    }
    let mut out_shape = o.shape.clone();
    if blocks && let (Some(l), Some((first, _))) = (out_shape.last_mut(), views.first()) {
        // The joined axis is the last one only when every input is whole
        // blocks there; its length in bytes is then the sum.
        *l = if axis + 1 == first.len() {
            views.iter().map(|(sh, _)| sh[axis]).sum()
        } else {
            first[first.len() - 1]
        };
    }
    let mut parts = Vec::with_capacity(views.len());
    let mut start = 0;
    for (shape, st) in &views {
        let len = shape[axis];
        parts.push(Part {
            src: Operand {
                buffer: st.buffer.buffer(),
                dtype: if blocks { DType::U8 } else { o.dtype },
                offset: st.offset,
                strides: st.strides.clone(),
            },
            start,
            len,
        });
        start += len;
    }
    let d = kernel::concat(lw.cx(), &out_shape, axis, &parts, s.buffer.buffer())?;
    lw.push(d);
    Ok(vec![Some(s)])
}
