//! Scheduling and evaluation: topological order without recursion, one
//! command buffer and one submit per eval, detach after eval.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Node, Primitive, View};
use crate::array::{Array, State, Storage};
use crate::kernels::elementwise::{self, ElementwiseOp, Operand};
use crate::kernels::matmul::{self, MatOperand};
use crate::kernels::reduce::{self, ReduceInput};
use crate::kernels::{self, CopyOp, Dispatch};
use crate::kernels::{concat, random, topk};
use crate::memory::{BufferKind, QueueGuard};
use crate::shape::{broadcast_strides, contiguous_strides, is_contiguous, numel};
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
    let bytes = numel(shape).saturating_mul(dtype.size_in_bytes()) as u64;
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

/// A view of `src`'s buffer with other strides and offset.
fn view_of(src: &Storage, strides: Vec<isize>, offset: usize) -> Storage {
    Storage {
        buffer: Arc::clone(&src.buffer),
        strides,
        offset,
    }
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
    // dense with the output's shape and dtype width. Decided before `inputs`
    // below takes its own references.
    let donated: Option<usize> = match (&node.primitive, outputs.first()) {
        (Primitive::Elementwise(_), Some(Some(o))) => node.inputs.iter().position(|i| {
            Arc::strong_count(&i.inner) == 1 && i.inner.is_sole_dense(&o.shape, o.dtype)
        }),
        _ => None,
    };
    let inputs: Vec<Storage> = node
        .inputs
        .iter()
        .map(|a| a.inner.storage())
        .collect::<Result<_>>()?;
    // The first live output: every output of one node has its shape and
    // dtype, except split's, which it handles itself.
    let first = || {
        outputs
            .iter()
            .flatten()
            .next()
            .ok_or_else(|| Error::Internal("a node was run without a live output".into()))
    };
    let mut results: Vec<Option<Storage>> = Vec::with_capacity(outputs.len());
    match &node.primitive {
        Primitive::Full { word } => {
            let o = first()?;
            let s = alloc(device, guard, &o.shape, o.dtype)?;
            let words = (numel(&o.shape) * o.dtype.size_in_bytes()).div_ceil(4);
            out.extend(elementwise::fill(dev, words, *word, s.buffer.buffer())?);
            results.push(Some(s));
        }
        Primitive::Elementwise(ElementwiseOp::Cast)
            if node.inputs[0].inner.dtype == first()?.dtype
                && is_contiguous(&node.inputs[0].inner.shape, &inputs[0].strides) =>
        {
            // A same-dtype cast of a dense array (`contiguous()`): share it.
            results.push(Some(view_of(
                &inputs[0],
                inputs[0].strides.clone(),
                inputs[0].offset,
            )));
        }
        Primitive::Elementwise(op) => {
            let o = first()?;
            let strides: Vec<Vec<isize>> = node
                .inputs
                .iter()
                .zip(&inputs)
                .map(|(a, s)| broadcast_strides(&a.inner.shape, &s.strides, &o.shape))
                .collect();
            let operands: Vec<Operand<'_>> = node
                .inputs
                .iter()
                .zip(&inputs)
                .zip(&strides)
                .map(|((a, s), st)| Operand {
                    buffer: s.buffer.buffer(),
                    strides: st,
                    offset: s.offset,
                    dtype: a.inner.dtype,
                })
                .collect();
            // Every output is written: dead ones (a dropped divmod half) get
            // a scratch buffer. A donated input becomes output 0.
            let mut storages = Vec::with_capacity(op.outputs());
            for i in 0..op.outputs() {
                storages.push(match donated {
                    Some(k) if i == 0 => dense_alias(&inputs[k]),
                    _ => alloc(device, guard, &o.shape, o.dtype)?,
                });
            }
            let bufs: Vec<&wgpu::Buffer> = storages.iter().map(|s| s.buffer.buffer()).collect();
            out.extend(elementwise::elementwise_n(
                dev,
                *op,
                &o.shape,
                &operands,
                o.dtype,
                &bufs,
                donated,
                [0, 0],
            )?);
            results.extend(storages.into_iter().map(Some));
        }
        Primitive::Matmul { alpha, beta, naive } => {
            let o = first()?;
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
                let mut bs = [0isize; 4];
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
                    let mut bs = [0isize; 4];
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
        Primitive::View(view) => {
            let o = first()?;
            let x = &node.inputs[0].inner;
            let src = &inputs[0];
            let s = match view {
                View::Reshape => match reshape_strides(&x.shape, src, &o.shape) {
                    Some(strides) => view_of(src, strides, src.offset),
                    None => {
                        // Not expressible as strides: copy dense, then view.
                        let dense = alloc(device, guard, &o.shape, o.dtype)?;
                        out.extend(elementwise::elementwise(
                            dev,
                            ElementwiseOp::Cast,
                            &x.shape,
                            &[Operand {
                                buffer: src.buffer.buffer(),
                                strides: &src.strides,
                                offset: src.offset,
                                dtype: x.dtype,
                            }],
                            x.dtype,
                            dense.buffer.buffer(),
                            None,
                        )?);
                        dense
                    }
                },
                View::Permute(axes) => view_of(
                    src,
                    axes.iter().map(|&a| src.strides[a]).collect(),
                    src.offset,
                ),
                View::Broadcast => view_of(
                    src,
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
                    view_of(src, strides, offset as usize)
                }
            };
            results.push(Some(s));
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
                    offset: (src.offset as isize + start as isize * src.strides[*axis]) as usize,
                    dtype: x.dtype,
                };
                out.extend(elementwise::elementwise(
                    dev,
                    ElementwiseOp::Cast,
                    &o.shape,
                    &[view],
                    x.dtype,
                    s.buffer.buffer(),
                    None,
                )?);
                results.push(Some(s));
            }
        }
        Primitive::Take { axis } => {
            let o = first()?;
            let (x, idx) = (&node.inputs[0].inner, &node.inputs[1].inner);
            let (xs, is) = (&inputs[0], &inputs[1]);
            // Over the output's axes [pre.., index.., post..]: x moves along
            // pre and post, the indices along their own axes.
            let k = idx.shape.len();
            let mut x_strides = xs.strides[..*axis].to_vec();
            x_strides.extend(std::iter::repeat_n(0, k));
            x_strides.extend_from_slice(&xs.strides[axis + 1..]);
            let mut i_strides = vec![0; *axis];
            i_strides.extend_from_slice(&is.strides);
            i_strides.extend(std::iter::repeat_n(0, x.shape.len() - axis - 1));
            let s = alloc(device, guard, &o.shape, o.dtype)?;
            out.extend(elementwise::elementwise_n(
                dev,
                ElementwiseOp::Gather,
                &o.shape,
                &[
                    Operand {
                        buffer: xs.buffer.buffer(),
                        strides: &x_strides,
                        offset: xs.offset,
                        dtype: x.dtype,
                    },
                    Operand {
                        buffer: is.buffer.buffer(),
                        strides: &i_strides,
                        offset: is.offset,
                        dtype: idx.dtype,
                    },
                ],
                o.dtype,
                &[s.buffer.buffer()],
                None,
                [xs.strides[*axis] as i64, x.shape[*axis] as i64],
            )?);
            results.push(Some(s));
        }
        Primitive::Reduce { op, axes, ddof } => {
            let x = &node.inputs[0].inner;
            let src = &inputs[0];
            let (mut outer_shape, mut outer_strides) = (Vec::new(), Vec::new());
            let (mut inner_shape, mut inner_strides) = (Vec::new(), Vec::new());
            for (a, (&d, &st)) in x.shape.iter().zip(&src.strides).enumerate() {
                if axes.contains(&a) {
                    inner_shape.push(d);
                    inner_strides.push(st);
                } else {
                    outer_shape.push(d);
                    outer_strides.push(st);
                }
            }
            // The kernel writes every output: dead ones get a scratch buffer
            // that goes back to the pool when this node is done.
            let dtypes = op.out_dtypes(x.dtype);
            let storages: Vec<Storage> = dtypes
                .iter()
                .map(|&d| alloc(device, guard, &outer_shape, d))
                .collect::<Result<_>>()?;
            let bufs: Vec<&wgpu::Buffer> = storages.iter().map(|s| s.buffer.buffer()).collect();
            out.extend(reduce::reduce(
                dev,
                *op,
                &ReduceInput {
                    buffer: src.buffer.buffer(),
                    dtype: x.dtype,
                    offset: src.offset,
                    outer_shape,
                    outer_strides,
                    inner_shape,
                    inner_strides,
                },
                *ddof,
                &bufs,
            )?);
            results.extend(storages.into_iter().map(Some));
        }
        Primitive::Random { dist, stream } => {
            let o = first()?;
            let key = &inputs[0];
            let s = alloc(device, guard, &o.shape, o.dtype)?;
            out.extend(random::random(
                dev,
                *dist,
                &random::Key {
                    buffer: key.buffer.buffer(),
                    offset: key.offset,
                    stride: key.strides[0],
                },
                *stream,
                numel(&o.shape),
                o.dtype,
                s.buffer.buffer(),
            )?);
            results.push(Some(s));
        }
        Primitive::Concatenate { axis } => {
            let o = first()?;
            let s = alloc(device, guard, &o.shape, o.dtype)?;
            // Axes of length 1 (but the joined one) carry no index: dropping
            // them leaves parameter room for more inputs per dispatch.
            let keep: Vec<usize> = (0..o.shape.len())
                .filter(|&d| d == *axis || o.shape[d] != 1)
                .collect();
            let shape: Vec<usize> = keep.iter().map(|&d| o.shape[d]).collect();
            let ax = keep.iter().position(|d| d == axis).unwrap_or(0);
            let strides: Vec<Vec<isize>> = inputs
                .iter()
                .map(|st| keep.iter().map(|&d| st.strides[d]).collect())
                .collect();
            let mut parts = Vec::with_capacity(inputs.len());
            let mut start = 0;
            for ((a, st), sd) in node.inputs.iter().zip(&inputs).zip(&strides) {
                let len = a.inner.shape[*axis];
                if len > 0 {
                    parts.push(concat::Part {
                        buffer: st.buffer.buffer(),
                        offset: st.offset,
                        strides: sd,
                        start,
                        len,
                    });
                }
                start += len;
            }
            for group in parts.chunks(concat::group_size(shape.len())) {
                out.extend(concat::concat_group(
                    dev,
                    &shape,
                    ax,
                    o.dtype.size_in_bytes(),
                    group,
                    s.buffer.buffer(),
                )?);
            }
            results.push(Some(s));
        }
        Primitive::TopK { axis, k } => {
            let x = &node.inputs[0].inner;
            let src = &inputs[0];
            let outer: Vec<usize> = (0..x.shape.len()).filter(|d| d != axis).collect();
            let outer_shape: Vec<usize> = outer.iter().map(|&d| x.shape[d]).collect();
            let outer_strides: Vec<isize> = outer.iter().map(|&d| src.strides[d]).collect();
            // The kernel writes dense [rows.., k]; the outputs see that
            // buffer with the k axis back in place. It writes both outputs:
            // a dead one gets a scratch buffer that goes back to the pool
            // when this node is done.
            let mut dense = outer_shape.clone();
            dense.push(*k);
            let cs = contiguous_strides(&dense);
            let strides: Vec<isize> = (0..x.shape.len())
                .map(|d| match outer.iter().position(|&e| e == d) {
                    Some(i) => cs[i],
                    None => cs[outer.len()],
                })
                .collect();
            let vals = alloc(device, guard, &dense, x.dtype)?;
            let idx = alloc(device, guard, &dense, crate::DType::U32)?;
            out.extend(topk::topk(
                dev,
                &topk::TopkInput {
                    buffer: src.buffer.buffer(),
                    dtype: x.dtype,
                    offset: src.offset,
                    outer_shape,
                    outer_strides,
                    len: x.shape[*axis],
                    stride: src.strides[*axis],
                },
                *k,
                vals.buffer.buffer(),
                idx.buffer.buffer(),
            )?);
            for st in [vals, idx] {
                results.push(Some(view_of(&st, strides.clone(), 0)));
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
