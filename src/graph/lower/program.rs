//! Lowering of the elementwise family into generated programs
//! (`kernels::program`): a fused group of nodes, one elementwise node
//! alone, dense copies (split, read-back, reshape), and take (a gather).
//!
//! A program is built by walking down from the values it writes: an input
//! that is evaluated becomes a load, a pending constant (`full`, a scalar)
//! a parameter word, a pending view the strides of the loads under it, and a
//! pending elementwise node of the group an op. Loads of the same array
//! through the same view are one load.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::{SmallVec, smallvec};
use std::sync::Arc;

use super::{Lowered, Lowering, NodeIo};
use crate::array::{ArrayInner, State, Storage};
use crate::graph::Node;
use crate::graph::primitive::{BinaryOp, ElementwiseOp, Primitive, View};
use crate::kernels::program::{self as kernel, Bound, Def, LoadData, Program, Source, Value};
use crate::memory::{PAGE, PooledBuffer, round_size};
use crate::{DType, Error, Result};

/// How an array's axes map onto the iteration space: for each iteration
/// axis, the array axis it walks and the step (or none: broadcast), and per
/// array axis the index the walk starts from. Inline up to rank 4: a map
/// is made per value of a program, so it allocates only for higher ranks.
#[derive(Debug, PartialEq, Eq, Hash)]
struct AxisMap {
    axes: SmallVec<[Option<(usize, isize)>; 4]>,
    starts: SmallVec<[isize; 4]>,
}

impl Clone for AxisMap {
    /// By copy (`SmallVec`'s own clone goes element by element).
    fn clone(&self) -> AxisMap {
        AxisMap {
            axes: SmallVec::from_slice(&self.axes),
            starts: SmallVec::from_slice(&self.starts),
        }
    }
}

impl AxisMap {
    fn identity(rank: usize) -> AxisMap {
        AxisMap {
            axes: (0..rank).map(|a| Some((a, 1))).collect(),
            starts: smallvec![0; rank],
        }
    }

    #[cfg(test)]
    fn is_identity(&self) -> bool {
        self.starts.iter().all(|&s| s == 0)
            && self.axes.len() == self.starts.len()
            && self
                .axes
                .iter()
                .enumerate()
                .all(|(i, a)| *a == Some((i, 1)))
    }

    /// This map (from `y`'s axes to the iteration space) after a view `t`
    /// that maps `x`'s axes to `y`'s: the map from `x`'s axes.
    fn then(&self, t: &AxisMap) -> AxisMap {
        let mut starts = t.starts.clone();
        let axes = self
            .axes
            .iter()
            .map(|a| a.and_then(|(ya, step)| t.axes[ya].map(|(xa, step2)| (xa, step * step2))))
            .collect();
        // An offset along a y axis moves along the x axis it walks.
        for (ya, &s) in self.starts.iter().enumerate() {
            if let Some((xa, step)) = t.axes[ya] {
                starts[xa] += s * step;
            }
        }
        AxisMap { axes, starts }
    }

    /// NumPy broadcasting of an array of shape `from` to shape `to`.
    fn broadcast(from: &[usize], to: &[usize]) -> AxisMap {
        let lead = to.len() - from.len();
        AxisMap {
            axes: (0..to.len())
                .map(|o| {
                    let a = o.checked_sub(lead)?;
                    (from[a] == to[o] && from[a] != 1).then_some((a, 1))
                })
                .collect(),
            starts: smallvec![0; from.len()],
        }
    }

    /// The map of a view from its input (of shape `from`) to its output
    /// (of shape `to`); `None` for a reshape that is more than adding or
    /// dropping length-1 axes.
    fn of_view(view: &View, from: &[usize], to: &[usize]) -> Option<AxisMap> {
        Some(match view {
            View::Contiguous => AxisMap::identity(from.len()),
            View::Broadcast => AxisMap::broadcast(from, to),
            View::Permute(axes) => AxisMap {
                axes: axes.iter().map(|&a| Some((a, 1))).collect(),
                starts: smallvec![0; from.len()],
            },
            View::Slice { starts, steps } => AxisMap {
                axes: steps
                    .iter()
                    .enumerate()
                    .map(|(a, &s)| Some((a, s)))
                    .collect(),
                starts: starts.iter().map(|&s| s as isize).collect(),
            },
            View::Reshape => {
                let kept: Vec<usize> = (0..from.len()).filter(|&a| from[a] != 1).collect();
                let mut next = kept.iter();
                let axes = to
                    .iter()
                    .map(|&d| {
                        if d == 1 {
                            None
                        } else {
                            next.next().map(|&a| (a, 1))
                        }
                    })
                    .collect();
                let kept_to = to.iter().filter(|&&d| d != 1).count();
                if kept_to != kept.len()
                    || kept
                        .iter()
                        .zip(to.iter().filter(|&&d| d != 1))
                        .any(|(&a, &d)| from[a] != d)
                {
                    return None;
                }
                AxisMap {
                    axes,
                    starts: smallvec![0; from.len()],
                }
            }
        })
    }

