//! Reference points that benchmarks compare wgarray with: the same work done
//! the plain way. Not part of the array API, and not optimised on purpose.

use crate::graph::primitive::MAX_MATMUL_BATCH_DIMS;
use crate::kernels::{self, Operand};
use crate::ops::matmul::K_CHUNK;
use crate::{Array, DType, Error, Result};

/// `a @ b` for 2-D f32 arrays `[m, k]` and `[k, n]` on the reference kernel
/// (`wgsl/matmul_naive.wgsl`: one thread per output, a plain loop over `k`,
/// no tiling), evaluated at once in a submission of its own. The benchmarks'
/// "naive kernel" column and a test of the GEMM use it; strided inputs are
/// read through their strides. K longer than 32768 runs as one dispatch per
/// chunk of K, each adding to the output (Mesa's llvmpipe stops an
/// invocation after 65535 loop iterations).
///
/// # Errors
/// In this order: [`Error::DeviceMismatch`]; [`Error::InvalidArgument`]
/// unless both are 2-D; [`Error::ShapeMismatch`] when the inner dimensions
/// differ; [`Error::DType`] unless both are f32; the errors of
/// [`crate::eval`].
#[track_caller]
pub fn matmul_naive(a: &Array, b: &Array) -> Result<Array> {
    const OP: &str = "baseline::matmul_naive";
    if a.device() != b.device() {
        return Err(Error::device_mismatch(OP, a.device(), b.device()));
    }
    for x in [a, b] {
        if x.ndim() != 2 {
            return Err(Error::InvalidArgument(format!(
                "{OP}: takes 2-D arrays, got shape {:?}",
                x.shape()
            )));
        }
    }
    if a.shape()[1] != b.shape()[0] {
        return Err(Error::ShapeMismatch {
            op: OP,
            lhs: a.shape().to_vec(),
            rhs: b.shape().to_vec(),
        });
    }
    for x in [a, b] {
        if x.dtype() != DType::F32 {
            return Err(Error::DType {
                op: OP,
                dtype: x.dtype(),
                other: None,
            });
        }
    }
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    crate::eval(&[a, b])?;
    let device = a.device();
    let out = Array::empty(&[m, n], DType::F32, device)?;
    let (sa, sb, so) = (a.inner.storage()?, b.inner.storage()?, out.inner.storage()?);
    fn operand(s: &crate::array::Storage) -> Operand<'_> {
        let mut strides = vec![0; MAX_MATMUL_BATCH_DIMS];
        strides.extend_from_slice(&s.strides);
        Operand {
            buffer: s.buffer.buffer(),
            dtype: DType::F32,
            offset: s.offset,
            strides,
        }
    }
    let dev = &device.inner;
    let mut dispatches = Vec::new();
    // One chunk at least: with k == 0 it writes the empty sums, zeros.
    for k0 in (0..k.max(1)).step_by(K_CHUNK) {
        dispatches.extend(kernels::gemm::naive::matmul_naive(
            &dev.kernels,
            [1; MAX_MATMUL_BATCH_DIMS],
            m,
            n,
            k0..(k0 + K_CHUNK).min(k),
            k0 > 0,
            &operand(&sa),
            &operand(&sb),
            so.buffer.buffer(),
        )?);
    }
    let guard = dev.pool.lock_queue();
    device.scoped(|| {
        let index = kernels::submit(&dev.device, &dev.queue, &dev.kernels, &guard, &dispatches)?;
        dev.pool.submitted(&guard);
        device.confirm_submitted(index)
    })?;
    Ok(out)
}
