//! Scheduling and evaluation: topological order without recursion, one
//! command buffer and one submit per eval, detach after eval.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Node, Primitive};
use crate::array::{Array, State, Storage};
use crate::kernels::elementwise::{self, Donated, Operand};
use crate::kernels::matmul::{self, MatOperand};
use crate::kernels::{self, CopyOp, Dispatch};
use crate::memory::{BufferKind, QueueGuard};
use crate::shape::{broadcast_strides, contiguous_strides, numel};
use crate::{Device, Error, Result};

/// The unevaluated ancestors of `targets`, inputs before users. Iterative
/// post-order DFS: no recursion, so any depth works.
fn schedule(targets: &[&Array]) -> Vec<Arc<Node>> {
    let mut order = Vec::new();
    let mut seen: HashSet<*const Node> = HashSet::new();
    let mut stack: Vec<(Arc<Node>, bool)> = Vec::new();
    for a in targets {
        if let Some(n) = a.inner.pending_node() {
            stack.push((n, false));
        }
    }
    while let Some((node, expanded)) = stack.pop() {
        if expanded {
            order.push(node);
            continue;
        }
        if !seen.insert(Arc::as_ptr(&node)) {
            continue;
        }
        let deps: Vec<Arc<Node>> = node
            .inputs
            .iter()
            .filter_map(|i| i.inner.pending_node())
            .filter(|n| !seen.contains(&Arc::as_ptr(n)))
            .collect();
        stack.push((node, true));
        stack.extend(deps.into_iter().map(|n| (n, false)));
    }
    order
}

/// Evaluate `arrays`: run every unevaluated ancestor in one submission.
///
/// Nodes run in topological order. Each node's outputs take their buffers
/// from the pool and let go of the node ("detach"), so inputs and
/// intermediates go back to the pool as soon as their last user is encoded.
/// If a node fails (say [`Error::OutOfMemory`]), the nodes before it are
/// still submitted and stay evaluated, the failed node and those after it stay
/// as they were, and the error is returned: free memory and eval again.
///
/// # Errors
/// [`Error::DeviceMismatch`] for arrays of different devices,
/// [`Error::OutOfMemory`], [`Error::Kernel`], [`Error::TooLarge`], and wgpu's
/// errors as [`Error::Validation`], [`Error::Internal`], [`Error::DeviceLost`].
pub fn eval(arrays: &[&Array]) -> Result<()> {
    let Some(first) = arrays.first() else {
        return Ok(());
    };
    let device = first.device().clone();
    if arrays.iter().any(|a| *a.device() != device) {
        return Err(Error::DeviceMismatch);
    }
    let dev = &device.inner;
    let guard = dev.pool.lock_queue();
    let order = schedule(arrays);
    if order.is_empty() {
        return Ok(());
    }
    device.scoped(|| {
        let mut dispatches = Vec::with_capacity(order.len());
        let mut result = Ok(());
        for node in order {
            if let Err(e) = run_node(&device, &guard, &node, &mut dispatches) {
                result = Err(e);
                break;
            }
            // `node` drops here: with its outputs detached, its inputs (and
            // so their buffers) go back unless someone else holds them.
        }
        submit(&device, &guard, &dispatches, &[])?;
        result
    })
}

pub(crate) fn submit(
    device: &Device,
    guard: &QueueGuard<'_>,
    dispatches: &[Dispatch],
    copies: &[CopyOp],
) -> Result<wgpu::SubmissionIndex> {
    let d = &device.inner;
    kernels::submit(
        &d.device,
        &d.queue,
        &d.kernels,
        guard,
        dispatches,
        copies,
        d.limits.min_uniform_buffer_offset_alignment as u64,
    )
}

/// Allocate a dense output buffer for `shape` and `dtype`.
fn alloc(
    device: &Device,
    guard: &QueueGuard<'_>,
    shape: &[usize],
    dtype: crate::DType,
) -> Result<Storage> {
    let bytes = (numel(shape) * dtype.size_in_bytes()) as u64;
    check_binding(device, "eval", bytes)?;
    let buffer = device
        .inner
        .pool
        .acquire(guard, bytes, BufferKind::Storage)?;
    Ok(Storage {
        buffer: Arc::new(buffer),
        strides: contiguous_strides(shape),
        offset: 0,
    })
}