    /// An element offset and strides seen through this map.
    fn apply(&self, offset: usize, strides: &[isize]) -> (usize, Vec<isize>) {
        let offset = offset as isize
            + self
                .starts
                .iter()
                .zip(strides)
                .map(|(&st, &sd)| st * sd)
                .sum::<isize>();
        let strides = self
            .axes
            .iter()
            .map(|a| a.map_or(0, |(x, step)| strides[x] * step))
            .collect();
        (offset as usize, strides)
    }
}

/// One load while the program is built.
struct Load {
    def: Value,
    array: *const ArrayInner,
    storage: Storage,
    offset: usize,
    strides: Vec<isize>,
    gather: Option<(isize, usize)>,
    /// Nothing but this program reads the array or its buffer, and the
    /// load covers the buffer densely (through whatever views) in the
    /// iteration order given here (a permutation of the iteration axes,
    /// outermost first): an output may be written over it. `None`: not
    /// donatable.
    donor: Option<Order>,
}

/// An order of the iteration axes, outermost first (see [`Load::donor`]).
type Order = SmallVec<[usize; 4]>;

impl Load {
    /// What the kernel binds for the load: its offset and strides.
    fn data(&self) -> LoadData {
        LoadData {
            offset: self.offset,
            strides: self.strides.clone(),
            gather: self.gather,
        }
    }
}

/// A strided load of `dtype` (its input binding is assigned when the
/// program is bound), gathered through value `gather` if any.
fn strided_load(dtype: DType, gather: Option<Value>) -> Def {
    Def::Load {
        dtype,
        source: Source::Input(0),
        dense: false,
        gather,
    }
}

/// The program of `defs` writing `outputs`, reading `inputs` bindings (the
/// merged rank and the wide flag are filled in at dispatch).
fn program(defs: Vec<Def>, outputs: Vec<Value>, inputs: usize) -> Program {
    Program {
        defs,
        outputs,
        inputs: inputs as u8,
        rank: 0,
        vec4: false,
    }
}

struct Builder<'g> {
    shape: Vec<usize>,
    /// Elementwise nodes this program computes (others must be evaluated).
    members: &'g HashSet<*const Node>,
    defs: Vec<Def>,
    loads: Vec<Load>,
    consts: Vec<u64>,
    memo: HashMap<(*const ArrayInner, AxisMap), Value>,
    const_memo: HashMap<(u64, DType), Value>,
    /// 0-d inputs of members (scalars): every axis of theirs is a
    /// broadcast, so one value per array whatever the path to it.
    scalars: HashMap<*const ArrayInner, Value>,
    /// In a GEMM epilogue: the product, whose value is the GEMM's result at
    /// the element (`Source::Acc`); no load is donated there.
    acc: Option<*const ArrayInner>,
}

/// A constant's compute-type bits (f32, f64, i32 or u32; see
/// `kernels::program::Bound::consts`) from the element bits `full` stores.
fn const_bits(bits: u64, dtype: DType) -> u64 {
    match dtype {
        DType::F16 => half::f16::from_bits(bits as u16).to_f32().to_bits() as u64,
        DType::BF16 => half::bf16::from_bits(bits as u16).to_f32().to_bits() as u64,
        DType::I8 => bits as u8 as i8 as i32 as u32 as u64,
        DType::I16 => bits as u16 as i16 as i32 as u32 as u64,
        _ => bits,
    }
}

