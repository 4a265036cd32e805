//! Scheduling and evaluation: topological order without recursion, one
//! command buffer and one submit per eval, detach after eval. Turning a node
//! into dispatches is `graph::lower`'s job.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Node;
use super::fuse::{self, Group, Step};
use super::lower::{self, Lowering};
use super::primitive::Primitive;
use crate::array::{Array, ArrayInner, State};
use crate::kernels;
use crate::{Error, Result};

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
    let max_bindings = (dev.kernels.limits.max_storage_buffers_per_shader_stage as usize).min(8);
    let plan = fuse::plan(&order, device.fusion(), max_bindings);
    device.scoped(|| {
        let mut lw = Lowering {
            device: &device,
            guard: &guard,
            dispatches: Vec::with_capacity(order.len()),
        };
        // Nodes are let go of as soon as the plan is done with them: with
        // their outputs detached, their inputs (and so their buffers) go
        // back unless someone else holds them.
        let mut nodes: Vec<Option<Arc<Node>>> = order.into_iter().map(Some).collect();
        let mut result = Ok(());
        for i in 0..nodes.len() {
            let step = match plan.steps[i] {
                Step::Skip => Ok(()),
                Step::Lower => run_node(&mut lw, nodes[i].as_ref().expect("not yet released")),
                Step::Group(g) => run_group(&mut lw, &nodes, &plan.groups[g]),
            };
            if let Err(e) = step {
                result = Err(e);
                break;
            }
            for &j in &plan.release[i] {
                nodes[j] = None;
            }
        }
        dev.dispatches
            .fetch_add(lw.dispatches.len() as u64, Ordering::SeqCst);
        kernels::submit(
            &dev.device,
            &dev.queue,
            &dev.kernels,
            &guard,
            &lw.dispatches,
        )?;
        result
    })
}

/// The live outputs of `node`.
fn live_outputs(node: &Node) -> Vec<Option<Arc<ArrayInner>>> {
    node.outputs
        .get()
        .map(|o| o.iter().map(|w| w.upgrade()).collect())
        .unwrap_or_default()
}

/// Lower one node and detach its live outputs: each takes its buffer and
/// lets go of the node.
fn run_node(lw: &mut Lowering<'_>, node: &Arc<Node>) -> Result<()> {
    let outputs = live_outputs(node);
    let results = lower::lower(lw, node, &outputs)?;
    for (o, s) in outputs.iter().zip(results) {
        if let (Some(o), Some(s)) = (o, s) {
            drop(o.set_state(State::Ready(s)));
        }
    }
    Ok(())
}

/// Run a fused group as one kernel. If its outputs do not fit in memory, run
/// its nodes one by one instead, so that the nodes before the one that
/// fails are evaluated, as they would be without fusion.
fn run_group(lw: &mut Lowering<'_>, nodes: &[Option<Arc<Node>>], group: &Group) -> Result<()> {
    let members: Vec<&Arc<Node>> = group
        .members
        .iter()
        .map(|&i| {
            nodes[i]
                .as_ref()
                .expect("members live until their group ran")
        })
        .collect();
    let outputs: Vec<Arc<ArrayInner>> = group
        .outputs
        .iter()
        .filter_map(|&(i, k)| live_outputs(members_node(nodes, i)).swap_remove(k))
        .collect();
    match lower::program::group(lw, &members, &outputs) {
        Err(Error::OutOfMemory { .. }) if group.outputs.len() + members.len() > 2 => {
            for node in members {
                if matches!(
                    node.primitive,
                    Primitive::Elementwise(_) | Primitive::Full { .. }
                ) && !node.outputs.get().is_some_and(|o| {
                    o.iter()
                        .all(|w| w.upgrade().is_none_or(|a| a.pending_node().is_none()))
                }) {
                    run_node(lw, node)?;
                }
            }
            Ok(())
        }
        r => r,
    }
}

fn members_node(nodes: &[Option<Arc<Node>>], i: usize) -> &Node {
    nodes[i]
        .as_ref()
        .expect("members live until their group ran")
}
