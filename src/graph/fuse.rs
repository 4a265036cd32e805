//! Fusion planning: which scheduled nodes are computed inside one generated
//! elementwise kernel (`kernels::program`), and which values are written to
//! memory. A step between scheduling and lowering; nothing in `ops/` knows
//! about it.
//!
//! # Rules
//!
//! A value (one output of one node) is *materialised* (written to a buffer)
//! when someone outside this eval's graph holds it (the caller, or a node
//! that is not being evaluated), when a node that is not elementwise reads
//! it (matmul, reduce, split, ...), or when it would otherwise be recomputed
//! in two kernels. Every other elementwise value is computed inside the
//! kernel of the value that reads it. Constants (`full`, scalars) become
//! parameter words of every kernel that reads them, and views (broadcast,
//! permute, slice, size-1 reshapes, contiguous) become the strides of the
//! loads under them, so neither costs a dispatch.
//!
//! A materialised value whose readers are all inside one other kernel of the
//! same shape is written by that kernel as an extra output (a value the
//! caller still holds is written, never recomputed, and costs no dispatch of
//! its own).
//!
//! A reduction is a kernel too when the value it reduces is elementwise:
//! that value and what it is computed from run in the reduction's loads
//! (its prologue, `kernels::reduce`), and a materialised value the
//! reduction reads that later kernels or the caller need is written by the
//! reduction as an extra output ([`reduce_writer`]).
//!
//! Limits: a kernel computes at most [`MAX_DEFS`] loads, constants and ops,
//! and binds at most the adapter's storage buffers per stage (and never more
//! than WebGPU's 8); past that, the largest input is materialised and the
//! group splits.
//!
//! `WGARRAY_FUSION=0` turns fusion off: every elementwise node is its own
//! kernel (constants and views still fold into loads), for checking results
//! against the unfused path.

use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::rc::Rc;
use std::sync::Arc;

use super::Node;
use super::primitive::{Primitive, View};
use crate::array::ArrayInner;

/// The most definitions (loads, constants, ops) of one fused kernel: beyond
/// it, compile time on software adapters grows faster than dispatches cost.
pub(crate) const MAX_DEFS: usize = 128;

/// Environment variable: `0` turns fusion off.
pub const FUSION_ENV: &str = "WGARRAY_FUSION";

/// Whether fusion is on (`WGARRAY_FUSION` is not `0`), read once.
pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var(FUSION_ENV).map_or(true, |v| v.trim() != "0"))
}

/// Per node, one entry per output, in one flat vector: node `i`'s entries
/// are `data[at[i]..at[i + 1]]` (most nodes have one output, divmod two,
/// split any number), so planning allocates per pass, not per node.
/// Indexed by node, it gives that node's slice.
struct Outs<T> {
    at: Rc<[usize]>,
    data: Vec<T>,
}

impl<T> Outs<T> {
    /// Every entry made by `make`.
    fn with(at: &Rc<[usize]>, make: impl FnMut() -> T) -> Outs<T> {
        let mut data = Vec::new();
        data.resize_with(at.last().copied().unwrap_or(0), make);
        Outs {
            at: Rc::clone(at),
            data,
        }
    }
}

impl<T: Clone> Outs<T> {
    /// Every entry `value`.
    fn filled(at: &Rc<[usize]>, value: T) -> Outs<T> {
        Outs {
            at: Rc::clone(at),
            data: vec![value; at.last().copied().unwrap_or(0)],
        }
    }
}

impl<T> std::ops::Index<usize> for Outs<T> {
    type Output = [T];
    fn index(&self, i: usize) -> &[T] {
        &self.data[self.at[i]..self.at[i + 1]]
    }
}

impl<T> std::ops::IndexMut<usize> for Outs<T> {
    fn index_mut(&mut self, i: usize) -> &mut [T] {
        &mut self.data[self.at[i]..self.at[i + 1]]
    }
}

/// A short list of positions (readers, kernel roots, loads): inline up to 4.
type Ids = SmallVec<[usize; 4]>;