impl<'g> Builder<'g> {
    /// An empty program over `shape` computing `members` (see `acc`).
    fn new(
        shape: &[usize],
        members: &'g HashSet<*const Node>,
        acc: Option<*const ArrayInner>,
    ) -> Builder<'g> {
        Builder {
            shape: shape.to_vec(),
            members,
            defs: Vec::with_capacity(members.len()),
            loads: Vec::new(),
            consts: Vec::new(),
            // About a value per member and one per load or view.
            memo: HashMap::with_capacity_and_hasher(2 * members.len(), Default::default()),
            const_memo: HashMap::default(),
            scalars: HashMap::default(),
            acc,
        }
    }

    /// Load `def` reads `storage` (of `array`) from its offset through
    /// `strides`, gathered where `gather` says: an operand the lowering
    /// places itself (a copy, a take), never donated.
    fn load_of(
        &mut self,
        def: Value,
        array: *const ArrayInner,
        storage: &Storage,
        strides: Vec<isize>,
        gather: Option<(isize, usize)>,
    ) {
        self.loads.push(Load {
            def,
            array,
            storage: storage.clone(),
            offset: storage.offset,
            strides,
            gather,
            donor: None,
        });
    }

    fn push(&mut self, def: Def) -> Value {
        self.defs.push(def);
        (self.defs.len() - 1) as Value
    }

    /// The value of `a`, whose axes reach the iteration space through `map`.
    /// `direct`: `a` is an input of an elementwise node this program
    /// computes (and computes nowhere else), so a load of it may be donated.
    fn value(&mut self, a: &Arc<ArrayInner>, map: &AxisMap, direct: bool) -> Result<Value> {
        // An array with one handle has one reader, one input slot of one
        // node (an output the program writes has another handle, the
        // caller's): the program reaches it once, so nothing is memoised.
        let once = Arc::strong_count(a) == 1;
        let key = (
            Arc::as_ptr(a),
            if once {
                AxisMap {
                    axes: SmallVec::new(),
                    starts: SmallVec::new(),
                }
            } else {
                map.clone()
            },
        );
        if !once && let Some(&v) = self.memo.get(&key) {
            return Ok(v);
        }
        if self.acc == Some(Arc::as_ptr(a)) {
            // Length-1 axes are broadcast (no axis), which is the identity.
            let same = map.starts.iter().all(|&s| s == 0)
                && map.axes.len() == a.shape.len()
                && map
                    .axes
                    .iter()
                    .enumerate()
                    .all(|(i, x)| *x == Some((i, 1)) || (x.is_none() && a.shape[i] == 1));
            if !same {
                return Err(Error::Internal(
                    "a GEMM epilogue reads the product through a view".into(),
                ));
            }
            let v = self.push(Def::Load {
                dtype: a.dtype,
                source: Source::Acc,
                dense: true,
                gather: None,
            });
            if !once {
                self.memo.insert(key, v);
            }
            return Ok(v);
        }
        let node = match a.pending_node() {
            None => return self.load(a, map, direct),
            Some(node) => node,
        };
        let v = match &node.primitive {
            Primitive::Full { bits } => {
                let bits = const_bits(*bits, a.dtype);
                match self.const_memo.get(&(bits, a.dtype)) {
                    Some(&v) => v,
                    None => {
                        let v = self.push(Def::Const { dtype: a.dtype });
                        self.consts.push(bits);
                        self.const_memo.insert((bits, a.dtype), v);
                        v
                    }
                }
            }
            Primitive::View(view) => {
                let x = &node.inputs[0].inner;
                let t = AxisMap::of_view(view, &x.shape, &a.shape).ok_or_else(|| {
                    Error::Internal("a fused view that strides cannot express".into())
                })?;
                // A view read only here (one handle: its reader's input
                // slot) passes donation on to what it views; one that
                // other kernels read too does not.
                self.value(x, &map.then(&t), direct && once)?
            }
            Primitive::Elementwise(op) if self.members.contains(&Arc::as_ptr(&node)) => {
                let mut args = kernel::Args::new();
                for x in &node.inputs {
                    let ptr = Arc::as_ptr(&x.inner);
                    // An input of the output's shape without length-1
                    // axes is broadcast by the identity: the map is
                    // unchanged.
                    let v = if x.inner.shape.is_empty() && self.acc != Some(ptr) {
                        match self.scalars.get(&ptr) {
                            Some(&v) => v,
                            None => {
                                let all = AxisMap {
                                    axes: smallvec![None; map.axes.len()],
                                    starts: SmallVec::new(),
                                };
                                let v = self.value(&x.inner, &all, true)?;
                                self.scalars.insert(ptr, v);
                                v
                            }
                        }
                    } else if x.inner.shape == a.shape && !a.shape.contains(&1) {
                        self.value(&x.inner, map, true)?
                    } else {
                        let t = AxisMap::broadcast(&x.inner.shape, &a.shape);
                        self.value(&x.inner, &map.then(&t), true)?
                    };
                    args.push(v);
                }
                let op = match op {
                    // DivMod's outputs are its quotient and its remainder.
                    ElementwiseOp::DivMod => {
                        let outs = node.outputs.get().map(|o| &o[..]).unwrap_or_default();
                        let k = outs
                            .iter()
                            .position(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(a)));
                        ElementwiseOp::Binary(match k {
                            Some(0) => BinaryOp::FloorDiv,
                            _ => BinaryOp::Remainder,
                        })
                    }
                    op => *op,
                };
                self.push(Def::Op {
                    op,
                    args,
                    dtype: a.dtype,
                })
            }
            _ => {
                return Err(Error::Internal(format!(
                    "a fused kernel reached an unevaluated {:?} node",
                    node.primitive
                )));
            }
        };
        if !once {
            self.memo.insert(key, v);
        }
        Ok(v)
    }

    /// A load of the evaluated array `a` through `map` (see `value` for
    /// `direct`).
    fn load(&mut self, a: &Arc<ArrayInner>, map: &AxisMap, direct: bool) -> Result<Value> {
        // Asked before `storage()` takes a reference of its own: the only
        // holder is the one node (or the one view) that reads it.
        let sole = direct && self.acc.is_none() && Arc::strong_count(a) == 1;
        let storage = a.storage()?;
        let (offset, strides) = map.apply(storage.offset, &storage.strides);
        // The buffer's holders: `a` and the clone just taken.
        let donor = (sole && Arc::strong_count(&storage.buffer) == 2)
            .then(|| donor_order(&self.shape, a.dtype, offset, &strides, &storage))
            .flatten();
        let def = self.push(strided_load(a.dtype, None));
        self.loads.push(Load {
            def,
            array: Arc::as_ptr(a),
            storage,
            offset,
            strides,
            gather: None,
            donor,
        });
        self.memo.insert((Arc::as_ptr(a), map.clone()), def);
        Ok(def)
    }
}

