//! Lowering of views: the output shares the input's buffer with other
//! strides and offset; a reshape that strides cannot express, and a
//! `contiguous` of a strided input, copy.

use super::program::copy;
use super::{Lowered, Lowering, NodeIo};
use crate::array::Storage;
use crate::graph::primitive::View;
use crate::shape::{broadcast_strides, contiguous_strides, is_contiguous};

pub(super) fn view(lw: &mut Lowering<'_>, io: &NodeIo<'_>, view: &View) -> Lowered {
    let o = io.output()?;
    let x = io.input(0);
    let src = &io.storages[0];
    let s = match view {
        View::Reshape => match reshape_strides(&x.shape, src, &o.shape) {
            Some(strides) => src.view(strides, src.offset),
            // Not expressible as strides: copy dense, then view.
            None => copy(lw, src, &x.shape, x.dtype)?.view(contiguous_strides(&o.shape), 0),
        },
        View::Contiguous if is_contiguous(&x.shape, &src.strides) => {
            src.view(src.strides.clone(), src.offset)
        }
        View::Contiguous => copy(lw, src, &x.shape, x.dtype)?,
        View::Permute(axes) => src.view(axes.iter().map(|&a| src.strides[a]).collect(), src.offset),
        View::Broadcast => src.view(
            broadcast_strides(&x.shape, &src.strides, &o.shape),
            src.offset,
        ),
        View::Slice { starts, steps } => {
            let offset = src.offset as isize
                + starts
                    .iter()
                    .zip(&src.strides)
                    .map(|(&st, &sd)| st as isize * sd)
                    .sum::<isize>();
            let strides = src.strides.iter().zip(steps).map(|(s, k)| s * k).collect();
            src.view(strides, offset as usize)
        }
    };
    if o.dtype.is_quantized() {
        // A view that splits blocks (a transpose the op could not refuse:
        // `Array::transpose` returns no error) is refused here, naming it.
        super::quant::byte_view(io.node.primitive.name(), &o.shape, &s, o.dtype)?;
    }
    Ok(vec![Some(s)])
}

/// A bit-level view (`Primitive::Bitcast`): the same buffer, strides and
/// offset, read as another dtype of the same size. No kernel.
pub(super) fn bitcast(io: &NodeIo<'_>) -> Lowered {
    let src = &io.storages[0];
    Ok(vec![Some(src.view(src.strides.clone(), src.offset))])
}

/// Strides for `to` that read `src` (of shape `from`) in the same row-major
/// order, if there are any: the input must be dense up to dimensions of
/// length 1, which may be added or removed.
fn reshape_strides(from: &[usize], src: &Storage, to: &[usize]) -> Option<Vec<isize>> {
    if is_contiguous(from, &src.strides) {
        return Some(contiguous_strides(to));
    }
    let kept_from: Vec<usize> = from.iter().copied().filter(|&d| d != 1).collect();
    let kept_to: Vec<usize> = to.iter().copied().filter(|&d| d != 1).collect();
    if kept_from != kept_to {
        return None;
    }
    let mut kept = from
        .iter()
        .zip(&src.strides)
        .filter(|(d, _)| **d != 1)
        .map(|(_, s)| *s);
    Some(
        to.iter()
            .map(|&d| if d == 1 { 0 } else { kept.next().unwrap_or(0) })
            .collect(),
    )
}