/// Per input slot of a node: the producing `(position, output)` if the
/// input is pending.
type Slots = SmallVec<[Option<(usize, usize)>; 3]>;

/// What happens at one position of the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Lowered on its own (`graph::lower`): not elementwise, or a view
    /// with a storage of its own.
    Lower,
    /// Computed inside a kernel that runs at another position.
    Skip,
    /// Group `g` runs here (its last member).
    Group(usize),
}

/// One generated kernel: the positions of the nodes it computes (ascending)
/// and the values it writes, `(position, output index)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Group {
    pub members: Vec<usize>,
    pub outputs: Vec<(usize, usize)>,
}

/// The plan of one eval.
#[derive(Debug)]
pub(crate) struct Plan {
    pub steps: Vec<Step>,
    pub groups: Vec<Group>,
    /// The positions whose nodes the schedule lets go of, grouped by the
    /// step after which it does (see [`Plan::release`]).
    released: Vec<usize>,
    /// Per step `i`, `released[release_at[i]..release_at[i + 1]]`.
    release_at: Vec<usize>,
}

impl Plan {
    /// After step `i`, the schedule lets go of these positions' nodes.
    pub(crate) fn release(&self, i: usize) -> &[usize] {
        &self.released[self.release_at[i]..self.release_at[i + 1]]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Cast, Copy, Unary, Binary, Where, DivMod.
    Elementwise,
    /// `full`: a parameter word wherever it is read.
    Const,
    /// A view the loads under it can absorb.
    View,
    /// A reduction: lowered on its own, or with the elementwise value it
    /// reduces computed in its loads (a prologue).
    Reduce,
    /// Anything else: lowered on its own, reads materialised inputs.
    Other,
}

fn kind(p: &Primitive, in_shape: Option<&[usize]>, out_shape: &[usize]) -> Kind {
    match p {
        Primitive::Elementwise(_) => Kind::Elementwise,
        Primitive::Full { .. } => Kind::Const,
        Primitive::View(View::Reshape) => {
            // Only reshapes that add or drop length-1 axes keep every
            // load's strides expressible.
            let kept = |d: &&usize| **d != 1;
            match in_shape {
                Some(i) if i.iter().filter(kept).eq(out_shape.iter().filter(kept)) => Kind::View,
                _ => Kind::Other,
            }
        }
        Primitive::View(_) => Kind::View,
        Primitive::Reduce { .. } => Kind::Reduce,
        _ => Kind::Other,
    }
}

/// Per-position facts the planner works from.
struct Facts {
    /// Where each node's outputs start in the per-output vectors.
    at: Rc<[usize]>,
    kinds: Vec<Kind>,
    /// Per node, per input slot: the producing `(position, output)` if the
    /// input is pending.
    inputs: Vec<Slots>,
    /// Per node, per input slot: the input array's address (which arrays
    /// are the same load).
    input_ids: Vec<SmallVec<[usize; 3]>>,
    /// Per node, per output: the positions of the nodes that read it (one
    /// entry per input slot).
    consumers: Outs<Ids>,
    /// Per node, per output: someone outside this eval's graph holds it.
    held: Outs<bool>,
    /// Per node, per output: the array, if alive at all (held for the
    /// plan's duration).
    outputs: Outs<Option<Arc<ArrayInner>>>,
    /// Per node: the output whose shape is the node's (they share one,
    /// except split's), if any is alive.
    shape_of: Vec<Option<usize>>,
}

impl Facts {
    /// Whether output `k` of node `i` is alive at all.
    fn live(&self, i: usize, k: usize) -> bool {
        self.outputs[i][k].is_some()
    }