/// The order of the iteration axes (outermost first) in which a load at
/// element `offset` with `strides` over `shape` walks its buffer densely
/// from its first element, if there is one and the buffer is no more than
/// a page larger than an output of `shape` and `dtype` would be: then an
/// output may take the buffer (MLX's donation rule, `is_donatable` in
/// mlx/backend/common/utils.h, which allows 16 KiB of slack, so that a
/// small result does not keep a large buffer alive). Length-1 axes come
/// first; the identity when the load is dense in the iteration order.
/// Reached through a reshape, a slice that keeps a prefix of the buffer,
/// a transpose (a permuted order) or a broadcast that only adds length-1
/// axes; never through one that repeats elements (a stride 0 on a longer
/// axis) or reverses them.
fn donor_order(
    shape: &[usize],
    dtype: DType,
    offset: usize,
    strides: &[isize],
    storage: &Storage,
) -> Option<Order> {
    let n = crate::shape::numel(shape);
    let bytes = (n * dtype.size_in_bytes()) as u64;
    if n == 0 || storage.buffer.buffer().size() > round_size(bytes) + PAGE {
        return None;
    }
    dense_order(shape, offset, strides)
}

/// The order of `shape`'s axes (outermost first, length-1 axes first) in
/// which element `offset` and `strides` walk a buffer densely from its
/// first element; the identity where they do in the iteration order.
fn dense_order(shape: &[usize], offset: usize, strides: &[isize]) -> Option<Order> {
    if offset != 0 {
        return None;
    }
    let mut order: Order = (0..shape.len()).filter(|&d| shape[d] == 1).collect();
    let mut walked: Order = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
    // Outermost first: decreasing strides (a stable sort keeps the
    // identity where the load is dense already).
    walked.sort_by_key(|&d| std::cmp::Reverse(strides[d]));
    let mut step = 1isize;
    for &d in walked.iter().rev() {
        if strides[d] != step {
            return None;
        }
        step *= shape[d] as isize;
    }
    order.extend_from_slice(&walked);
    if order.windows(2).all(|w| w[0] < w[1]) || walked.windows(2).all(|w| w[0] < w[1]) {
        // Dense in the iteration order (length-1 axes go anywhere).
        return Some((0..shape.len()).collect());
    }
    Some(order)
}

