//! Tapes: the graph of a function traced by `compile`, kept as primitives
//! and references between them rather than as nodes and arrays, so that a
//! tape holds no input, no intermediate and no buffer of any call. It holds
//! the arrays the function captured (its constants) and, once the first
//! replay made it, its fusion plan.
//!
//! Tracing calls the function on placeholder arrays (nodes of
//! [`Primitive::Placeholder`], which cannot be evaluated), evaluates what
//! does not depend on them (constant folding: a captured lazy array is
//! computed once, not every call; `full` constants and scalars stay, as they
//! are free in a fused kernel), and records what does, with common
//! subexpressions merged and everything the outputs do not need dropped.
//! Replaying builds fresh nodes from the tape for new inputs of the same
//! signature; the schedule is the tape's order, so the plan made for the
//! first replay fits every later one.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap as HashMap;

use super::eval::{self, schedule};
use super::fuse::Plan;
use super::primitive::Primitive;
use super::{Inputs, Node};
use crate::array::{Array, ArrayInner};
use crate::{DType, Device, Error, Result};

/// Where a step's input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ref {
    /// The call's input `i`.
    Input(usize),
    /// The tape's constant `i`.
    Const(usize),
    /// Output `output` of step `step`.
    Value { step: usize, output: usize },
}

/// One recorded node.
#[derive(Debug)]
pub(crate) struct Step {
    pub primitive: Primitive,
    pub inputs: Vec<Ref>,
    /// Per output: shape and dtype (`None`: no one read it when traced, so
    /// it is not kept in a replay either).
    pub outputs: Vec<Option<(Vec<usize>, DType)>>,
}

/// A traced function, ready to replay.
pub(crate) struct Tape {
    /// Evaluated arrays the function captured or computed from captures.
    pub consts: Vec<Array>,
    /// Inputs before users.
    pub steps: Vec<Step>,
    pub outputs: Vec<Ref>,
    /// The fusion plan of a replay, made by the first one, with the fusion
    /// setting it was made for.
    plan: Mutex<Option<(bool, Arc<Plan>)>>,
}

/// Which output of `node` the array `a` is.
fn output_index(node: &Node, a: &Array) -> usize {
    let ptr = Arc::as_ptr(&a.inner);
    node.outputs
        .get()
        .and_then(|o| o.iter().position(|w| std::ptr::eq(w.as_ptr(), ptr)))
        .expect("a pending array is one of its node's outputs")
}

/// Trace `f` on placeholders shaped like `inputs` (one device, at least one).
///
/// # Errors
/// Whatever `f` returns; [`Error::Traced`] when `f` evaluates a value that
/// depends on its inputs; [`Error::DeviceMismatch`] when it returns arrays
/// of another device; the errors of [`crate::eval`] from constant folding.
pub(crate) fn trace(
    device: &Device,
    inputs: &[&Array],
    f: &dyn Fn(&[Array]) -> Result<Vec<Array>>,
) -> Result<Tape> {
    let placeholders: Vec<Array> = inputs
        .iter()
        .enumerate()
        .map(|(index, a)| {
            Array::from_node(
                device,
                Primitive::Placeholder { index },
                Vec::new(),
                vec![(a.shape().to_vec(), a.dtype())],
            )
            .pop()
            .expect("one output")
        })
        .collect();
    let outputs = f(&placeholders)?;
    if let Some(other) = outputs.iter().find(|o| o.device() != device) {
        return Err(Error::device_mismatch("compile", device, other.device()));
    }
    let targets: Vec<&Array> = outputs.iter().collect();
    fold_constants(&targets)?;
    Ok(record(&targets))
}

/// Evaluate every value the traced graph reads that does not depend on a
/// placeholder, in one eval.
fn fold_constants(targets: &[&Array]) -> Result<()> {
    let order = schedule(targets);
    let mut depends: HashMap<*const Node, bool> = HashMap::default();
    let dep = |a: &Array, depends: &HashMap<*const Node, bool>| {
        a.inner
            .pending_node()
            .is_some_and(|n| depends[&Arc::as_ptr(&n)])
    };
    let mut needed: Vec<Array> = Vec::new();
    for node in &order {
        // Constants (`full`, scalars) stay in the tape: they cost no
        // dispatch there (parameter words of the kernels that read them),
        // while an evaluated one would be a buffer to load.
        let d = matches!(
            node.primitive,
            Primitive::Placeholder { .. } | Primitive::Full { .. }
        ) || node.inputs.iter().any(|a| dep(a, &depends));
        if d {
            needed.extend(
                node.inputs
                    .iter()
                    .filter(|a| a.inner.pending_node().is_some() && !dep(a, &depends))
                    .cloned(),
            );
        }
        depends.insert(Arc::as_ptr(node), d);
    }
    needed.extend(
        targets
            .iter()
            .filter(|a| a.inner.pending_node().is_some() && !dep(a, &depends))
            .map(|a| (*a).clone()),
    );
    drop(order);
    let needed: Vec<&Array> = needed.iter().collect();
    eval::eval(&needed)
}