    /// Node `i`'s outputs' shape (empty if none is alive).
    fn shape(&self, i: usize) -> &[usize] {
        match self.shape_of[i] {
            Some(v) => &self.outputs.data[v].as_ref().expect("a live output").shape,
            None => &[],
        }
    }
}

fn facts(order: &[Arc<Node>]) -> Facts {
    let n = order.len();
    #[cfg(debug_assertions)]
    let pos: HashMap<*const Node, usize> = order
        .iter()
        .enumerate()
        .map(|(i, node)| (Arc::as_ptr(node), i))
        .collect();
    let mut at = Vec::with_capacity(n + 1);
    at.push(0);
    let mut outputs: Vec<Option<Arc<ArrayInner>>> = Vec::with_capacity(n);
    let mut shape_of = Vec::with_capacity(n);
    let mut which: HashMap<*const ArrayInner, (usize, usize)> =
        HashMap::with_capacity_and_hasher(n, Default::default());
    for (i, node) in order.iter().enumerate() {
        let mut shape = None;
        for (k, w) in node
            .outputs
            .get()
            .map_or(&[][..], |o| &o[..])
            .iter()
            .enumerate()
        {
            let o = w.upgrade();
            if let Some(o) = &o {
                which.insert(Arc::as_ptr(o), (i, k));
                shape = shape.or(Some(outputs.len()));
            }
            outputs.push(o);
        }
        shape_of.push(shape);
        at.push(outputs.len());
    }
    let at: Rc<[usize]> = at.into();
    let outputs = Outs {
        at: Rc::clone(&at),
        data: outputs,
    };
    let mut inputs = Vec::with_capacity(n);
    let mut input_ids = Vec::with_capacity(n);
    let mut consumers: Outs<Ids> = Outs::with(&at, Ids::new);
    for (i, node) in order.iter().enumerate() {
        let mut slots = Slots::new();
        let mut ids = SmallVec::new();
        for a in &node.inputs {
            let v = which.get(&Arc::as_ptr(&a.inner)).copied();
            #[cfg(debug_assertions)]
            debug_assert!(
                v.is_some()
                    || a.inner
                        .pending_node()
                        .is_none_or(|p| !pos.contains_key(&Arc::as_ptr(&p)))
            );
            if let Some((p, k)) = v {
                consumers[p][k].push(i);
            }
            slots.push(v);
            ids.push(Arc::as_ptr(&a.inner) as usize);
        }
        inputs.push(slots);
        input_ids.push(ids);
    }
    let mut held = Outs::filled(&at, false);
    for (v, o) in outputs.data.iter().enumerate() {
        // One reference is ours (the upgrade above). A shared scalar
        // operand is held by nodes only, never by the user: those outside
        // this eval read it later.
        held.data[v] = o
            .as_ref()
            .is_some_and(|o| !o.shared && Arc::strong_count(o) - 1 > consumers.data[v].len());
    }
    let mut f = Facts {
        at,
        kinds: Vec::with_capacity(n),
        inputs,
        input_ids,
        consumers,
        held,
        outputs,
        shape_of,
    };
    for (i, node) in order.iter().enumerate() {
        let in_shape = node.inputs.first().map(|a| a.inner.shape.as_slice());
        let k = kind(&node.primitive, in_shape, f.shape(i));
        f.kinds.push(k);
    }
    f
}

/// Sort and deduplicate a list of positions.
fn sort_dedup(ids: &mut Ids) {
    if ids.len() > 1 {
        ids.sort_unstable();
        ids.dedup();
    }
}

/// A small union-find over kernel ids (positions of their first root).
fn find(parent: &mut [usize], mut k: usize) -> usize {
    while parent[k] != k {
        parent[k] = parent[parent[k]];
        k = parent[k];
    }
    k
}

/// Plan the fusion of `order` (the schedule: pending nodes, inputs first).
/// `fusion`: merge elementwise nodes into shared kernels (else one kernel
/// per elementwise node); `max_bindings`: storage buffers one kernel may
/// bind.
pub(crate) fn plan(order: &[Arc<Node>], fusion: bool, max_bindings: usize) -> Plan {
    let f = facts(order);
    let n = order.len();
    // Values forced to memory by the size and binding caps.
    let mut forced: Outs<bool> = Outs::filled(&f.at, false);
    let (mut mat, mut lowered_view, mut roots);
    let mut size = vec![0; n];
    let mut leaves: Vec<Ids> = Vec::new();
    leaves.resize_with(n, Ids::new);
    loop {
        (mat, lowered_view, roots) = materialise(&f, fusion, &forced);
        let changed = apply_caps(&f, &mat, &mut forced, max_bindings, &mut size, &mut leaves);
        if !changed {
            break;
        }
    }
    // Kernels: one per node with a materialised elementwise or constant
    // value, then merged into the kernel that reads all of it.
    let mut parent: Vec<usize> = (0..n).collect();
    let has_kernel = |i: usize| {
        matches!(f.kinds[i], Kind::Elementwise | Kind::Const) && mat[i].iter().any(|&m| m)
    };
    // Per kernel: definitions, loads and outputs, summed as kernels merge.
    let mut outs: Vec<usize> = (0..n)
        .map(|i| mat[i].iter().filter(|&&x| x).count())
        .collect();
    if fusion {
        for i in (0..n).rev() {
            if !has_kernel(i) || f.kinds[i] != Kind::Elementwise {
                continue;
            }
            if let Some(t) = reduce_writer(order, &f, &mat, &lowered_view, &roots, &mut parent, i) {
                let mut l = leaves[t].clone();
                l.extend_from_slice(&leaves[i]);
                l.sort_unstable();
                l.dedup();
                if size[t] + size[i] + l.len() <= MAX_DEFS
                    && l.len() + outs[t] + outs[i] <= max_bindings
                {
                    let i_root = find(&mut parent, i);
                    parent[i_root] = t;
                    size[t] += size[i];
                    leaves[t] = l;
                    outs[t] += outs[i];
                    continue;
                }
            }
            // Every reader of every output inside one other kernel.
            let mut target = None;
            let mut ok = true;
            for (k, cs) in f.consumers[i].iter().enumerate() {
                if f.held[i][k] && !mat[i][k] {
                    ok = false;
                }
                for &c in cs {
                    let ks = kernels_of(c, &f, &mat, &lowered_view, &roots, &mut parent);
                    match (&ks[..], target) {
                        ([usize::MAX], _) => ok = false,
                        ([only], None) => target = Some(*only),
                        ([only], Some(t)) if *only == t => {}
                        _ => ok = false,
                    }
                }
            }
            let Some(t) = target.filter(|&t| ok && t != find(&mut parent, i)) else {
                continue;
            };
            let mut l = leaves[t].clone();
            l.extend_from_slice(&leaves[i]);
            l.sort_unstable();
            l.dedup();
            if f.shape(t) != f.shape(i)
                || f.kinds[t] == Kind::Reduce
                || size[t] + size[i] + l.len() > MAX_DEFS
                || l.len() + outs[t] + outs[i] > max_bindings
            {
                continue;
            }
            let i_root = find(&mut parent, i);
            parent[i_root] = t;
            size[t] += size[i];
            leaves[t] = l;
            outs[t] += outs[i];
        }
    }
    // GEMM epilogues: a matmul joins the one kernel that reads its product.
    let mut epilogue_of: Vec<Option<usize>> = vec![None; n];
    if fusion {
        let mut taken: Vec<usize> = Vec::new();
        let r = Reach {
            f: &f,
            mat: &mat,
            lowered_view: &lowered_view,
            roots: &roots,
        };
        for (i, e) in epilogue_of.iter_mut().enumerate() {
            let Some(t) = r.epilogue_target(order, i, &mut parent, &leaves, &outs, max_bindings)
            else {
                continue;
            };
            if !taken.contains(&t) {
                taken.push(t);
                *e = Some(t);
                outs[t] += f.held[i][0] as usize;
            }
        }
    }
    // Groups, their members and where they run; `group_of` is indexed by
    // kernel root (a position), `usize::MAX` where none yet.
    let mut group_of: Vec<usize> = vec![usize::MAX; n];
    let mut groups: Vec<Group> = Vec::new();
    let mut steps = vec![Step::Skip; n];
    let mut member_of: Vec<SmallVec<[usize; 2]>> = Vec::new();
    member_of.resize_with(n, SmallVec::new);
    // A reduction whose input is an elementwise value computed in its
    // loads leads a kernel of its own (the prologue's nodes join it).
    let prologue: Vec<bool> = (0..n)
        .map(|i| {
            fusion
                && f.kinds[i] == Kind::Reduce
                && match f.inputs[i].first() {
                    Some(&Some((p, k))) => {
                        f.kinds[p] == Kind::Elementwise && (!mat[p][k] || find(&mut parent, p) == i)
                    }
                    _ => false,
                }
        })
        .collect();
    for i in 0..n {
        match f.kinds[i] {
            Kind::Other if epilogue_of[i].is_none() => steps[i] = Step::Lower,
            Kind::Reduce => steps[i] = Step::Lower,
            Kind::View if lowered_view[i] => steps[i] = Step::Lower,
            _ => {}
        }
        let mut ks = Ids::new();
        if has_kernel(i) {
            ks.push(find(&mut parent, i));
        }
        if let Some(t) = epilogue_of[i] {
            ks.push(find(&mut parent, t));
        }
        if prologue[i] {
            ks.push(find(&mut parent, i));
        }
        if matches!(f.kinds[i], Kind::Elementwise | Kind::Const | Kind::View)
            && !(f.kinds[i] == Kind::View && lowered_view[i])
        {
            for &r in &roots[i] {
                ks.push(find(&mut parent, r));
            }
        }
        sort_dedup(&mut ks);
        for k in ks {
            if group_of[k] == usize::MAX {
                groups.push(Group::default());
                group_of[k] = groups.len() - 1;
            }
            let g = group_of[k];
            groups[g].members.push(i);
            member_of[i].push(g);
        }
        if has_kernel(i) {
            let g = group_of[find(&mut parent, i)];
            for (k, &m) in mat[i].iter().enumerate() {
                if m {
                    groups[g].outputs.push((i, k));
                }
            }
        }
        if prologue[i] {
            let g = group_of[find(&mut parent, i)];
            groups[g].outputs.extend((0..mat[i].len()).map(|k| (i, k)));
        }
        if let Some(t) = epilogue_of[i]
            && f.held[i][0]
        {
            // A product someone holds is written by its epilogue too.
            let g = group_of[find(&mut parent, t)];
            groups[g].outputs.push((i, 0));
        }
    }
    let mut run_at = vec![0; groups.len()];
    for (g, group) in groups.iter().enumerate() {
        // A kernel runs at its last member that computes something (its
        // constants and views come earlier anyway).
        run_at[g] = *group.members.last().expect("a group has members");
        steps[run_at[g]] = Step::Group(g);
    }
    // Release lists, flat: counted per step, then filled in order.
    let last: Vec<usize> = member_of
        .iter()
        .enumerate()
        .map(|(i, gs)| gs.iter().map(|&g| run_at[g]).max().unwrap_or(i).max(i))
        .collect();
    let mut release_at = vec![0; n + 1];
    for &l in &last {
        release_at[l + 1] += 1;
    }
    for i in 0..n {
        release_at[i + 1] += release_at[i];
    }
    let mut fill = release_at.clone();
    let mut released = vec![0; n];
    for (i, &l) in last.iter().enumerate() {
        released[fill[l]] = i;
        fill[l] += 1;
    }
    Plan {
        steps,
        groups,
        released,
        release_at,
    }
}

/// The kernels (after merging) that compute node `c`'s reading of its inputs.
fn kernels_of(
    c: usize,
    f: &Facts,
    mat: &Outs<bool>,
    lowered_view: &[bool],
    roots: &[Ids],
    parent: &mut [usize],
) -> Ids {
    if matches!(f.kinds[c], Kind::Other | Kind::Reduce)
        || (f.kinds[c] == Kind::View && lowered_view[c])
    {
        return smallvec::smallvec![usize::MAX]; // read from memory by a non-kernel
    }
    let mut ks = Ids::new();
    if f.kinds[c] == Kind::Elementwise && mat[c].iter().any(|&m| m) {
        ks.push(find(parent, c));
    }
    for &r in &roots[c] {
        let r = find(parent, r);
        if !ks.contains(&r) {
            ks.push(r);
        }
    }
    ks
}

/// The reduction whose kernel may compute the materialised elementwise
/// value at `i` in its prologue and write it (every output of it): the
/// first reduction that reads it, as its input or inside its prologue,
/// when every other reader comes later in the schedule (so it reads the
/// value from memory once written: a layer norm's residual sum, read by
/// the moments and then by the normalising kernel, or a value the user
/// holds) and the value is 4-byte and of the reduction's input shape.
fn reduce_writer(
    order: &[Arc<Node>],
    f: &Facts,
    mat: &Outs<bool>,
    lowered_view: &[bool],
    roots: &[Ids],
    parent: &mut [usize],
    i: usize,
) -> Option<usize> {
    let mut kernel_of = |c: usize| -> Option<usize> {
        if f.kinds[c] == Kind::Reduce {
            return Some(c);
        }
        match kernels_of(c, f, mat, lowered_view, roots, parent).as_slice() {
            [r] if *r != usize::MAX && f.kinds[*r] == Kind::Reduce => Some(*r),
            _ => None,
        }
    };
    let readers: Vec<(usize, Option<usize>)> = f.consumers[i]
        .iter()
        .flatten()
        .map(|&c| (c, kernel_of(c)))
        .collect();
    let t = readers.iter().filter_map(|&(_, r)| r).min()?;
    // A value computed from a matmul's product is left to the GEMM's
    // epilogue (bias and residual adds before a layer norm): the product
    // is then never written, where a prologue would read it back.
    if reads_product(order, f, mat, i) {
        return None;
    }
    let input = &order[t].inputs.first()?.inner;
    if f.shape(i) != input.shape.as_slice() || readers.iter().any(|&(c, r)| r != Some(t) && c <= t)
    {
        return None;
    }
    let outs = order[i].outputs.get()?;
    for (k, w) in outs.iter().enumerate() {
        if mat[i][k] && w.upgrade()?.dtype.size_in_bytes() != 4 {
            return None;
        }
    }
    Some(t)
}

/// Whether the kernel that computes `i` reads a matmul's product (directly
/// or through values it computes inline).
fn reads_product(order: &[Arc<Node>], f: &Facts, mat: &Outs<bool>, i: usize) -> bool {
    let mut stack = vec![i];
    let mut seen: Vec<usize> = Vec::new();
    while let Some(j) = stack.pop() {
        if seen.contains(&j) {
            continue;
        }
        seen.push(j);
        for &(p, k) in f.inputs[j].iter().flatten() {
            if order[p].primitive.is_gemm() {
                return true;
            }
            if matches!(f.kinds[p], Kind::Elementwise | Kind::View | Kind::Const) && !mat[p][k] {
                stack.push(p);
            }
        }
    }
    false
}

/// What the planner knows once values are materialised: enough to ask which
/// kernels compute a node.
struct Reach<'p> {
    f: &'p Facts,
    mat: &'p Outs<bool>,
    lowered_view: &'p [bool],
    roots: &'p [Ids],
}