/// Which buffers a finished program binds: distinct input buffers, and the
/// donated loads, which read through an output's binding (see
/// [`Binding`]; every donor of one program walks the same order).
fn bind(defs: &mut [Def], loads: &[Load], outputs: &[Value]) -> Binding {
    // An output may take a load's buffer when that load is the array's only
    // one, it is donatable and of the output's dtype.
    let mut per_array: HashMap<*const ArrayInner, usize> = HashMap::default();
    for l in loads {
        *per_array.entry(l.array).or_default() += 1;
    }
    let mut donor: Vec<Option<usize>> = vec![None; outputs.len()];
    let mut taken = vec![false; loads.len()];
    let mut order: Option<Order> = None;
    for (j, &o) in outputs.iter().enumerate() {
        let dtype = defs[o as usize].dtype();
        if let Some(li) = loads.iter().enumerate().position(|(li, l)| {
            !taken[li]
                && l.donor
                    .as_ref()
                    .is_some_and(|d| order.as_ref().is_none_or(|o| o == d))
                && l.gather.is_none()
                && per_array[&l.array] == 1
                && defs[l.def as usize].dtype() == dtype
        }) {
            donor[j] = Some(li);
            taken[li] = true;
            order = loads[li].donor.clone();
        }
    }
    let mut buffers: Vec<Arc<PooledBuffer>> = Vec::new();
    for (li, l) in loads.iter().enumerate() {
        let source = match donor.iter().position(|d| *d == Some(li)) {
            Some(j) => Source::Output(j as u8),
            None => {
                let i = match buffers
                    .iter()
                    .position(|b| Arc::ptr_eq(b, &l.storage.buffer))
                {
                    Some(i) => i,
                    None => {
                        buffers.push(Arc::clone(&l.storage.buffer));
                        buffers.len() - 1
                    }
                };
                Source::Input(i as u8)
            }
        };
        if let Def::Load { source: s, .. } = &mut defs[l.def as usize] {
            *s = source;
        }
    }
    let donated = donor
        .iter()
        .map(|d| d.map(|li| Arc::clone(&loads[li].storage.buffer)))
        .collect();
    Binding {
        buffers,
        donated,
        order,
    }
}

/// What [`bind`] decided: the input bindings' buffers, per output the
/// buffer it takes over (if any), and the order of the iteration axes the
/// donors walk densely (outermost first).
struct Binding {
    buffers: Vec<Arc<PooledBuffer>>,
    donated: Vec<Option<Arc<PooledBuffer>>>,
    order: Option<Order>,
}

/// Build, bind and encode a program writing `outputs` (arrays of one shape),
/// computing the pending elementwise nodes in `members` inline. Returns the
/// outputs' storages, in order.
pub(super) fn run(
    lw: &mut Lowering<'_>,
    members: &HashSet<*const Node>,
    outputs: &[Arc<ArrayInner>],
) -> Result<Vec<Storage>> {
    let shape = outputs[0].shape.clone();
    let mut b = Builder::new(&shape, members, None);
    let identity = AxisMap::identity(shape.len());
    let mut values = Vec::with_capacity(outputs.len());
    for o in outputs {
        values.push(b.value(o, &identity, false)?);
    }
    finish(lw, b, values)
}

/// Bind the builder's program, allocate its outputs and encode it.
///
/// The kernel walks the iteration space in the order its donors walk their
/// buffers (the order of the axes of `b.shape` the donors' strides give,
/// see [`donor_order`]), so that each thread reads a donated element where
/// it writes its result; every output is then laid out in that order, and
/// its storage's strides say so (a donor read through a transpose gives a
/// transposed result, as MLX's donation does).
fn finish(lw: &mut Lowering<'_>, mut b: Builder<'_>, values: Vec<Value>) -> Result<Vec<Storage>> {
    let Binding {
        buffers,
        donated,
        order,
    } = bind(&mut b.defs, &b.loads, &values);
    let order: Order = order.unwrap_or_else(|| (0..b.shape.len()).collect());
    let walk: Vec<usize> = order.iter().map(|&d| b.shape[d]).collect();
    let dense = crate::shape::contiguous_strides(&walk);
    // Each output's strides over `b.shape`: dense in the walk's order.
    let mut strides = vec![0isize; b.shape.len()];
    for (k, &d) in order.iter().enumerate() {
        strides[d] = dense[k];
    }
    let mut storages = Vec::with_capacity(values.len());
    for (&v, d) in values.iter().zip(donated) {
        storages.push(match d {
            Some(buffer) => Storage {
                buffer,
                strides: strides.clone(),
                offset: 0,
            },
            None => Storage {
                strides: strides.clone(),
                ..lw.alloc(&walk, b.defs[v as usize].dtype())?
            },
        });
    }
    let program = program(b.defs, values, buffers.len());
    let bound = Bound {
        shape: walk,
        loads: b
            .loads
            .iter()
            .map(|l| LoadData {
                offset: l.offset,
                strides: order.iter().map(|&d| l.strides[d]).collect(),
                gather: l.gather,
            })
            .collect(),
        consts: b.consts,
        inputs: buffers.iter().map(|b| b.buffer()).collect(),
        outputs: storages.iter().map(|s| s.buffer.buffer()).collect(),
    };
    let d = kernel::dispatch(lw.cx(), program, &bound)?;
    lw.push(d);
    Ok(storages)
}

