//! Scheduling and evaluation: topological order without recursion, one
//! command buffer and one submit per eval, detach after eval. Turning a node
//! into dispatches is `graph::lower`'s job.

use rustc_hash::FxHashSet as HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::Node;
use super::fuse::{self, Group, Step};
use super::lower::{self, Lowering};
use super::primitive::Primitive;
use crate::array::{Array, ArrayInner, State};
use crate::kernels;
use crate::memory::QueueGuard;
use crate::{Device, Error, Result};

/// The unevaluated ancestors of `targets`, inputs before users. Iterative
/// post-order DFS: no recursion, so any depth works.
pub(crate) fn schedule(targets: &[&Array]) -> Vec<Arc<Node>> {
    let mut order = Vec::new();
    let mut seen: HashSet<*const Node> = HashSet::default();
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
        let deps: smallvec::SmallVec<[Arc<Node>; 4]> = node
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
/// If the device is lost, nothing is marked evaluated: arrays whose
/// submission wgpu refused are never computed, and every later call on the
/// device returns [`Error::DeviceLost`]. When nothing is pending, eval only
/// checks that the device still accepts work (an empty submission, about
/// 25 µs on Mesa); an eval that runs nodes checks with a non-blocking poll
/// before and a zero-timeout wait after its submission (about 4 µs each).
///
/// # Errors
/// [`Error::DeviceMismatch`] for arrays of different devices,
/// [`Error::OutOfMemory`], [`Error::Kernel`], [`Error::TooLarge`], and wgpu's
/// errors as [`Error::Validation`], [`Error::Internal`], [`Error::DeviceLost`].
pub fn eval(arrays: &[&Array]) -> Result<()> {
    if evaluate(arrays)? == 0
        && let Some(first) = arrays.first()
    {
        // Nothing ran, so nothing told whether the device still works.
        first.device().probe_lost()?;
    }
    Ok(())
}

/// [`eval`], returning how many nodes ran (0: nothing was pending, and
/// nothing was checked or submitted).
pub(crate) fn evaluate(arrays: &[&Array]) -> Result<usize> {
    evaluate_then(arrays, None).map(|(count, _)| count)
}

/// [`evaluate`], with `tail` encoded after the eval's dispatches in the
/// same submission (see [`kernels::Tail`]); returns how many nodes ran and
/// the submission's index (`None`, and `tail` not called, when nothing was
/// pending).
pub(crate) fn evaluate_then(
    arrays: &[&Array],
    tail: Option<kernels::Tail<'_>>,
) -> Result<(usize, Option<wgpu::SubmissionIndex>)> {
    let Some(first) = arrays.first() else {
        return Ok((0, None));
    };
    let device = first.device().clone();
    if let Some(other) = arrays.iter().find(|a| *a.device() != device) {
        return Err(Error::device_mismatch("eval", &device, other.device()));
    }
    let guard = device.inner.pool.lock_queue();
    let order = schedule(arrays);
    let count = order.len();
    if count == 0 {
        return Ok((0, None));
    }
    // A function being traced by `compile` asked for a value that depends
    // on its inputs: refuse before anything runs.
    if let Some(i) = order
        .iter()
        .position(|n| matches!(n.primitive, Primitive::Placeholder { .. }))
    {
        let op = order[i + 1..]
            .iter()
            .map(|n| n.primitive.name())
            .next_back()
            .unwrap_or("compile input");
        return Err(Error::Traced { op });
    }
    // Before planning: the planner never sees a block format where it
    // cannot be.
    check_blocks(&order)?;
    let plan = plan(&device, &order);
    run_planned_then(&device, &guard, order, &plan, tail).map(|index| (count, Some(index)))
}

/// The fusion plan of `order` on `device` (its fusion setting and binding
/// limit).
pub(crate) fn plan(device: &Device, order: &[Arc<Node>]) -> fuse::Plan {
    let max_bindings = (device
        .inner
        .kernels
        .limits
        .max_storage_buffers_per_shader_stage as usize)
        .min(8);
    fuse::plan(order, device.fusion(), max_bindings)
}

/// Lower `order` (a schedule: pending nodes, inputs first, nothing pending
/// outside it) by `plan` and submit it once; see [`eval`] for what happens on
/// errors. `plan` must be `plan(device, &order)`, or one made for a graph of
/// the same structure whose values are held the same way (a compiled
/// function's replay).
pub(crate) fn run_planned(
    device: &Device,
    guard: &QueueGuard<'_>,
    order: Vec<Arc<Node>>,
    plan: &fuse::Plan,
) -> Result<()> {
    run_planned_then(device, guard, order, plan, None).map(|_| ())
}

/// [`run_planned`], with `tail` encoded after the dispatches in the same
/// submission; returns the submission's index.
fn run_planned_then(
    device: &Device,
    guard: &QueueGuard<'_>,
    order: Vec<Arc<Node>>,
    plan: &fuse::Plan,
    tail: Option<kernels::Tail<'_>>,
) -> Result<wgpu::SubmissionIndex> {
    check_blocks(&order)?;
    let dev = &device.inner;
    // The outputs marked evaluated, weakly: if wgpu refuses the submission
    // they are marked lost instead.
    let mut marked: Vec<Weak<ArrayInner>> = Vec::new();
    let result = device.scoped(|| {
        let mut lw = Lowering {
            device,
            guard,
            dispatches: Vec::with_capacity(order.len()),
            origin: None,
            op: "eval",
        };
        // Nodes are let go of as soon as the plan is done with them: with
        // their outputs detached, their inputs (and so their buffers) go
        // back unless someone else holds them.
        let mut nodes: Vec<Option<Arc<Node>>> = order.into_iter().map(Some).collect();
        let mut result = Ok(());
        for i in 0..nodes.len() {
            let step = match plan.steps[i] {
                Step::Skip => Ok(()),
                Step::Lower => run_node(
                    &mut lw,
                    nodes[i].as_ref().expect("not yet released"),
                    &mut marked,
                ),
                Step::Group(g) => run_group(&mut lw, &nodes, &plan.groups[g], &mut marked),
            };
            if let Err(e) = step {
                result = Err(e);
                break;
            }
            for &j in plan.release(i) {
                nodes[j] = None;
            }
        }
        dev.dispatches
            .fetch_add(lw.dispatches.len() as u64, Ordering::SeqCst);
        let index = kernels::submit_then(
            &dev.device,
            &dev.queue,
            &dev.kernels,
            guard,
            &lw.dispatches,
            tail,
        )?;
        dev.pool.submitted(guard);
        device.confirm_submitted(index.clone())?;
        result.map(|()| index)
    });
    if let Err(Error::DeviceLost(_)) = &result {
        for o in marked.iter().filter_map(Weak::upgrade) {
            drop(o.set_state(State::Lost));
        }
    }
    result
}

/// What the ops that refuse a block format say they take.
pub(crate) const TAKES_ELEMENTS: &str = "element dtypes (a block format goes through \
     dequantize and quantized_matmul, or moves whole rows through views, contiguous, \
     concatenate, split and take along a leading axis)";

/// [`Error::OpDType`] for the first node of `order` that reads or makes an
/// array of a block format without taking one
/// ([`Primitive::takes_blocks`]), before anything runs. The ops refuse
/// block formats they cannot take when they are called; this catches the
/// ones whose own checks do not look at dtypes (a reduction's), so that no
/// kernel ever sees a block format it cannot decode.
fn check_blocks(order: &[Arc<Node>]) -> Result<()> {
    for node in order {
        if node.primitive.takes_blocks() {
            continue;
        }
        let input = node
            .inputs
            .iter()
            .map(|a| a.inner.dtype)
            .find(|d| d.is_quantized());
        let dtype = input.or_else(|| {
            node.outputs.get().and_then(|o| {
                o.iter()
                    .filter_map(Weak::upgrade)
                    .map(|a| a.dtype)
                    .find(|d| d.is_quantized())
            })
        });
        if let Some(dtype) = dtype {
            return Err(Error::OpDType {
                op: node.primitive.name(),
                dtype,
                takes: TAKES_ELEMENTS,
            });
        }
    }
    Ok(())
}

/// The live outputs of `node`.
fn live_outputs(node: &Node) -> Vec<Option<Arc<ArrayInner>>> {
    node.outputs
        .get()
        .map(|o| o.iter().map(|w| w.upgrade()).collect())
        .unwrap_or_default()
}

/// Lower one node and detach its live outputs: each takes its buffer and
/// lets go of the node. Each output marked evaluated is added to `marked`.
fn run_node(
    lw: &mut Lowering<'_>,
    node: &Arc<Node>,
    marked: &mut Vec<Weak<ArrayInner>>,
) -> Result<()> {
    let outputs = live_outputs(node);
    lw.origin = node.origin;
    lw.op = node.primitive.name();
    let results = lower::lower(lw, node, &outputs)?;
    for (o, s) in outputs.iter().zip(results) {
        if let (Some(o), Some(s)) = (o, s) {
            drop(o.set_state(State::Ready(s)));
            marked.push(Arc::downgrade(o));
        }
    }
    Ok(())
}

/// Run a fused group as one kernel. If its outputs do not fit in memory, run
/// its nodes one by one instead, so that the nodes before the one that
/// fails are evaluated, as they would be without fusion.
fn run_group(
    lw: &mut Lowering<'_>,
    nodes: &[Option<Arc<Node>>],
    group: &Group,
    marked: &mut Vec<Weak<ArrayInner>>,
) -> Result<()> {
    let node = |i: usize| {
        nodes[i]
            .as_ref()
            .expect("members live until their group ran")
    };
    let members: Vec<&Arc<Node>> = group.members.iter().map(|&i| node(i)).collect();
    let outputs: Vec<Arc<ArrayInner>> = group
        .outputs
        .iter()
        .filter_map(|&(i, k)| live_outputs(node(i)).swap_remove(k))
        .collect();
    // Buffers are handed out for the node the kernel runs at.
    lw.origin = members.last().and_then(|n| n.origin);
    lw.op = members.last().map_or("eval", |n| n.primitive.name());
    match lower::program::group(lw, &members, &outputs) {
        Ok(()) => {
            marked.extend(outputs.iter().map(Arc::downgrade));
            Ok(())
        }
        Err(Error::OutOfMemory { .. }) if group.outputs.len() + members.len() > 2 => {
            for n in members {
                let pending = live_outputs(n)
                    .iter()
                    .flatten()
                    .any(|a| a.pending_node().is_some());
                if pending
                    && matches!(
                        n.primitive,
                        Primitive::Elementwise(_)
                            | Primitive::Full { .. }
                            | Primitive::Matmul { .. }
                            | Primitive::QuantizedMatmul { .. }
                            | Primitive::Reduce { .. }
                    )
                {
                    run_node(lw, n, marked)?;
                }
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}
