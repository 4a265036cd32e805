//! `explain`: the kernels an eval would run, in words.

use std::fmt::Write as _;
use std::sync::Arc;

use super::Node;
use super::eval::{plan, schedule};
use super::fuse::{Plan, Step};
use super::primitive::Primitive;
use crate::array::Array;
use crate::{Error, Result};

/// The kernels an eval of `arrays` would run now, one line each: which ops
/// each computes (a fused kernel lists every op it fuses), the shape and
/// dtype of what it writes, and how many arrays it reads. Nothing runs and
/// nothing is allocated. For a compiled function see
/// [`crate::Compiled::explain`].
///
/// ```
/// # let device = wgarray::Device::new_default()?;
/// let x = wgarray::Array::from_slice(&[1.0f32, 2.0, 3.0], &[3], &device)?;
/// let y = (&x * 2.0)?.exp()?.sum(None, false)?;
/// print!("{}", wgarray::explain(&[&y])?);
/// // 1 kernel for 4 nodes (fusion on):
/// //   1. fused [full, multiply, exp, sum] -> float32[], reads 1 array
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// # Errors
/// [`Error::DeviceMismatch`] for arrays of different devices.
pub fn explain(arrays: &[&Array]) -> Result<String> {
    let Some(first) = arrays.first() else {
        return Ok("nothing to evaluate\n".into());
    };
    if let Some(other) = arrays.iter().find(|a| a.device() != first.device()) {
        return Err(Error::device_mismatch(
            "explain",
            first.device(),
            other.device(),
        ));
    }
    let device = first.device();
    let order = schedule(arrays);
    let plan = plan(device, &order);
    Ok(describe(&order, &plan, device.fusion()))
}

/// `shape` and dtype as `f32[2, 3]`.
fn typed(a: &crate::array::ArrayInner) -> String {
    let dims: Vec<String> = a.shape.iter().map(usize::to_string).collect();
    format!("{}[{}]", a.dtype, dims.join(", "))
}

/// One line per kernel of `plan` over `order`.
pub(crate) fn describe(order: &[Arc<Node>], plan: &Plan, fusion: bool) -> String {
    let live = |n: &Node| -> Vec<String> {
        n.outputs
            .get()
            .map(|o| {
                o.iter()
                    .filter_map(|w| w.upgrade())
                    .map(|a| typed(&a))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut lines = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        match *step {
            Step::Skip => {}
            Step::Lower => {
                let n = &order[i];
                let what = match &n.primitive {
                    Primitive::View(_) => {
                        format!(
                            "{} (a view; a copy if strides cannot express it)",
                            n.primitive.name()
                        )
                    }
                    p => p.name().to_string(),
                };
                lines.push(format!(
                    "{what} -> {}, reads {} array{}",
                    live(n).join(" + "),
                    n.inputs.len(),
                    if n.inputs.len() == 1 { "" } else { "s" }
                ));
            }
            Step::Group(g) => {
                let group = &plan.groups[g];
                let members: Vec<*const Node> = group
                    .members
                    .iter()
                    .map(|&m| Arc::as_ptr(&order[m]))
                    .collect();
                let ops: Vec<&str> = group
                    .members
                    .iter()
                    .map(|&m| order[m].primitive.name())
                    .collect();
                // Distinct arrays read from memory: inputs not computed in
                // the kernel.
                let mut reads: Vec<*const crate::array::ArrayInner> = Vec::new();
                for &m in &group.members {
                    for a in &order[m].inputs {
                        let inside = a
                            .inner
                            .pending_node()
                            .is_some_and(|p| members.contains(&Arc::as_ptr(&p)));
                        let ptr = Arc::as_ptr(&a.inner);
                        if !inside && !reads.contains(&ptr) {
                            reads.push(ptr);
                        }
                    }
                }
                let writes: Vec<String> = group
                    .outputs
                    .iter()
                    .filter_map(|&(p, k)| {
                        order[p]
                            .outputs
                            .get()
                            .and_then(|o| o[k].upgrade())
                            .map(|a| typed(&a))
                    })
                    .collect();
                let kind = if ops.len() > 1 { "fused " } else { "" };
                lines.push(format!(
                    "{kind}[{}] -> {}, reads {} array{}",
                    ops.join(", "),
                    writes.join(" + "),
                    reads.len(),
                    if reads.len() == 1 { "" } else { "s" }
                ));
            }
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} kernel{} for {} node{} (fusion {}):",
        lines.len(),
        if lines.len() == 1 { "" } else { "s" },
        order.len(),
        if order.len() == 1 { "" } else { "s" },
        if fusion { "on" } else { "off" }
    );
    for (i, l) in lines.iter().enumerate() {
        let _ = writeln!(out, "  {}. {l}", i + 1);
    }
    out
}