/// A GEMM epilogue's program over `shape` (the product's), built like a
/// fused group's: `acc` is the product (the GEMM's result at the element),
/// `members` the elementwise nodes computed inline, `outputs` the values
/// written (the product too, if it is one of them).
pub(super) struct EpilogueProgram {
    pub program: Program,
    /// One per `Def::Load`, in order (the `Acc` load's is unused).
    pub loads: Vec<LoadData>,
    pub consts: Vec<u64>,
    /// The input bindings' buffers.
    pub buffers: Vec<Arc<PooledBuffer>>,
    /// The outputs' storages, in order.
    pub storages: Vec<Storage>,
}

/// Build and bind the epilogue program of a GEMM whose product is `acc`
/// (see [`EpilogueProgram`]) and allocate its outputs.
pub(super) fn epilogue(
    lw: &mut Lowering<'_>,
    members: &HashSet<*const Node>,
    acc: &Arc<ArrayInner>,
    outputs: &[Arc<ArrayInner>],
) -> Result<EpilogueProgram> {
    let shape = acc.shape.clone();
    let mut b = Builder::new(&shape, members, Some(Arc::as_ptr(acc)));
    let identity = AxisMap::identity(shape.len());
    let mut values = Vec::with_capacity(outputs.len());
    for o in outputs {
        values.push(b.value(o, &identity, false)?);
    }
    let buffers = bind(&mut b.defs, &b.loads, &values).buffers;
    let mut storages = Vec::with_capacity(values.len());
    for &v in &values {
        storages.push(lw.alloc(&shape, b.defs[v as usize].dtype())?);
    }
    let mut loads = b.loads.iter();
    let dense = crate::shape::contiguous_strides(&shape);
    let loads = b
        .defs
        .iter()
        .filter_map(|d| match d {
            Def::Load {
                source: Source::Acc,
                ..
            } => Some(LoadData {
                offset: 0,
                strides: dense.clone(),
                gather: None,
            }),
            Def::Load { .. } => loads.next().map(Load::data),
            _ => None,
        })
        .collect();
    Ok(EpilogueProgram {
        program: program(b.defs, values, buffers.len()),
        loads,
        consts: b.consts,
        buffers,
        storages,
    })
}

/// A reduction's prologue program (`kernels::reduce`): the pending value
/// `input` (the reduction's input) computed from the elementwise nodes in
/// `members`, over `input`'s shape, then the values written beside it
/// (`extras`, of that shape); no load is donated.
pub(super) struct PrologueProgram {
    pub program: Program,
    /// One per `Def::Load`, in order.
    pub loads: Vec<LoadData>,
    pub consts: Vec<u64>,
    /// The input bindings' buffers.
    pub buffers: Vec<Arc<PooledBuffer>>,
}

/// Build and bind the prologue program that computes `input` and writes
/// `extras` (see [`PrologueProgram`]).
pub(super) fn prologue(
    members: &HashSet<*const Node>,
    input: &Arc<ArrayInner>,
    extras: &[Arc<ArrayInner>],
) -> Result<PrologueProgram> {
    let mut b = Builder::new(&input.shape, members, None);
    let identity = AxisMap::identity(input.shape.len());
    let mut values = vec![b.value(input, &identity, false)?];
    for x in extras {
        values.push(b.value(x, &identity, false)?);
    }
    for l in &mut b.loads {
        l.donor = None;
    }
    let buffers = bind(&mut b.defs, &b.loads, &values).buffers;
    let loads = b.loads.iter().map(Load::data).collect();
    Ok(PrologueProgram {
        program: program(b.defs, values, buffers.len()),
        loads,
        consts: b.consts,
        buffers,
    })
}

/// Run a fused group: `members` are its nodes, `outputs` the values it
/// writes. Each output takes its storage and lets go of its node. A group
/// with a matmul runs as that GEMM with the rest as its epilogue, one with
/// a reduction as that reduction with the rest as its prologue.
pub(crate) fn group(
    lw: &mut Lowering<'_>,
    members: &[&Arc<Node>],
    outputs: &[Arc<ArrayInner>],
) -> Result<()> {
    let set: HashSet<*const Node> = members
        .iter()
        .filter(|n| matches!(n.primitive, Primitive::Elementwise(_)))
        .map(|n| Arc::as_ptr(n))
        .collect();
    if outputs.is_empty() {
        return Ok(());
    }
    let led = |p: fn(&Primitive) -> bool| members.iter().find(|n| p(&n.primitive));
    let storages = if let Some(mm) = led(Primitive::is_gemm) {
        super::matmul::with_epilogue(lw, mm, &set, outputs)?
    } else if let Some(red) = led(|p| matches!(p, Primitive::Reduce { .. })) {
        super::reduce::with_prologue(lw, red, &set, outputs)?
    } else {
        run(lw, &set, outputs)?
    };
    for (o, s) in outputs.iter().zip(storages) {
        drop(o.set_state(State::Ready(s)));
    }
    Ok(())
}

