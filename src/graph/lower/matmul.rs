//! Lowering of matmul and addmm: each operand's strides broadcast to the
//! output's batch dimensions, then the GEMM.

use super::{Lowering, NodeIo};
use crate::Result;
use crate::array::Storage;
use crate::graph::primitive::MAX_MATMUL_BATCH_DIMS;
use crate::kernels::matmul::{self as kernel, Gemm};
use crate::shape::broadcast_strides;

/// `alpha * (a @ b) + beta * c` over `[batch.., m, n]`; `c` (input 2, for
/// addmm) already has the output's rank and broadcasts to it.
pub(super) fn matmul(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    alpha: f32,
    beta: f32,
) -> Result<Vec<Option<Storage>>> {
    let o = io.output()?;
    let s = lw.alloc(&o.shape, o.dtype)?;
    let nd = o.shape.len();
    let (m, n) = (o.shape[nd - 2], o.shape[nd - 1]);
    let k = io.input(0).shape[io.input(0).shape.len() - 1];
    let batch = &o.shape[..nd - 2];
    let mut batch_shape = [1usize; MAX_MATMUL_BATCH_DIMS];
    batch_shape[MAX_MATMUL_BATCH_DIMS - batch.len()..].copy_from_slice(batch);
    // Operand `i` as `[batch0..batch3, rows, cols]` strides: its own last
    // two axes, its batch axes broadcast to the output's.
    let operand = |i: usize, target: &[usize]| {
        let x = io.input(i);
        let st = &io.storages[i].strides;
        let r = x.shape.len();
        let mut strides = vec![0isize; MAX_MATMUL_BATCH_DIMS + 2];
        let full = broadcast_strides(&x.shape[..r - 2], &st[..r - 2], target);
        strides[MAX_MATMUL_BATCH_DIMS - full.len()..MAX_MATMUL_BATCH_DIMS].copy_from_slice(&full);
        strides[MAX_MATMUL_BATCH_DIMS] = st[r - 2];
        strides[MAX_MATMUL_BATCH_DIMS + 1] = st[r - 1];
        io.operand(i, strides)
    };
    let bias = (io.storages.len() > 2).then(|| {
        // The bias broadcasts to the whole output, its matrix axes too.
        let st = broadcast_strides(&io.input(2).shape, &io.storages[2].strides, &o.shape);
        let mut strides = vec![0isize; MAX_MATMUL_BATCH_DIMS + 2];
        strides[MAX_MATMUL_BATCH_DIMS - batch.len()..].copy_from_slice(&st);
        io.operand(2, strides)
    });
    let d = kernel::gemm(
        lw.cx(),
        &Gemm {
            dtype: o.dtype,
            batch_shape,
            m,
            n,
            k,
            a: operand(0, batch),
            b: operand(1, batch),
            bias,
            alpha,
            beta,
            out: s.buffer.buffer(),
        },
    )?;
    lw.push(d);
    Ok(vec![Some(s)])
}
