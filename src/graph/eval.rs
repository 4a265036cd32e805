//! Scheduling and evaluation: topological order without recursion, one
//! command buffer and one submit per eval, detach after eval. Turning a node
//! into dispatches is `graph::lower`'s job.

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use super::Node;
use super::lower::{self, Lowering};
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
    let Some(first) = arrays.first() else {
        return Ok(0);
    };
    let device = first.device().clone();
    if arrays.iter().any(|a| *a.device() != device) {
        return Err(Error::DeviceMismatch { op: "eval" });
    }
    let dev = &device.inner;
    let guard = dev.pool.lock_queue();
    let order = schedule(arrays);
    let nodes = order.len();
    if nodes == 0 {
        return Ok(0);
    }
    // The outputs marked evaluated, weakly: if wgpu refuses the submission
    // they are marked lost instead.
    let mut marked: Vec<Weak<ArrayInner>> = Vec::new();
    let result = device.scoped(|| {
        let mut lw = Lowering {
            device: &device,
            guard: &guard,
            dispatches: Vec::with_capacity(order.len()),
            origin: None,
        };
        let mut result = Ok(());
        for node in order {
            if let Err(e) = run_node(&mut lw, &node, &mut marked) {
                result = Err(e);
                break;
            }
            // `node` drops here: with its outputs detached, its inputs (and
            // so their buffers) go back unless someone else holds them.
        }
        let index = kernels::submit(
            &dev.device,
            &dev.queue,
            &dev.kernels,
            &guard,
            &lw.dispatches,
        )?;
        device.confirm_submitted(index)?;
        result
    });
    if let Err(Error::DeviceLost(_)) = &result {
        for o in marked.iter().filter_map(Weak::upgrade) {
            drop(o.set_state(State::Lost));
        }
    }
    result.map(|()| nodes)
}

/// Lower one node and detach its live outputs: each takes its buffer and
/// lets go of the node. Each output marked evaluated is added to `marked`.
fn run_node(lw: &mut Lowering<'_>, node: &Node, marked: &mut Vec<Weak<ArrayInner>>) -> Result<()> {
    let outputs: Vec<Option<Arc<ArrayInner>>> = node
        .outputs
        .get()
        .map(|o| o.iter().map(|w| w.upgrade()).collect())
        .unwrap_or_default();
    lw.origin = node.origin;
    let results = lower::lower(lw, node, &outputs)?;
    for (o, s) in outputs.iter().zip(results) {
        if let (Some(o), Some(s)) = (o, s) {
            drop(o.set_state(State::Ready(s)));
            marked.push(Arc::downgrade(o));
        }
    }
    Ok(())
}