/// One elementwise or constant node on its own: its live outputs, with
/// every input evaluated (or a constant or view).
pub(crate) fn node(
    lw: &mut Lowering<'_>,
    node: &Arc<Node>,
    outputs: &[Option<Arc<ArrayInner>>],
) -> Lowered {
    let live: Vec<Arc<ArrayInner>> = outputs.iter().flatten().cloned().collect();
    if live.is_empty() {
        return Ok(outputs.iter().map(|_| None).collect());
    }
    let set: HashSet<*const Node> = [Arc::as_ptr(node)].into_iter().collect();
    let mut storages = run(lw, &set, &live)?.into_iter();
    Ok(outputs
        .iter()
        .map(|o| o.as_ref().and_then(|_| storages.next()))
        .collect())
}

/// A dense copy of `src` (an array of `shape` and `dtype`).
pub(super) fn copy(
    lw: &mut Lowering<'_>,
    src: &Storage,
    shape: &[usize],
    dtype: DType,
) -> Result<Storage> {
    if dtype.is_quantized() {
        // Whole blocks, as bytes; the copy is then seen in elements.
        let (bytes, view) = super::quant::byte_view("copy", shape, src, dtype)?;
        let dense = copy(lw, &view, &bytes, DType::U8)?;
        return Ok(dense.view(crate::shape::contiguous_strides(shape), 0));
    }
    let members = HashSet::default();
    let mut b = Builder::new(shape, &members, None);
    b.defs = vec![strided_load(dtype, None)];
    b.load_of(0, std::ptr::null(), src, src.strides.clone(), None);
    Ok(finish(lw, b, vec![0])?.pop().expect("one output"))
}

/// Split along `axis`: each live output is a dense copy of its part; dead
/// outputs are skipped, since nobody can read them.
pub(super) fn split(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    axis: usize,
    starts: &[usize],
) -> Lowered {
    let src = &io.storages[0];
    let dtype = io.input(0).dtype;
    let shape = &io.input(0).shape;
    // Every live, non-empty part by one dispatch (kernels/split.rs).
    let live: Vec<usize> = (0..starts.len())
        .filter(|&i| {
            io.outputs[i]
                .as_ref()
                .is_some_and(|o| o.shape.iter().product::<usize>() > 0)
        })
        .collect();
    if !dtype.is_quantized()
        && live.len() > 1
        && crate::kernels::split::fits(shape.len(), dtype.size_in_bytes(), live.len())
    {
        let mut results: Vec<Option<Storage>> = starts.iter().map(|_| None).collect();
        for &i in &live {
            let o = io.outputs[i].as_ref().expect("live");
            results[i] = Some(lw.alloc(&o.shape, dtype)?);
        }
        let parts: Vec<crate::kernels::split::Part<'_>> = live
            .iter()
            .map(|&i| crate::kernels::split::Part {
                start: starts[i],
                len: io.outputs[i].as_ref().expect("live").shape[axis],
                out: results[i].as_ref().expect("allocated").buffer.buffer(),
            })
            .collect();
        let operand = io.operand(0, src.strides.clone());
        let d = crate::kernels::split::split(lw.cx(), &operand, shape, axis, &parts)?;
        drop(parts);
        lw.push(d);
        // Empty live parts: dense copies of nothing.
        for (i, o) in io.outputs.iter().enumerate() {
            if let (Some(o), None) = (o, &results[i]) {
                results[i] = Some(copy(lw, src, &o.shape, dtype)?);
            }
        }
        return Ok(results);
    }
    let mut results = Vec::with_capacity(starts.len());
    for (o, &start) in io.outputs.iter().zip(starts) {
        results.push(match o {
            Some(o) => {
                let offset = src.offset as isize + start as isize * src.strides[axis];
                let part = src.view(src.strides.clone(), offset as usize);
                Some(copy(lw, &part, &o.shape, dtype)?)
            }
            None => None,
        });
    }
    Ok(results)
}

/// NumPy `take` along `axis`. Over the output's axes `[pre.., index..,
/// post..]`, `x` moves along pre and post and the indices along their own
/// axes; the gather adds the clamped `index * x_stride[axis]`.
pub(super) fn take(lw: &mut Lowering<'_>, io: &NodeIo<'_>, axis: usize) -> Lowered {
    let o = io.output()?;
    let (x, xs) = (io.input(0), &io.storages[0]);
    if x.dtype.is_quantized() {
        // Whole rows of blocks (the op takes along a leading axis), as
        // bytes; the result is then seen in elements.
        let (x_bytes, x_view) = super::quant::byte_view("take", &x.shape, xs, x.dtype)?;
        let mut out_bytes = o.shape.clone();
        if let (Some(l), Some(&b)) = (out_bytes.last_mut(), x_bytes.last()) {
            *l = b;
        }
        let s = gather(lw, io, &x_bytes, &x_view, DType::U8, &out_bytes, axis)?;
        return Ok(vec![Some(
            s.view(crate::shape::contiguous_strides(&o.shape), 0),
        )]);
    }
    let s = gather(lw, io, &x.shape, xs, x.dtype, &o.shape, axis)?;
    Ok(vec![Some(s)])
}