pub(crate) fn check_binding(device: &Device, op: &'static str, bytes: u64) -> Result<()> {
    let max = device.inner.limits.max_storage_buffer_binding_size;
    if bytes > max {
        return Err(Error::TooLarge { op, bytes, max });
    }
    Ok(())
}

/// The output storage of an op that writes in place into `input`'s buffer.
fn dense_alias(input: &Storage) -> Storage {
    Storage {
        buffer: Arc::clone(&input.buffer),
        strides: input.strides.clone(),
        offset: 0,
    }
}

fn operand<'a>(s: &'a Storage, strides: &'a [usize]) -> Operand<'a> {
    Operand {
        buffer: s.buffer.buffer(),
        strides,
        offset: s.offset,
    }
}

/// Encode one node and detach its live outputs.
fn run_node(
    device: &Device,
    guard: &QueueGuard<'_>,
    node: &Node,
    out: &mut Vec<Dispatch>,
) -> Result<()> {
    let dev = &*device.inner;
    let outputs: Vec<Option<Arc<crate::array::ArrayInner>>> = node
        .outputs
        .get()
        .map(|o| o.iter().map(|w| w.upgrade()).collect())
        .unwrap_or_default();
    // Donation: an elementwise op may write into an input's buffer when
    // nothing but this node holds that input or its buffer, and the input is
    // dense with the output's shape and dtype. Decided before `inputs` below
    // takes its own references.
    let donatable: Vec<bool> = match (&node.primitive, outputs.first()) {
        (Primitive::Binary(_), Some(Some(o))) => node
            .inputs
            .iter()
            .map(|i| Arc::strong_count(&i.inner) == 1 && i.inner.is_sole_dense(&o.shape, o.dtype))
            .collect(),
        _ => vec![false; node.inputs.len()],
    };
    let inputs: Vec<Storage> = node
        .inputs
        .iter()
        .map(|a| a.inner.storage())
        .collect::<Result<_>>()?;
    let mut results: Vec<Option<Storage>> = Vec::with_capacity(outputs.len());
    match &node.primitive {
        Primitive::Full { word } => {
            let o = outputs[0]
                .as_ref()
                .expect("a node being run has a live output");
            let s = alloc(device, guard, &o.shape, o.dtype)?;
            let words = (numel(&o.shape) * o.dtype.size_in_bytes()).div_ceil(4);
            out.extend(elementwise::fill(dev, words, *word, s.buffer.buffer())?);
            results.push(Some(s));
        }
        Primitive::Binary(op) => {
            let o = outputs[0]
                .as_ref()
                .expect("a node being run has a live output");
            let (a, b) = (&node.inputs[0].inner, &node.inputs[1].inner);
            let sa = broadcast_strides(&a.shape, &inputs[0].strides, &o.shape);
            let sb = broadcast_strides(&b.shape, &inputs[1].strides, &o.shape);
            let (s, donated) = if donatable[0] {
                (dense_alias(&inputs[0]), Donated::Lhs)
            } else if donatable[1] {
                (dense_alias(&inputs[1]), Donated::Rhs)
            } else {
                (alloc(device, guard, &o.shape, o.dtype)?, Donated::None)
            };
            out.extend(elementwise::binary(
                dev,
                *op,
                a.dtype,
                &o.shape,
                &operand(&inputs[0], &sa),
                &operand(&inputs[1], &sb),
                s.buffer.buffer(),
                donated,
            )?);
            results.push(Some(s));
        }
        Primitive::Matmul { alpha, beta, naive } => {
            let o = outputs[0]
                .as_ref()
                .expect("a node being run has a live output");
            let s = alloc(device, guard, &o.shape, o.dtype)?;
            let (a, b) = (&node.inputs[0].inner, &node.inputs[1].inner);
            let nd = o.shape.len();
            let (m, n) = (o.shape[nd - 2], o.shape[nd - 1]);
            let k = a.shape[a.shape.len() - 1];
            let batch = &o.shape[..nd - 2];
            let mut batch_shape = [1usize; 4];
            batch_shape[4 - batch.len()..].copy_from_slice(batch);
            // Row, column and batch strides of an operand broadcast to
            // `[batch.., rows, cols]` (`rows`/`cols` are its own last two).
            fn mat<'s>(
                arr: &crate::array::ArrayInner,
                st: &'s Storage,
                batch: &[usize],
            ) -> MatOperand<'s> {
                let r = arr.shape.len();
                let full = broadcast_strides(&arr.shape[..r - 2], &st.strides[..r - 2], batch);
                let mut bs = [0usize; 4];
                bs[4 - full.len()..].copy_from_slice(&full);
                MatOperand {
                    buffer: st.buffer.buffer(),
                    offset: st.offset,
                    row_stride: st.strides[r - 2],
                    col_stride: st.strides[r - 1],
                    batch_strides: bs,
                }
            }
            let ma = mat(a, &inputs[0], batch);
            let mb = mat(b, &inputs[1], batch);
            if *naive {
                out.extend(matmul::matmul_naive(
                    dev,
                    batch_shape,
                    m,
                    n,
                    k,
                    &ma,
                    &mb,
                    s.buffer.buffer(),
                )?);
            } else {
                // The bias, already of the output's rank, broadcasts to it.
                let bias = node.inputs.get(2).map(|c| {
                    let st = broadcast_strides(&c.inner.shape, &inputs[2].strides, &o.shape);
                    let mut bs = [0usize; 4];
                    bs[4 - batch.len()..].copy_from_slice(&st[..nd - 2]);
                    MatOperand {
                        buffer: inputs[2].buffer.buffer(),
                        offset: inputs[2].offset,
                        row_stride: st[nd - 2],
                        col_stride: st[nd - 1],
                        batch_strides: bs,
                    }
                });
                out.extend(matmul::gemm(
                    dev,
                    &matmul::Gemm {
                        dtype: o.dtype,
                        batch_shape,
                        m,
                        n,
                        k,
                        a: ma,
                        b: mb,
                        bias,
                        alpha: *alpha,
                        beta: *beta,
                        out: s.buffer.buffer(),
                        tile: None,
                    },
                )?);
            }
            results.push(Some(s));
        }
        Primitive::Reshape => {
            let o = outputs[0]
                .as_ref()
                .expect("a node being run has a live output");
            let src = &inputs[0];
            let x = &node.inputs[0].inner;
            // Strides of the non-unit dimensions carry over in order.
            let mut kept = x
                .shape
                .iter()
                .zip(&src.strides)
                .filter(|(d, _)| **d != 1)
                .map(|(_, s)| *s);
            let strides = o
                .shape
                .iter()
                .map(|&d| if d == 1 { 0 } else { kept.next().unwrap_or(0) })
                .collect();
            results.push(Some(Storage {
                buffer: Arc::clone(&src.buffer),
                strides,
                offset: src.offset,
            }));
        }
        Primitive::Split { axis, starts } => {
            let x = &node.inputs[0].inner;
            let src = &inputs[0];
            // Dead outputs are skipped: nobody can read them.
            for (o, &start) in outputs.iter().zip(starts) {
                let Some(o) = o else {
                    results.push(None);
                    continue;
                };
                let s = alloc(device, guard, &o.shape, o.dtype)?;
                let view = Operand {
                    buffer: src.buffer.buffer(),
                    strides: &src.strides,
                    offset: src.offset + start * src.strides[*axis],
                };
                out.extend(elementwise::copy(
                    dev,
                    x.dtype.size_in_bytes(),
                    &o.shape,
                    &view,
                    s.buffer.buffer(),
                )?);
                results.push(Some(s));
            }
        }
    }
    // Detach: each live output takes its buffer and lets go of the node.
    for (o, s) in outputs.iter().zip(results) {
        if let (Some(o), Some(s)) = (o, s) {
            drop(o.set_state(State::Ready(s)));
        }
    }
    Ok(())
}