impl Reach<'_> {
    fn kernels_of(&self, c: usize, parent: &mut [usize]) -> Ids {
        kernels_of(c, self.f, self.mat, self.lowered_view, self.roots, parent)
    }

    /// The kernel (root) a matmul at `i` can run as the epilogue of: every
    /// reader of its product is computed in that one kernel, every value
    /// computed there from the product is elementwise of the product's
    /// shape (so the epilogue reads the product at its own element, never
    /// through a view), and the GEMM's operands, the kernel's other loads
    /// and its outputs fit `max_bindings`. A product someone holds is
    /// written by the epilogue as an extra output.
    fn epilogue_target(
        &self,
        order: &[Arc<Node>],
        i: usize,
        parent: &mut [usize],
        leaves: &[Ids],
        outs: &[usize],
        max_bindings: usize,
    ) -> Option<usize> {
        let f = self.f;
        if !order[i].primitive.is_gemm() || !f.live(i, 0) || f.consumers[i][0].is_empty() {
            return None;
        }
        let (mut target, mut product) = (None, None);
        for &c in &f.consumers[i][0] {
            match (&self.kernels_of(c, parent)[..], target) {
                ([usize::MAX], _) => return None,
                ([only], None) => target = Some(*only),
                ([only], Some(t)) if *only == t => {}
                _ => return None,
            }
            for (slot, &id) in f.inputs[c].iter().zip(&f.input_ids[c]) {
                if *slot == Some((i, 0)) {
                    product = Some(id);
                }
            }
        }
        let t = target.filter(|&t| f.kinds[t] != Kind::Reduce)?;
        // Everything the kernel computes from the product.
        let mut stack: Vec<usize> = f.consumers[i][0].to_vec();
        let mut seen: Vec<usize> = Vec::new();
        while let Some(d) = stack.pop() {
            if seen.contains(&d) {
                continue;
            }
            seen.push(d);
            if f.kinds[d] != Kind::Elementwise || f.shape(d) != f.shape(i) {
                return None;
            }
            for cs in &f.consumers[d] {
                for &x in cs {
                    if self.kernels_of(x, parent).contains(&t) {
                        stack.push(x);
                    }
                }
            }
        }
        let loads = leaves[t].iter().filter(|&&l| Some(l) != product).count();
        let operands = order[i].inputs.len();
        (operands + loads + outs[t] + f.held[i][0] as usize <= max_bindings).then_some(t)
    }
}

