//! Lowering of top-k: one dispatch writes values and indices.

use super::{Lowered, Lowering, NodeIo};
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

/// The two outputs of a kernel that writes `n` values and their u32
/// indices per row along `axis` (top-k, sort): dense `[rows.., n]` buffers,
/// seen by the outputs with that axis back in place.
pub(super) struct RowOutputs {
    /// The dense layout the kernel writes.
    pub dense: Vec<usize>,
    pub vals: Storage,
    pub idx: Storage,
    strides: Vec<isize>,
}

impl RowOutputs {
    /// Allocate both for input `shape` of `dtype`.
    pub fn new(
        lw: &mut Lowering<'_>,
        shape: &[usize],
        dtype: DType,
        axis: usize,
        n: usize,
    ) -> Result<RowOutputs> {
        let (dense, strides) = axis_last(shape, axis, n);
        let vals = lw.alloc(&dense, dtype)?;
        let idx = lw.alloc(&dense, DType::U32)?;
        Ok(RowOutputs {
            dense,
            vals,
            idx,
            strides,
        })
    }

    /// The buffers the kernel writes: values, then indices.
    pub fn buffers(&self) -> (&wgpu::Buffer, &wgpu::Buffer) {
        (self.vals.buffer.buffer(), self.idx.buffer.buffer())
    }

    /// The node's outputs: values, then indices.
    pub fn outputs(self) -> Vec<Option<Storage>> {
        let strides = self.strides;
        [self.vals, self.idx]
            .into_iter()
            .map(|st| Some(st.view(strides.clone(), 0)))
            .collect()
    }
}

/// The `k` largest elements of input 0 along `axis`. The kernel writes dense
/// `[rows.., k]`; the outputs see that buffer with the k axis back in place.
/// It writes both outputs: a dead one gets a scratch buffer that goes back
/// to the pool when this node is done.
pub(super) fn topk(lw: &mut Lowering<'_>, io: &NodeIo<'_>, axis: usize, k: usize) -> Lowered {
    let x = io.input(0);
    let out = RowOutputs::new(lw, &x.shape, x.dtype, axis, k)?;
    let src = io.operand(0, io.storages[0].strides.clone());
    let (vals, idx) = out.buffers();
    let d = kernel::topk(lw.cx(), &src, &x.shape, axis, k, vals, idx)?;
    lw.push(d);
    Ok(out.outputs())
}
