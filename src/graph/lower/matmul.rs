//! Lowering of matmul and addmm: each operand's strides broadcast to the
//! output's batch dimensions, then the GEMM, alone or with a fused
//! elementwise epilogue (`kernels::gemm::common::epilogue`).

use rustc_hash::FxHashSet as HashSet;
use std::sync::Arc;

use super::{Lowered, Lowering, NodeIo};
use crate::array::{ArrayInner, State, Storage};
use crate::graph::Node;
use crate::graph::primitive::{MAX_MATMUL_BATCH_DIMS, Primitive};
use crate::kernels::Operand;
use crate::kernels::gemm::common::epilogue::{self, Epilogue};
use crate::kernels::gemm::common::operand::Gemm;
use crate::kernels::gemm::plan as kernel;
use crate::kernels::program::Bound;
use crate::shape::broadcast_strides;
use crate::{Error, Result};

/// `alpha * (a @ b) + beta * c` over `[batch.., m, n]`; `c` (input 2, for
/// addmm) already has the output's rank and broadcasts to it.
pub(super) fn matmul(lw: &mut Lowering<'_>, io: &NodeIo<'_>, alpha: f32, beta: f32) -> Lowered {
    let o = io.output()?;
    let s = lw.alloc(&o.shape, o.dtype)?;
    let mut g = gemm(io, o, alpha, beta, s.buffer.buffer());
    let d = kernel::gemm(lw.cx(), &mut g)?;
    lw.push(d);
    Ok(vec![Some(s)])
}

/// The GEMM of `io` (a matmul node whose output is `o`) into `out`.
pub(super) fn gemm<'a>(
    io: &'a NodeIo<'_>,
    o: &ArrayInner,
    alpha: f32,
    beta: f32,
    out: &'a wgpu::Buffer,
) -> Gemm<'a> {
    let nd = o.shape.len();
    let (m, n) = (o.shape[nd - 2], o.shape[nd - 1]);
    let k = io.input(0).shape[io.input(0).shape.len() - 1];
    let batch = &o.shape[..nd - 2];
    let bias = (io.storages.len() > 2).then(|| {
        // The bias broadcasts to the whole output, its matrix axes too.
        let st = broadcast_strides(&io.input(2).shape, &io.storages[2].strides, &o.shape);
        let mut strides = vec![0isize; MAX_MATMUL_BATCH_DIMS + 2];
        strides[MAX_MATMUL_BATCH_DIMS - batch.len()..].copy_from_slice(&st);
        io.operand(2, strides)
    });
    Gemm {
        dtype: o.dtype,
        batch_shape: batch_shape(batch),
        m,
        n,
        k,
        a: batched(io, 0, batch),
        b: batched(io, 1, batch),
        bias,
        alpha,
        beta,
        out,
        epilogue: None,
        quant: None,
    }
}

/// The output's batch dimensions `batch` as the GEMM's four (leading 1s).
pub(super) fn batch_shape(batch: &[usize]) -> [usize; MAX_MATMUL_BATCH_DIMS] {
    let mut shape = [1usize; MAX_MATMUL_BATCH_DIMS];
    shape[MAX_MATMUL_BATCH_DIMS - batch.len()..].copy_from_slice(batch);
    shape
}

/// Operand `i` of `io` as `[batch0..batch3, rows, cols]` strides: its own
/// last two axes, its batch axes broadcast to the output's `batch`.
pub(super) fn batched<'a>(io: &'a NodeIo<'_>, i: usize, batch: &[usize]) -> Operand<'a> {
    let x = io.input(i);
    let st = &io.storages[i].strides;
    let r = x.shape.len();
    let mut strides = vec![0isize; MAX_MATMUL_BATCH_DIMS + 2];
    let full = broadcast_strides(&x.shape[..r - 2], &st[..r - 2], batch);
    strides[MAX_MATMUL_BATCH_DIMS - full.len()..MAX_MATMUL_BATCH_DIMS].copy_from_slice(&full);
    strides[MAX_MATMUL_BATCH_DIMS] = st[r - 2];
    strides[MAX_MATMUL_BATCH_DIMS + 1] = st[r - 1];
    io.operand(i, strides)
}

/// A fused group led by the matmul or quantized_matmul `mm` (see
/// `graph::fuse`): one GEMM whose epilogue computes the group's
/// elementwise `members` from the product and writes `outputs` (the
/// product among them if it is held). Returns the outputs' storages, in
/// order.
pub(super) fn with_epilogue(
    lw: &mut Lowering<'_>,
    mm: &Arc<Node>,
    members: &HashSet<*const Node>,
    outputs: &[Arc<ArrayInner>],
) -> Result<Vec<Storage>> {
    let product = mm
        .outputs
        .get()
        .and_then(|o| o.first())
        .and_then(|w| w.upgrade())
        .ok_or_else(|| Error::Internal("a GEMM epilogue without its product".into()))?;
    let storages = mm
        .inputs
        .iter()
        .map(|a| a.inner.storage())
        .collect::<Result<_>>()?;
    let live = [Some(Arc::clone(&product))];
    let io = NodeIo {
        node: mm,
        storages,
        outputs: &live,
    };
    let e = super::program::epilogue(lw, members, &product, outputs)?;
    if !epilogue::supported(&e.program) {
        // The product in memory, then the rest as an elementwise kernel.
        drop(e);
        let s = match mm.primitive {
            Primitive::Matmul { alpha, beta } => matmul(lw, &io, alpha, beta)?,
            Primitive::QuantizedMatmul { mode, transpose } => {
                super::quant::quantized_matmul(lw, &io, mode, transpose)?
            }
            _ => return Err(Error::Internal("a GEMM epilogue without its matmul".into())),
        };
        let s = s.into_iter().next().flatten();
        let s = s.ok_or_else(|| Error::Internal("a matmul without its storage".into()))?;
        drop(product.set_state(State::Ready(s)));
        return super::program::run(lw, members, outputs);
    }
    let out = e.storages[0].buffer.buffer();
    let epi = Epilogue {
        program: e.program,
        bound: Bound {
            shape: product.shape.clone(),
            loads: e.loads,
            consts: e.consts,
            inputs: e.buffers.iter().map(|b| b.buffer()).collect(),
            outputs: e.storages.iter().map(|s| s.buffer.buffer()).collect(),
        },
    };
    match mm.primitive {
        Primitive::Matmul { alpha, beta } => {
            let mut g = gemm(&io, &product, alpha, beta, out);
            g.epilogue = Some(epi);
            let d = kernel::gemm(lw.cx(), &mut g)?;
            drop(g);
            lw.push(d);
        }
        Primitive::QuantizedMatmul { mode, transpose } => {
            super::quant::gemm_into(lw, &io, mode, transpose, out, Some(epi))?;
        }
        _ => return Err(Error::Internal("a GEMM epilogue without its matmul".into())),
    }
    Ok(e.storages)
}