/// Which values are materialised, which views get a storage of their own,
/// and for every node the kernels (by root position, before merging) its
/// computation is inlined into.
#[allow(clippy::type_complexity)]
fn materialise(f: &Facts, fusion: bool, forced: &Outs<bool>) -> (Outs<bool>, Vec<bool>, Vec<Ids>) {
    let n = f.kinds.len();
    let mut mat: Outs<bool> = Outs::filled(&f.at, false);
    let mut lowered_view = vec![false; n];
    let mut roots: Vec<Ids> = Vec::new();
    roots.resize_with(n, Ids::new);
    for i in (0..n).rev() {
        // A reduction computes an elementwise value it reads in its loads
        // (its prologue); it reads anything else from memory.
        let in_prologue = fusion && f.kinds[i] == Kind::Elementwise;
        // Readers that need the value in memory.
        let from_memory = |k: usize, lowered_view: &[bool]| {
            f.consumers[i][k].iter().any(|&c| match f.kinds[c] {
                Kind::Other => true,
                Kind::Reduce => !in_prologue,
                Kind::View => lowered_view[c],
                _ => false,
            })
        };
        let union_roots = |k: usize, roots: &[Ids]| {
            let mut rs = Ids::new();
            for &c in &f.consumers[i][k] {
                if f.kinds[c] == Kind::Reduce && !in_prologue {
                    continue;
                }
                rs.extend_from_slice(&roots[c]);
            }
            // Sorted, not searched: a shared scalar has a reader per op.
            sort_dedup(&mut rs);
            rs
        };
        match f.kinds[i] {
            Kind::Other => mat[i].iter_mut().for_each(|m| *m = true),
            Kind::Reduce => {
                mat[i].iter_mut().for_each(|m| *m = true);
                roots[i] = smallvec::smallvec![i];
            }
            Kind::View => {
                lowered_view[i] = f.held[i][0] || forced[i][0] || from_memory(0, &lowered_view);
                mat[i][0] = lowered_view[i];
                if !lowered_view[i] {
                    roots[i] = union_roots(0, &roots);
                }
            }
            Kind::Const => {
                mat[i][0] = f.held[i][0] || from_memory(0, &lowered_view) || forced[i][0];
                roots[i] = union_roots(0, &roots);
                if mat[i][0] {
                    roots[i].retain(|r| *r != i);
                }
            }
            Kind::Elementwise => {
                let mut rs = Ids::new();
                for k in 0..mat[i].len() {
                    if !f.live(i, k) {
                        continue;
                    }
                    let inner = union_roots(k, &roots);
                    let m = !fusion
                        || f.held[i][k]
                        || forced[i][k]
                        || from_memory(k, &lowered_view)
                        || inner.len() > 1
                        || (inner.is_empty() && !f.consumers[i][k].is_empty());
                    mat[i][k] = m;
                    if !m {
                        for r in inner {
                            if !rs.contains(&r) {
                                rs.push(r);
                            }
                        }
                    }
                }
                if mat[i].iter().any(|&m| m) || rs.len() > 1 {
                    // A node is computed in one kernel: if one of its
                    // outputs (divmod's) is written, or its outputs are
                    // read by two kernels, every output is written.
                    for k in 0..mat[i].len() {
                        mat[i][k] |=
                            f.live(i, k) && (f.held[i][k] || !f.consumers[i][k].is_empty());
                    }
                    rs = smallvec::smallvec![i];
                }
                roots[i] = rs;
            }
        }
    }
    (mat, lowered_view, roots)
}

