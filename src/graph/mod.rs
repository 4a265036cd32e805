//! The lazy graph: [`Node`]s and their [`Primitive`]s (the op vocabulary,
//! `primitive.rs`), scheduling and eval (`eval.rs`), and lowering nodes to
//! kernel dispatches (`lower/`).
//!
//! Ownership runs one way: an array holds its node (`Arc<Node>`) until it is
//! evaluated; a node holds its inputs (arrays); a node reaches its outputs
//! only through `Weak`. The outputs of a multi-output primitive share one node
//! and never point at each other, so no cycle can form (DESIGN.md, rule 1).

pub(crate) mod constants;
pub(crate) mod eval;
pub(crate) mod explain;
pub(crate) mod fuse;
mod lower;
pub(crate) mod primitive;
pub(crate) mod tape;

use std::sync::atomic::Ordering;
use std::sync::{OnceLock, Weak};

use crate::Device;
use crate::array::{Array, ArrayInner, State};
use crate::memory::Origin;
pub(crate) use primitive::{Primitive, View};

/// A node's outputs, weakly: inline for one output (most nodes), so
/// recording a node allocates no vector for them.
pub(crate) type Outputs = smallvec::SmallVec<[Weak<ArrayInner>; 1]>;

/// A node's inputs: inline up to two (an elementwise op's), so recording
/// such a node allocates no vector for them.
pub(crate) type Inputs = smallvec::SmallVec<[Array; 2]>;

/// A node: a primitive applied to inputs, producing one or more outputs.
pub(crate) struct Node {
    pub primitive: Primitive,
    pub inputs: Inputs,
    /// The outputs, weakly: set once, right after they are made.
    pub outputs: OnceLock<Outputs>,
    pub device: Device,
    /// The op and its call site, while memory history is on: the label of
    /// the buffers allocated for the node's outputs.
    pub origin: Option<Origin>,
}

impl Node {
    pub(crate) fn new(
        device: &Device,
        primitive: Primitive,
        inputs: impl Into<Inputs>,
        origin: Option<Origin>,
    ) -> Node {
        device.inner.live_nodes.fetch_add(1, Ordering::SeqCst);
        Node {
            primitive,
            inputs: inputs.into(),
            outputs: OnceLock::new(),
            device: device.clone(),
            origin,
        }
    }
}

impl Drop for Node {
    /// Unlink the ancestry iteratively: a chain of 100,000 unevaluated ops
    /// would otherwise drop by recursion and overflow the stack.
    fn drop(&mut self) {
        self.device.inner.live_nodes.fetch_sub(1, Ordering::SeqCst);
        // Inline while the ancestry is a chain: dropping a node then
        // allocates nothing.
        let mut stack: Inputs = std::mem::take(&mut self.inputs);
        while let Some(array) = stack.pop() {
            let Ok(inner) = std::sync::Arc::try_unwrap(array.inner) else {
                continue; // someone else still holds it
            };
            if let State::Pending { node } = inner.take_state()
                && let Ok(mut node) = std::sync::Arc::try_unwrap(node)
            {
                stack.extend(node.inputs.drain(..));
            }
        }
    }
}
