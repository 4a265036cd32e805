//! Matmul kernels. For now the reference kernel: one thread per output.

use super::{Dispatch, Kernel, MATMUL_NAIVE, PARAMS_WORDS, Spec, grid};
use crate::device::DeviceInner;
use crate::{Error, Result};

/// A matmul operand: `[batch.., rows, cols]` read through element strides.
pub(crate) struct MatOperand<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: usize,
    pub row_stride: isize,
    pub col_stride: isize,
    /// Strides of the (up to four, already broadcast) batch dimensions.
    pub batch_strides: [isize; 4],
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
        m as i64,
        n as i64,
        k as i64,
        total as i64,
        a.offset as i64,
        a.row_stride as i64,
        a.col_stride as i64,
        b.offset as i64,
        b.row_stride as i64,
        b.col_stride as i64,
        0,
        0,
    ];
    let mut p = [0u32; PARAMS_WORDS];
    let all = words
        .into_iter()
        .chain(batch_shape.iter().map(|&x| x as i64))
        .chain(a.batch_strides.iter().map(|&x| x as i64))
        .chain(b.batch_strides.iter().map(|&x| x as i64));
    for (slot, x) in p.iter_mut().zip(all) {
        // Negative strides wrap to two's complement on purpose.
        if !(i32::MIN as i64..=u32::MAX as i64).contains(&x) {
            return Err(Error::TooLarge {
                op: "matmul",
                bytes: x.unsigned_abs(),
                max: u32::MAX as u64,
            });
        }
        *slot = x as u32;
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