/// Mark inputs to memory where a kernel would pass [`MAX_DEFS`] or the
/// binding limit, walking the schedule in order so that each cut shortens
/// what follows it. Returns whether anything changed.
///
/// `size` and `leaves` get, per node, the ops and the distinct loads its
/// value costs a kernel that computes it (constants are free: equal ones
/// share a parameter word).
fn apply_caps(
    f: &Facts,
    mat: &Outs<bool>,
    forced: &mut Outs<bool>,
    max_bindings: usize,
    size: &mut [usize],
    leaves: &mut [Ids],
) -> bool {
    let n = f.kinds.len();
    let mut changed = false;
    for i in 0..n {
        if f.kinds[i] == Kind::Other || (f.kinds[i] == Kind::View && mat[i][0]) {
            continue;
        }
        loop {
            // Lowered views are materialised (`mat`), so this is every
            // value the kernel computes rather than loads.
            let inlined =
                |p: usize, k: usize| !mat[p][k] && !forced[p][k] && f.kinds[p] != Kind::Other;
            // A view costs no op, but counts one so that a chain of views
            // cannot grow a kernel's walk without bound.
            let mut s = match f.kinds[i] {
                Kind::Const => 0,
                Kind::View => 1,
                _ => f.outputs[i].iter().filter(|o| o.is_some()).count().max(1),
            };
            let mut l = Ids::new();
            let mut largest: Option<(usize, usize, usize)> = None;
            for (slot, &id) in f.inputs[i].iter().zip(&f.input_ids[i]) {
                match *slot {
                    Some((p, k)) if inlined(p, k) => {
                        s += size[p];
                        l.extend_from_slice(&leaves[p]);
                        let cost = size[p] + leaves[p].len();
                        if matches!(f.kinds[p], Kind::Elementwise | Kind::View)
                            && largest.is_none_or(|(c, _, _)| cost > c)
                        {
                            largest = Some((cost, p, k));
                        }
                    }
                    _ => l.push(id),
                }
            }
            sort_dedup(&mut l);
            let outs = mat[i].iter().filter(|&&m| m).count().max(1);
            let too_big = s + l.len() > MAX_DEFS || l.len() + outs > max_bindings;
            size[i] = s;
            leaves[i] = l;
            match largest {
                Some((_, p, k))
                    if too_big
                        && matches!(f.kinds[i], Kind::Elementwise | Kind::View | Kind::Reduce) =>
                {
                    forced[p][k] = true;
                    changed = true;
                }
                _ => break,
            }
        }
    }
    changed
}