/// The gather of [`take`]: `x` (of `x_shape` and `dtype`, read through
/// `xs`) at input 1's indices along `axis`, into a dense `out_shape`.
fn gather(
    lw: &mut Lowering<'_>,
    io: &NodeIo<'_>,
    x_shape: &[usize],
    xs: &Storage,
    dtype: DType,
    out_shape: &[usize],
    axis: usize,
) -> Result<Storage> {
    let idx = io.input(1);
    let is = &io.storages[1];
    let k = idx.shape.len();
    let mut x_strides = xs.strides[..axis].to_vec();
    x_strides.extend(std::iter::repeat_n(0, k));
    x_strides.extend_from_slice(&xs.strides[axis + 1..]);
    let mut i_strides = vec![0; axis];
    i_strides.extend_from_slice(&is.strides);
    i_strides.extend(std::iter::repeat_n(0, x_shape.len() - axis - 1));
    let members = HashSet::default();
    let mut b = Builder::new(out_shape, &members, None);
    b.defs = vec![strided_load(idx.dtype, None), strided_load(dtype, Some(0))];
    let inputs = &io.node.inputs;
    b.load_of(0, Arc::as_ptr(&inputs[1].inner), is, i_strides, None);
    let gather = Some((xs.strides[axis], x_shape[axis]));
    b.load_of(1, Arc::as_ptr(&inputs[0].inner), xs, x_strides, gather);
    Ok(finish(lw, b, vec![1])?.pop().expect("one output"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_maps_compose_like_views() {
        // A [2, 3] array transposed, then its last axis reversed.
        let t = AxisMap::of_view(&View::Permute(vec![1, 0]), &[2, 3], &[3, 2]).unwrap();
        let r = AxisMap::of_view(
            &View::Slice {
                starts: vec![0, 1],
                steps: vec![1, -1],
            },
            &[3, 2],
            &[3, 2],
        )
        .unwrap();
        let m = AxisMap::identity(2).then(&r).then(&t);
        // out[i, j] = x.T[i, 1 - j] = x[1 - j, i]: offset 3, strides [1, -3].
        assert_eq!(m.apply(0, &[3, 1]), (3, vec![1, -3]));
        assert!(!m.is_identity());
        assert!(AxisMap::identity(3).is_identity());
        // Broadcasting [3] to [2, 3], then a size-1 reshape of [2, 3] to
        // [2, 1, 3]: the first axis is broadcast.
        let b = AxisMap::broadcast(&[3], &[2, 3]);
        let r = AxisMap::of_view(&View::Reshape, &[2, 3], &[2, 1, 3]).unwrap();
        assert_eq!(
            AxisMap::identity(3).then(&r).then(&b).apply(5, &[1]),
            (5, vec![0, 0, 1])
        );
        assert!(AxisMap::of_view(&View::Reshape, &[2, 3], &[3, 2]).is_none());
    }

    #[test]
    fn dense_orders_follow_the_buffer() {
        let o = |shape: &[usize], offset, strides: &[isize]| {
            dense_order(shape, offset, strides).map(|o| o.to_vec())
        };
        // Dense, a length-1 axis with any stride, a transpose of [2, 3, 4].
        assert_eq!(o(&[2, 3], 0, &[3, 1]), Some(vec![0, 1]));
        assert_eq!(o(&[2, 1, 3], 0, &[3, 0, 1]), Some(vec![0, 1, 2]));
        assert_eq!(o(&[4, 3, 2], 0, &[1, 4, 12]), Some(vec![2, 1, 0]));
        assert_eq!(o(&[3, 1, 2], 0, &[1, 7, 3]), Some(vec![1, 2, 0]));
        // Not from the first element, a gap, a repeat, a reversal.
        assert_eq!(o(&[2, 3], 1, &[3, 1]), None);
        assert_eq!(o(&[2, 3], 0, &[4, 1]), None);
        assert_eq!(o(&[2, 3], 0, &[0, 1]), None);
        assert_eq!(o(&[2, 3], 0, &[3, -1]), None);
    }
}
