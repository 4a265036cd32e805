//! Matmul kernels. For now the reference kernel: one thread per output.

use super::{Dispatch, Kernel, MATMUL_NAIVE, PARAMS_WORDS, Spec, grid};
use crate::device::DeviceInner;
use crate::{Error, Result};

/// A matmul operand: `[batch.., rows, cols]` read through element strides.
pub(crate) struct MatOperand<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: usize,
    pub row_stride: usize,
    pub col_stride: usize,
    /// Strides of the (up to four, already broadcast) batch dimensions.
    pub batch_strides: [usize; 4],
}

/// Batch dimensions the kernel takes.
pub(crate) const MAX_BATCH_DIMS: usize = 4;

/// `c[batch, m, n] = a[batch, m, k] @ b[batch, k, n]`, f32, into dense `c`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_naive(
    dev: &DeviceInner,
    batch_shape: [usize; 4],
    m: usize,
    n: usize,
    k: usize,
    a: &MatOperand<'_>,
    b: &MatOperand<'_>,
    c: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let total = batch_shape.iter().product::<usize>() * m * n;
    if total == 0 {
        return Ok(None);
    }
    let words = [
        m,
        n,
        k,
        total,
        a.offset,
        a.row_stride,
        a.col_stride,
        b.offset,
        b.row_stride,
        b.col_stride,
        0,
        0,
    ];
    let mut p = [0u32; PARAMS_WORDS];
    let all = words
        .iter()
        .chain(&batch_shape)
        .chain(&a.batch_strides)
        .chain(&b.batch_strides);
    for (slot, &x) in p.iter_mut().zip(all) {
        *slot = u32::try_from(x).map_err(|_| Error::TooLarge {
            op: "matmul",
            bytes: x as u64,
            max: u32::MAX as u64,
        })?;
    }
    let (spec, kernel) = naive_spec();
    Ok(Some(Dispatch {
        pipeline: dev.kernels.get(kernel, &spec)?,
        params: p,
        buffers: vec![a.buffer.clone(), b.buffer.clone(), c.clone()],
        workgroups: grid(
            total as u64,
            dev.limits.max_compute_workgroups_per_dimension,
        )?,
    }))
}

fn naive_spec() -> (Spec, &'static Kernel) {
    MATMUL_NAIVE.spec(&[])
}

#[cfg(test)]
/// Every specialisation the matmul dispatch functions can ask for.
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    vec![naive_spec()]
}