/// Record the graph under `targets` (whose only pending leaves are
/// placeholders) as a tape.
fn record(targets: &[&Array]) -> Tape {
    let order = schedule(targets);
    enum Seen {
        Input(usize),
        Step(usize),
    }
    let mut seen: HashMap<*const Node, Seen> = HashMap::default();
    let mut consts: Vec<Array> = Vec::new();
    let mut const_of: HashMap<*const ArrayInner, usize> = HashMap::default();
    let mut steps: Vec<Step> = Vec::new();
    // Common subexpressions: a step's text (primitive, inputs, outputs).
    let mut same: HashMap<String, usize> = HashMap::default();
    let mut resolve = |a: &Array, seen: &HashMap<*const Node, Seen>| match a.inner.pending_node() {
        Some(n) => match seen[&Arc::as_ptr(&n)] {
            Seen::Input(i) => Ref::Input(i),
            Seen::Step(s) => Ref::Value {
                step: s,
                output: output_index(&n, a),
            },
        },
        None => Ref::Const(*const_of.entry(Arc::as_ptr(&a.inner)).or_insert_with(|| {
            consts.push(a.clone());
            consts.len() - 1
        })),
    };
    for node in &order {
        if let Primitive::Placeholder { index } = node.primitive {
            seen.insert(Arc::as_ptr(node), Seen::Input(index));
            continue;
        }
        let inputs: Vec<Ref> = node.inputs.iter().map(|a| resolve(a, &seen)).collect();
        let outputs: Vec<Option<(Vec<usize>, DType)>> = node
            .outputs
            .get()
            .map(|o| {
                o.iter()
                    .map(|w| w.upgrade().map(|a| (a.shape.clone(), a.dtype)))
                    .collect()
            })
            .unwrap_or_default();
        let mut key = String::new();
        let _ = write!(key, "{:?}|{:?}|{:?}", node.primitive, inputs, outputs);
        let step = *same.entry(key).or_insert_with(|| {
            steps.push(Step {
                primitive: node.primitive.clone(),
                inputs,
                outputs,
            });
            steps.len() - 1
        });
        seen.insert(Arc::as_ptr(node), Seen::Step(step));
    }
    let outputs = targets.iter().map(|a| resolve(a, &seen)).collect();
    Tape {
        consts,
        steps,
        outputs,
        plan: Mutex::new(None),
    }
}

impl Tape {
    /// Build the tape's nodes for `inputs` (evaluated, on `device`, of the
    /// traced signature): the schedule, inputs first, and the outputs.
    pub(crate) fn replay(
        &self,
        device: &Device,
        inputs: &[&Array],
    ) -> (Vec<Arc<Node>>, Vec<Array>) {
        // Every step's outputs in one flat vector: step `s`'s are at
        // `values[at[s]..]`.
        let mut values: Vec<Option<Array>> = Vec::with_capacity(self.steps.len());
        let mut at: Vec<usize> = Vec::with_capacity(self.steps.len());
        let mut order = Vec::with_capacity(self.steps.len());
        let get = |r: &Ref, values: &[Option<Array>], at: &[usize]| match *r {
            Ref::Input(i) => inputs[i].clone(),
            Ref::Const(i) => self.consts[i].clone(),
            Ref::Value { step, output } => values[at[step] + output]
                .clone()
                .expect("a value read was live when traced"),
        };
        for step in &self.steps {
            let ins: Inputs = step.inputs.iter().map(|r| get(r, &values, &at)).collect();
            at.push(values.len());
            if let [Some((shape, dtype))] = &step.outputs[..] {
                // One output (most steps): no vectors around it.
                let out =
                    Array::from_node1(device, step.primitive.clone(), ins, shape.clone(), *dtype);
                order.push(out.inner.pending_node().expect("just made"));
                values.push(Some(out));
                continue;
            }
            // A dead output gets a descriptor only for the node's sake; it
            // is dropped at once, as it was when traced.
            let shapes = step
                .outputs
                .iter()
                .map(|o| o.clone().unwrap_or((Vec::new(), DType::F32)))
                .collect();
            let outs = Array::from_node(device, step.primitive.clone(), ins, shapes);
            order.push(outs[0].inner.pending_node().expect("just made"));
            values.extend(
                outs.into_iter()
                    .zip(&step.outputs)
                    .map(|(a, o)| o.as_ref().map(|_| a)),
            );
        }
        let outputs = self.outputs.iter().map(|r| get(r, &values, &at)).collect();
        (order, outputs)
    }

    /// The plan for a replay's `order` on `device`: made once per fusion
    /// setting and kept.
    pub(crate) fn plan(&self, device: &Device, order: &[Arc<Node>]) -> Arc<Plan> {
        let fusion = device.fusion();
        let mut slot = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some((f, p)) if *f == fusion => Arc::clone(p),
            _ => {
                let p = Arc::new(eval::plan(device, order));
                *slot = Some((fusion, Arc::clone(&p)));
                p
            }
        }
    }
}
