//! The lazy graph: [`Node`]s and their [`Primitive`]s, scheduling and eval.
//!
//! Ownership runs one way: an array holds its node (`Arc<Node>`) until it is
//! evaluated; a node holds its inputs (arrays); a node reaches its outputs
//! only through `Weak`. The outputs of a multi-output primitive share one node
//! and never point at each other, so no cycle can form (DESIGN.md, rule 1).

pub(crate) mod eval;

use std::sync::atomic::Ordering;
use std::sync::{OnceLock, Weak};

use crate::Device;
use crate::array::{Array, ArrayInner, State};
use crate::kernels::elementwise::ElementwiseOp;
use crate::kernels::random::Distribution;
use crate::kernels::reduce::ReduceOp;

/// One operation of the graph; each is one kind of kernel launch (or none,
/// for views).
#[derive(Debug)]
pub(crate) enum Primitive {
    /// Every 32-bit word of the output is `word`.
    Full { word: u32 },
    /// An elementwise op; inputs broadcast to the output's shape.
    Elementwise(ElementwiseOp),
    /// NumPy matmul (shapes already checked by the op): inputs `a`, `b`
    /// and, for addmm, a bias `c` broadcastable to the output;
    /// `alpha * (a @ b) + beta * c`. `naive` asks for the reference
    /// one-thread-per-output kernel (f32, no bias).
    Matmul { alpha: f32, beta: f32, naive: bool },
    /// A view: the output shares the input's buffer with other strides.
    View(View),
    /// Split along `axis`; output `i` starts at `starts[i]` along that axis.
    Split { axis: usize, starts: Vec<usize> },
    /// NumPy `take` along `axis`: inputs `x` and integer indices.
    Take { axis: usize },
    /// A reduction over `axes` (sorted, distinct); outputs drop those axes.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
        ddof: u32,
    },
    /// Philox 4x32-10 numbers under the key input (u32, shape [2]), from
    /// counters `(block, stream, 0, 0)`; see `crate::random`.
    Random { dist: Distribution, stream: u32 },
    /// The inputs (one dtype, equal shapes but for `axis`) joined along `axis`.
    Concatenate { axis: usize },
    /// The `k` largest elements along `axis`, sorted: values and u32 indices.
    TopK { axis: usize, k: usize },
}

/// How a view maps its input's layout to its output's.
#[derive(Debug)]
pub(crate) enum View {
    /// Same elements in row-major order under a new shape; copies when the
    /// input's strides cannot express it.
    Reshape,
    /// Output axis `i` is input axis `axes[i]`.
    Permute(Vec<usize>),
    /// NumPy broadcasting to the output's shape (stride 0 where repeated).
    Broadcast,
    /// Per axis: the first element and the step (negative steps reverse).
    Slice {
        starts: Vec<usize>,
        steps: Vec<isize>,
    },
}

/// A node: a primitive applied to inputs, producing one or more outputs.
pub(crate) struct Node {
    pub primitive: Primitive,
    pub inputs: Vec<Array>,
    /// The outputs, weakly: set once, right after they are made.
    pub outputs: OnceLock<Vec<Weak<ArrayInner>>>,
    pub device: Device,
}

impl Node {
    pub(crate) fn new(device: &Device, primitive: Primitive, inputs: Vec<Array>) -> Node {
        device.inner.live_nodes.fetch_add(1, Ordering::SeqCst);
        Node {
            primitive,
            inputs,
            outputs: OnceLock::new(),
            device: device.clone(),
        }
    }
}

impl Drop for Node {
    /// Unlink the ancestry iteratively: a chain of 100,000 unevaluated ops
    /// would otherwise drop by recursion and overflow the stack.
    fn drop(&mut self) {
        self.device.inner.live_nodes.fetch_sub(1, Ordering::SeqCst);
        let mut stack = std::mem::take(&mut self.inputs);
        while let Some(array) = stack.pop() {
            let Ok(inner) = std::sync::Arc::try_unwrap(array.inner) else {
                continue; // someone else still holds it
            };
            if let State::Pending { node } = inner.take_state()
                && let Ok(mut node) = std::sync::Arc::try_unwrap(node)
            {
                stack.append(&mut node.inputs);
            }
        }
    }
}
