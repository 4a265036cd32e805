//! Generated elementwise kernels: a [`Program`] (loads, constants and ops in
//! topological order, some of them written out) becomes one WGSL compute
//! shader, one thread per output element (two for 2-byte outputs, four for
//! 1-byte ones, so that every thread writes whole words and no two threads
//! share one).
//!
//! Every elementwise dispatch goes through here: one op alone (the unfused
//! path) or a fused chain of them (`graph::fuse`). A program is keyed by its
//! structure (ops, dtypes, which loads are dense, the rank of the iteration
//! space after merging dimensions); sizes, strides, offsets and constant
//! values are parameters, so a new shape or a new scalar does not compile a
//! new pipeline.
//!
//! Each value is held in its dtype's compute type (f32 for every float
//! dtype but f64, f64, i32 for signed and u32 for unsigned integers and
//! bool) and rounded to its own dtype after the op that makes it (f16 and
//! bf16 through their bits, bools to 0 or 1, floats to integers saturating,
//! integers wrapping to their width), exactly as if it had been stored and
//! loaded again: a fused program gives the bits of the unfused ops.

use super::elementwise::{
    bits_type, compute_type, decode, element_bits, encode, op_compute_type, op_wgsl,
};
use super::{
    CONVERT, Context, Dispatch, Kernel, MATH, MATH_F64, PARAMS_WORDS, Params, QuickKey, Spec,
};
use crate::graph::primitive::ElementwiseOp;
use crate::shape::contiguous_strides;
use crate::{DType, Error, Result};

mod wide;

pub(crate) use wide::RowLoad;

/// The most dimensions an elementwise iteration space has (after merging).
pub(crate) const MAX_RANK: usize = 8;

/// Generated programs; the whole body is one substitution.
pub(crate) static PROGRAM: Kernel = Kernel {
    name: "elementwise",
    prelude: &[CONVERT, MATH],
    source: "{{BODY}}",
    reads: 0,
    writes: 1,
};

/// Generated programs that touch f64: the f64 helpers too (they need
/// `SHADER_F64` and `SHADER_INT64`, so other programs go without them).
pub(crate) static PROGRAM_F64: Kernel = Kernel {
    name: "elementwise_f64",
    prelude: &[CONVERT, MATH, MATH_F64],
    source: "{{BODY}}",
    reads: 0,
    writes: 1,
};

/// A value of a program: the index of its [`Def`].
pub(crate) type Value = u16;

/// An op's arguments: inline (an op takes at most three), so building and
/// cloning a program (its cache key) allocates per program, not per op.
pub(crate) type Args = smallvec::SmallVec<[Value; 3]>;

/// Where a load reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    /// Read-only input binding `i`.
    Input(u8),
    /// Output `j`'s binding: a donated input, read at the element this
    /// thread writes before it writes it.
    Output(u8),
    /// No buffer: the GEMM's result at this element (`acc`, f32), in a
    /// GEMM's fused epilogue (`kernels::gemm::common::epilogue`) only. Its load data is
    /// unused.
    Acc,
}

/// One definition of a program, in topological order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Def {
    /// An element of a buffer. `dense`: at `offset + e` (filled in by
    /// [`dispatch`]); `gather`: at the strided offset plus the clamped index
    /// value times the axis stride (NumPy `take`, mode clip).
    Load {
        dtype: DType,
        source: Source,
        dense: bool,
        gather: Option<Value>,
    },
    /// A parameter word holding a constant of `dtype`.
    Const { dtype: DType },
    /// An elementwise op (Cast, Copy, Unary, Binary or Where) on earlier
    /// values, rounded to `dtype`.
    Op {
        op: ElementwiseOp,
        args: Args,
        dtype: DType,
    },
}

impl Def {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Def::Load { dtype, .. } | Def::Const { dtype } | Def::Op { dtype, .. } => *dtype,
        }
    }

    /// A load of `source` without a gather (the sample programs of the
    /// portability tests).
    #[cfg(test)]
    pub(crate) fn load(dtype: DType, source: Source, dense: bool) -> Def {
        Def::Load {
            dtype,
            source,
            dense,
            gather: None,
        }
    }

    /// `op` of the values `args` (the sample programs of the portability
    /// tests).
    #[cfg(test)]
    pub(crate) fn op(op: ElementwiseOp, args: Vec<Value>, dtype: DType) -> Def {
        Def::Op {
            op,
            args: args.into(),
            dtype,
        }
    }
}

/// A program's structure: everything its WGSL depends on, and nothing else.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Program {
    pub defs: Vec<Def>,
    /// Values written out, in order: output `j` is a dense array of the
    /// iteration shape in its value's dtype.
    pub outputs: Vec<Value>,
    /// Read-only input bindings.
    pub inputs: u8,
    /// The rank of the iteration space after merging dimensions.
    pub rank: u8,
    /// The wide variant (`wide.rs`): `array<vec4<u32>>` bindings, several
    /// consecutive elements per thread, every load dense or one element
    /// for all (a broadcast scalar). [`dispatch`] chooses it; never in a
    /// GEMM epilogue.
    pub vec4: bool,
}

/// The runtime side of one load: element offset and strides over the
/// iteration shape (two's complement), and for a gather the axis stride and
/// length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LoadData {
    pub offset: usize,
    pub strides: Vec<isize>,
    pub gather: Option<(isize, usize)>,
}

/// Everything a program needs at dispatch besides its structure.
pub(crate) struct Bound<'a> {
    /// The iteration shape: every output's shape.
    pub shape: Vec<usize>,
    /// One per `Def::Load`, in order.
    pub loads: Vec<LoadData>,
    /// One per `Def::Const`, in order: the constant's bits as its dtype's
    /// compute type (f32 bits, i32, u32 in the low word; f64 bits).
    pub consts: Vec<u64>,
    pub inputs: Vec<&'a wgpu::Buffer>,
    pub outputs: Vec<&'a wgpu::Buffer>,
}

impl Program {
    /// Elements each thread computes: 4 when an output is 1 byte wide, 2
    /// when one is 2 bytes wide, else 1 (a thread writes whole words).
    fn elems_per_thread(&self) -> usize {
        if self.vec4 {
            return wide::elements(self);
        }
        self.outputs
            .iter()
            .map(|&v| 4 / self.defs[v as usize].dtype().size_in_bytes().min(4))
            .max()
            .unwrap_or(1)
    }

    /// Whether any value is f64 (the program needs [`PROGRAM_F64`]).
    pub(super) fn uses_f64(&self) -> bool {
        self.defs.iter().any(|d| d.dtype() == DType::F64)
    }

    /// Parameter layout after `head` words: per load its offset, then its
    /// strides over each index space of `ranks` (the elementwise kernel has
    /// one, unless the load is dense; a reduction has the kept and the
    /// reduced axes), its gather stride and length; then the constants (two
    /// words for f64, low first).
    pub(super) fn layout(&self, head: usize, ranks: &[usize]) -> Layout {
        let mut w = head;
        let (mut loads, mut gathers, mut consts) = (Vec::new(), Vec::new(), Vec::new());
        for d in &self.defs {
            match d {
                Def::Load { dense, gather, .. } => {
                    loads.push(w);
                    w += 1;
                    if !dense {
                        w += ranks.iter().sum::<usize>();
                    }
                    gathers.push(gather.map(|_| w));
                    if gather.is_some() {
                        w += 2;
                    }
                }
                Def::Const { dtype } => {
                    consts.push(w);
                    w += if *dtype == DType::F64 { 2 } else { 1 };
                }
                Def::Op { .. } => {}
            }
        }
        Layout {
            loads,
            gathers,
            consts,
            words: w.next_multiple_of(PARAMS_WORDS),
        }
    }

    /// The uniform parameter block and the storage bindings: inputs
    /// `in{i}` from binding 1, then `outputs` (read-write, by name).
    pub(super) fn bindings(&self, words: usize, outputs: &[String]) -> String {
        let mut s = format!(
            "struct Params {{\n    w: array<vec4<u32>, {}>,\n}}\n\
             @group(0) @binding(0) var<uniform> p: Params;\n",
            words / 4
        );
        let word = if self.vec4 { "vec4<u32>" } else { "u32" };
        let outputs: Vec<(String, &str)> = outputs.iter().map(|o| (o.clone(), word)).collect();
        s.push_str(&self.storage_bindings(1, &outputs));
        s.push_str(&self.functions());
        s
    }

    /// The storage bindings from binding `first` on: inputs `in{i}`, then
    /// `outputs` (read-write, by name and element type).
    pub(super) fn storage_bindings(&self, first: usize, outputs: &[(String, &str)]) -> String {
        let mut s = String::new();
        let word = if self.vec4 { "vec4<u32>" } else { "u32" };
        for i in 0..self.inputs {
            s.push_str(&format!(
                "@group(0) @binding({}) var<storage, read> in{i}: array<{word}>;\n",
                first + i as usize
            ));
        }
        for (j, (name, ty)) in outputs.iter().enumerate() {
            s.push_str(&format!(
                "@group(0) @binding({}) var<storage, read_write> {name}: array<{ty}>;\n",
                first + self.inputs as usize + j
            ));
        }
        s
    }

    /// Definition `Op { op, args, dtype }`'s argument dtypes, the compute
    /// type it works in, and its WGSL expression and that expression's
    /// type (as [`op_wgsl`] gives them).
    fn op_types(
        &self,
        op: ElementwiseOp,
        args: &Args,
        dtype: DType,
    ) -> (Vec<DType>, &'static str, (String, &'static str)) {
        let in_dtypes: Vec<DType> = args
            .iter()
            .map(|&a| self.defs[a as usize].dtype())
            .collect();
        let ct = op_compute_type(op, &in_dtypes, dtype);
        let wgsl = op_wgsl(op, ct, &in_dtypes);
        (in_dtypes, ct, wgsl)
    }

    /// The helper functions the statements call: `gather_index` and one
    /// function per op, its arguments in the op's own types.
    pub(super) fn functions(&self) -> String {
        let mut s = String::new();
        s.push_str(
            "\nfn gather_index(i: i32, len: u32) -> u32 {\n    var j = i;\n    if j < 0 {\n        j += i32(len);\n    }\n    return u32(clamp(j, 0, i32(len) - 1));\n}\n",
        );
        // One function per op: its arguments in the op's own types.
        for (k, d) in self.defs.iter().enumerate() {
            if let Def::Op { op, args, dtype } = d {
                let (in_dtypes, ct, (expr, rt)) = self.op_types(*op, args, *dtype);
                let params: Vec<String> = in_dtypes
                    .iter()
                    .enumerate()
                    .map(|(i, &a)| format!("x{i}: {}", arg_type(*op, i, a, ct)))
                    .collect();
                s.push_str(&format!(
                    "fn op{k}({}) -> {rt} {{\n    return {expr};\n}}\n",
                    params.join(", ")
                ));
            }
        }
        s
    }

    /// The statements that compute every definition `v{k}` in order. Load
    /// `i` (in load order) reads at `address(i, word of its offset)` plus,
    /// for a gather, the clamped index times the axis stride; in the wide
    /// variant it decodes the bits `l{i}` its caller loaded.
    pub(super) fn statements(
        &self,
        layout: &Layout,
        address: &dyn Fn(usize, usize) -> String,
    ) -> String {
        let mut s = String::new();
        let (mut li, mut ci) = (0, 0);
        for (k, d) in self.defs.iter().enumerate() {
            let ct = compute_type(d.dtype());
            match d {
                Def::Load {
                    dtype,
                    source,
                    dense: _,
                    gather,
                } => {
                    if self.vec4 {
                        s.push_str(&format!(
                            "    let v{k}: {ct} = {};\n",
                            decode(*dtype, &format!("l{li}"))
                        ));
                        li += 1;
                        continue;
                    }
                    let w = layout.loads[li];
                    let mut addr = address(li, w);
                    if let (Some(g), Some(gw)) = (gather, layout.gathers[li]) {
                        let (stride, len) = (pw(gw), pw(gw + 1));
                        let idx = format!("v{g}");
                        let index = if compute_type(self.defs[*g as usize].dtype()) == "u32" {
                            format!("min({idx}, {len} - 1u)")
                        } else {
                            format!("gather_index({idx}, {len})")
                        };
                        addr = format!("({addr}) + {index} * {stride}");
                    }
                    li += 1;
                    let array = match source {
                        Source::Input(i) => format!("in{i}"),
                        Source::Output(j) => format!("o{j}"),
                        Source::Acc => {
                            // Rounded to its dtype, as the GEMM's store
                            // and a load would.
                            let bits = encode(*dtype, "acc", "f32");
                            s.push_str(&format!(
                                "    let v{k}: {ct} = {};\n",
                                decode(*dtype, &bits)
                            ));
                            continue;
                        }
                    };
                    let bits = element_bits(*dtype, &array, &format!("a{k}"));
                    s.push_str(&format!(
                        "    let a{k} = {addr};\n    let v{k}: {ct} = {};\n",
                        decode(*dtype, &bits)
                    ));
                }
                Def::Const { .. } => {
                    let w = pw(layout.consts[ci]);
                    let value = match ct {
                        "f32" => format!("bitcast<f32>({w})"),
                        "i32" => format!("bitcast<i32>({w})"),
                        "f64" => format!(
                            "bitcast<f64>(word_pair({w}, {}))",
                            pw(layout.consts[ci] + 1)
                        ),
                        _ => w,
                    };
                    ci += 1;
                    s.push_str(&format!("    let v{k}: {ct} = {value};\n"));
                }
                Def::Op { op, args, dtype } => {
                    let (in_dtypes, op_ct, (_, rt)) = self.op_types(*op, args, *dtype);
                    let call: Vec<String> = args
                        .iter()
                        .enumerate()
                        .map(|(i, &a)| {
                            let have = compute_type(in_dtypes[i]);
                            let want = arg_type(*op, i, in_dtypes[i], op_ct);
                            if have == want {
                                format!("v{a}")
                            } else {
                                format!("{want}(v{a})")
                            }
                        })
                        .collect();
                    // Round to the value's own dtype, as a store and a
                    // load would.
                    let bits = encode(*dtype, &format!("op{k}({})", call.join(", ")), rt);
                    s.push_str(&format!(
                        "    let v{k}: {ct} = {};\n",
                        decode(*dtype, &bits)
                    ));
                }
            }
        }
        s
    }

    /// The statements of [`Program::statements`] at element `e` of the
    /// iteration space (a dense load at its offset plus `e`, a strided one
    /// through `e` unravelled over the merged shape, whose sizes are at
    /// words `4..4 + rank`): the body shared by the elementwise kernel and
    /// the GEMM epilogue (`kernels::gemm::common::epilogue`).
    pub(super) fn element_statements(&self, layout: &Layout) -> String {
        let rank = self.rank as usize;
        let mut s = String::new();
        let strided = self.defs.iter().any(|d| {
            matches!(
                d,
                Def::Load { dense: false, .. }
                    | Def::Load {
                        gather: Some(_),
                        ..
                    }
            )
        });
        if strided && rank > 0 && !self.vec4 {
            s.push_str(&unravel("e", "i", 4, rank));
        }
        let dense: Vec<bool> = self
            .defs
            .iter()
            .filter_map(|d| match d {
                Def::Load { dense, .. } => Some(*dense),
                _ => None,
            })
            .collect();
        let address = |li: usize, w: usize| {
            if dense[li] {
                format!("{} + e", pw(w))
            } else {
                let mut a = pw(w);
                for dim in 0..rank {
                    a.push_str(&format!(" + i{dim} * {}", pw(w + 1 + dim)));
                }
                a
            }
        };
        s.push_str(&self.statements(layout, &address));
        s
    }

    /// The WGSL of this program as an elementwise kernel, in the rows
    /// geometry of the wide variant when `rows` gives its loads' kinds
    /// (`wide::rows`).
    fn wgsl_with(&self, rows: Option<&[wide::RowLoad]>) -> String {
        let rank = self.rank as usize;
        let layout = self.layout(4 + rank, &[rank]);
        let outputs: Vec<String> = (0..self.outputs.len()).map(|j| format!("o{j}")).collect();
        let mut s = self.bindings(layout.words, &outputs);
        // `compute` returns every output's bits as words: one each, two
        // (low, high) for f64. Output j's first word is slot[j].
        let mut slot = Vec::with_capacity(self.outputs.len());
        let mut slots = 0;
        for &v in &self.outputs {
            slot.push(slots);
            slots += if self.defs[v as usize].dtype() == DType::F64 {
                2
            } else {
                1
            };
        }
        // The wide variant's caller loads: `compute` takes each load's bits.
        let bits: String = self
            .defs
            .iter()
            .filter_map(|d| match d {
                Def::Load { dtype, .. } if self.vec4 => Some(*dtype),
                _ => None,
            })
            .enumerate()
            .map(|(li, d)| format!(", l{li}: {}", bits_type(d)))
            .collect();
        s.push_str(&format!(
            "\nfn compute(e: u32{bits}) -> array<u32, {slots}> {{\n"
        ));
        s.push_str(&self.element_statements(&layout));
        let mut words = Vec::with_capacity(slots);
        for (j, &v) in self.outputs.iter().enumerate() {
            let d = self.defs[v as usize].dtype();
            let bits = encode(d, &format!("v{v}"), compute_type(d));
            if bits_type(d) == "u64" {
                s.push_str(&format!("    let b{j} = {bits};\n"));
                words.push(format!("u32(b{j})"));
                words.push(format!("u32(b{j} >> 32u)"));
            } else {
                words.push(bits);
            }
        }
        s.push_str(&format!(
            "    return array<u32, {slots}>({});\n}}\n",
            words.join(", ")
        ));
        if self.vec4 {
            match rows {
                Some(kinds) => s.push_str(&wide::rows_main(self, &layout, &slot, kinds)),
                None => s.push_str(&wide::main(self, &layout, &slot)),
            }
            return s;
        }
        s.push_str(&format!(
            "\n@compute @workgroup_size({WG})\n\
             fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n\
             \x20   let t = gid.x + gid.y * nwg.x * {WG}u;\n\
             \x20   let n = {};\n",
            pw(0)
        ));
        // Thread t computes elements e .. e + epl (those below n; the rest
        // are 0, the padding of a packed output's last word) and writes
        // whole words of every output: the packed ones' words hold
        // consecutive elements, so no word is shared between threads.
        let epl = self.elems_per_thread();
        s.push_str(&format!(
            "    let e = {epl}u * t;\n    if e >= n {{\n        return;\n    }}\n    let r0 = compute(e);\n"
        ));
        for q in 1..epl {
            s.push_str(&format!(
                "    var r{q} = array<u32, {slots}>();\n    if e + {q}u < n {{\n        r{q} = compute(e + {q}u);\n    }}\n"
            ));
        }
        for (j, &v) in self.outputs.iter().enumerate() {
            let size = self.defs[v as usize].dtype().size_in_bytes();
            let w = slot[j];
            // Word q of this thread's share holds elements e + q * per ..;
            // it is written when its first element is below n.
            let per = (4 / size).max(1);
            for q in 0..(epl / per) {
                let first = q * per;
                let guard = if first > 0 {
                    format!("if e + {first}u < n ")
                } else {
                    String::new()
                };
                let stmt = match size {
                    8 => format!(
                        "o{j}[2u * (e + {first}u)] = r{first}[{w}]; o{j}[2u * (e + {first}u) + 1u] = r{first}[{}];",
                        w + 1
                    ),
                    4 => format!("o{j}[e + {first}u] = r{first}[{w}];"),
                    _ => {
                        let parts: Vec<String> = (0..per)
                            .map(|k| format!("(r{}[{w}] << {}u)", first + k, 8 * size * k))
                            .collect();
                        format!("o{j}[(e / {per}u) + {q}u] = {};", parts.join(" | "))
                    }
                };
                if guard.is_empty() {
                    s.push_str(&format!("    {stmt}\n"));
                } else {
                    s.push_str(&format!("    {guard}{{\n        {stmt}\n    }}\n"));
                }
            }
        }
        s.push_str("}\n");
        s
    }

    /// The kernel specialisation of this program.
    pub(crate) fn spec(&self) -> (Spec, &'static Kernel) {
        self.spec_with(None)
    }

    /// [`Program::spec`], in the rows geometry when `rows` says so.
    fn spec_with(&self, rows: Option<&[wide::RowLoad]>) -> (Spec, &'static Kernel) {
        let rank = self.rank as usize;
        let layout = self.layout(4 + rank, &[rank]);
        let kernel = if self.uses_f64() {
            &PROGRAM_F64
        } else {
            &PROGRAM
        };
        let (mut spec, kernel) = kernel.spec_with_bindings(
            &[("BODY", &self.wgsl_with(rows))],
            self.inputs as u32,
            self.outputs.len() as u32,
        );
        spec.params = layout.words as u32;
        (spec, kernel)
    }
}

/// Where a program's parameter words are.
pub(super) struct Layout {
    /// Each load's offset word (its strides follow it).
    pub loads: Vec<usize>,
    /// Each load's gather stride word (the length follows it).
    pub gathers: Vec<Option<usize>>,
    /// Each constant's word.
    pub consts: Vec<usize>,
    /// Words in all, a multiple of [`PARAMS_WORDS`].
    pub words: usize,
}

/// Parameter word `i`, as a WGSL expression.
pub(super) fn pw(i: usize) -> String {
    format!("p.w[{}].{}", i / 4, ["x", "y", "z", "w"][i % 4])
}

/// Straight-line row-major unravel of `index` into `{name}0..` over the
/// `rank` sizes at words `first..` (llvmpipe counts every loop iteration).
pub(super) fn unravel(index: &str, name: &str, first: usize, rank: usize) -> String {
    let mut s = format!("    var rem_{name} = {index};\n");
    for d in (1..rank).rev() {
        let size = pw(first + d);
        s.push_str(&format!(
            "    let {name}{d} = rem_{name} % {size};\n    rem_{name} = rem_{name} / {size};\n"
        ));
    }
    s.push_str(&format!("    let {name}0 = rem_{name};\n"));
    s
}

/// Threads per workgroup.
const WG: u32 = super::WORKGROUP;

/// The WGSL type op argument `i` (of dtype `d`) is passed as: Where's
/// condition and a gather's index keep their own compute type, every other
/// argument takes the op's.
fn arg_type(op: ElementwiseOp, i: usize, d: DType, op_ct: &'static str) -> &'static str {
    match (op, i) {
        (ElementwiseOp::Where, 0) => compute_type(d),
        _ => op_ct,
    }
}

/// Merge adjacent dimensions that every load walks the same way (row-major
/// order is kept, so outputs stay dense): a dense elementwise op of any rank
/// becomes one dimension. Returns the merged shape and each load's strides.
pub(super) fn coalesce(shape: &[usize], strides: &[Vec<isize>]) -> (Vec<usize>, Vec<Vec<isize>>) {
    let mut out_shape: Vec<usize> = Vec::new();
    let mut out_strides: Vec<Vec<isize>> = vec![Vec::new(); strides.len()];
    for d in 0..shape.len() {
        if shape[d] == 1 {
            continue; // contributes nothing to any offset
        }
        let mergeable = !out_shape.is_empty()
            && strides.iter().zip(&out_strides).all(|(s, o)| {
                *o.last().expect("same length as out_shape") == s[d] * shape[d] as isize
            });
        if mergeable {
            *out_shape.last_mut().expect("not empty") *= shape[d];
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                *o.last_mut().expect("not empty") = s[d];
            }
        } else {
            out_shape.push(shape[d]);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s[d]);
            }
        }
    }
    (out_shape, out_strides)
}

/// Encode `program` over `bound`: the dense-load flags and the merged rank
/// are filled in here from the strides, then the pipeline is looked up by
/// the finished structure. `program.rank` and each load's `dense` are
/// ignored on input.
///
/// # Errors
/// [`Error::TooLarge`] for sizes, strides or offsets past `u32`, or an
/// iteration space of more than [`MAX_RANK`] dimensions after merging;
/// [`Error::Kernel`] if the generated WGSL fails to compile.
pub(crate) fn dispatch(
    cx: &Context,
    mut program: Program,
    bound: &Bound<'_>,
) -> Result<Option<Dispatch>> {
    let Some((mut p, shape, strides)) = prepare_parts(&mut program, bound, true)? else {
        return Ok(None);
    };
    if program.vec4 {
        cx.wide_dispatches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let mut buffers: Vec<wgpu::Buffer> = bound.inputs.iter().map(|&b| b.clone()).collect();
    buffers.extend(bound.outputs.iter().map(|&b| b.clone()));
    let max_groups = cx.limits.max_compute_workgroups_per_dimension as usize;
    let rows = (program.vec4 && cx.software)
        .then(|| wide::rows(&program, &shape, &strides, max_groups))
        .flatten();
    if let Some((kinds, segments)) = rows {
        p.put(2, [segments as i64])?;
        let groups = shape[0].div_ceil(wide::ROWS_WG) as u32;
        let pipeline = cx.cache.get_quick(
            QuickKey::ProgramRows(program.clone(), kinds.clone()),
            || program.spec_with(Some(&kinds)),
        )?;
        return Ok(Some(Dispatch {
            windows: Vec::new(),
            pipeline,
            params: p.words(),
            buffers,
            workgroups: [groups, segments as u32, 1],
        }));
    }
    let n: usize = bound.shape.iter().product();
    let threads = n.div_ceil(program.elems_per_thread());
    let workgroups = cx.grid(threads as u64)?;
    let pipeline = cx
        .cache
        .get_quick(QuickKey::Program(program.clone()), || program.spec())?;
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline,
        params: p.words(),
        buffers,
        workgroups,
    }))
}

/// The parameter block of `program` over `bound` (sizes, then each load's
/// offset and strides, then the constants, at the words of
/// [`Program::layout`] with a head of `4 + rank`), filling in `program`'s
/// merged rank and dense-load flags, and choosing the wide variant where
/// `wide` allows it and the operands fit it (`wide::fits`); `None` for an
/// empty iteration space.
/// Shared by the elementwise kernel and the GEMM epilogue
/// (`kernels::gemm::common::epilogue`).
///
/// # Errors
/// As [`dispatch`].
pub(super) fn prepare(
    program: &mut Program,
    bound: &Bound<'_>,
    wide: bool,
) -> Result<Option<Params>> {
    Ok(prepare_parts(program, bound, wide)?.map(|(p, ..)| p))
}

/// [`prepare`], with the merged shape and the loads' merged strides.
#[allow(clippy::type_complexity)]
fn prepare_parts(
    program: &mut Program,
    bound: &Bound<'_>,
    wide: bool,
) -> Result<Option<(Params, Vec<usize>, Vec<Vec<isize>>)>> {
    let n: usize = bound.shape.iter().product();
    if n == 0 {
        return Ok(None);
    }
    let strides: Vec<Vec<isize>> = bound.loads.iter().map(|l| l.strides.clone()).collect();
    let (shape, strides) = coalesce(&bound.shape, &strides);
    if shape.len() > MAX_RANK {
        return Err(Error::InvalidArgument(format!(
            "arrays of more than {MAX_RANK} dimensions are not supported (got {})",
            shape.len()
        )));
    }
    program.rank = shape.len() as u8;
    let dense_strides = contiguous_strides(&shape);
    let mut li = 0;
    for d in program.defs.iter_mut() {
        if let Def::Load { dense, .. } = d {
            *dense = strides[li] == dense_strides;
            li += 1;
        }
    }
    program.vec4 = wide && wide::fits(program, &shape, &strides, bound);
    let layout = program.layout(4 + shape.len(), &[shape.len()]);
    let (load_words, const_words) = (&layout.loads, &layout.consts);
    let mut p = Params::with_words("elementwise", layout.words);
    p.put(0, [n as i64, shape.len() as i64])?;
    p.put(4, shape.iter().map(|&d| d as i64))?;
    let mut li = 0;
    for d in &program.defs {
        if let Def::Load { dense, .. } = d {
            let (w, data) = (load_words[li], &bound.loads[li]);
            p.put(w, [data.offset as i64])?;
            if !dense {
                p.put(w + 1, strides[li].iter().map(|&s| s as i64))?;
            }
            if let Some(gw) = layout.gathers[li] {
                let (stride, len) = data
                    .gather
                    .ok_or_else(|| Error::Internal("a gather load without its axis".into()))?;
                p.put(gw, [stride as i64, len as i64])?;
            }
            li += 1;
        }
    }
    for (&w, &c) in const_words.iter().zip(&bound.consts) {
        // The high word lands in the next slot, which only an f64
        // constant has (the layout gave it two words).
        if c >> 32 == 0 {
            p.put_bits(w, [c as u32]);
        } else {
            p.put_bits(w, [c as u32, (c >> 32) as u32]);
        }
    }
    Ok(Some((p, shape, strides)))
}

/// A sample of the programs lowering asks for, for the portability test:
/// every op on every dtype it takes (alone, dense and strided, with a
/// constant and with a donated load), every cast, where, divmod, gathers,
/// 2-byte outputs beside 4-byte ones, and a fused chain.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    use crate::graph::primitive::{BinaryOp, UnaryOp};
    let load = Def::load;
    let program = |defs: Vec<Def>, outputs: Vec<Value>, inputs: u8, rank: u8| Program {
        defs,
        outputs,
        inputs,
        rank,
        vec4: false,
    };
    let mut out = Vec::new();
    for d in DType::ALL {
        for u in UnaryOp::ALL {
            // ops records bitwise_invert of bool as logical_not.
            let dtype = match u.out_dtype(d) {
                Some(t) if !(u == UnaryOp::BitwiseInvert && d == DType::Bool) => t,
                _ => continue,
            };
            let op = Def::Op {
                op: ElementwiseOp::Unary(u),
                args: smallvec::smallvec![0],
                dtype,
            };
            out.push(program(vec![load(d, Source::Input(0), true), op], vec![1], 1, 1).spec());
        }
        for b in BinaryOp::ALL {
            let Some(dtype) = b.out_dtype(d) else {
                continue;
            };
            let op = Def::Op {
                op: ElementwiseOp::Binary(b),
                args: smallvec::smallvec![0, 1],
                dtype,
            };
            // Strided and dense loads, a constant, a donated load.
            out.push(
                program(
                    vec![
                        load(d, Source::Input(0), false),
                        load(d, Source::Input(1), true),
                        op.clone(),
                    ],
                    vec![2],
                    2,
                    3,
                )
                .spec(),
            );
            out.push(
                program(
                    vec![
                        load(d, Source::Output(0), true),
                        Def::Const { dtype: d },
                        op,
                    ],
                    vec![2],
                    0,
                    1,
                )
                .spec(),
            );
        }
        for to in DType::ALL {
            let op = Def::Op {
                op: ElementwiseOp::Cast,
                args: smallvec::smallvec![0],
                dtype: to,
            };
            out.push(program(vec![load(d, Source::Input(0), false), op], vec![1], 1, 2).spec());
        }
        let select = Def::Op {
            op: ElementwiseOp::Where,
            args: smallvec::smallvec![0, 1, 2],
            dtype: d,
        };
        out.push(
            program(
                vec![
                    load(DType::Bool, Source::Input(0), false),
                    load(d, Source::Input(1), false),
                    Def::Const { dtype: d },
                    select,
                ],
                vec![3],
                2,
                4,
            )
            .spec(),
        );
        // divmod: two outputs of one pair of loads.
        let (q, r) = (
            Def::Op {
                op: ElementwiseOp::Binary(BinaryOp::FloorDiv),
                args: smallvec::smallvec![0, 1],
                dtype: d,
            },
            Def::Op {
                op: ElementwiseOp::Binary(BinaryOp::Remainder),
                args: smallvec::smallvec![0, 1],
                dtype: d,
            },
        );
        out.push(
            program(
                vec![
                    load(d, Source::Input(0), true),
                    load(d, Source::Input(1), false),
                    q,
                    r,
                ],
                vec![2, 3],
                2,
                2,
            )
            .spec(),
        );
        for index in [DType::I32, DType::U32, DType::I8, DType::U16] {
            let gather = Def::Load {
                dtype: d,
                source: Source::Input(1),
                dense: false,
                gather: Some(0),
            };
            out.push(
                program(
                    vec![load(index, Source::Input(0), false), gather],
                    vec![1],
                    2,
                    3,
                )
                .spec(),
            );
        }
    }
    // A fused chain of mixed dtypes: f16 in, f32 and bf16 out, a held
    // intermediate written as a second output.
    let mut defs = vec![
        load(DType::F16, Source::Input(0), false),
        load(DType::F32, Source::Input(1), true),
        Def::Const { dtype: DType::F32 },
    ];
    let ops = [
        (ElementwiseOp::Cast, vec![0], DType::F32),
        (ElementwiseOp::Binary(BinaryOp::Mul), vec![3, 2], DType::F32),
        (ElementwiseOp::Unary(UnaryOp::Exp), vec![4], DType::F32),
        (ElementwiseOp::Binary(BinaryOp::Add), vec![5, 1], DType::F32),
        (ElementwiseOp::Unary(UnaryOp::Tanh), vec![6], DType::F32),
        (ElementwiseOp::Cast, vec![7], DType::BF16),
    ];
    for (op, args, dtype) in ops {
        defs.push(Def::Op {
            op,
            args: args.into(),
            dtype,
        });
    }
    out.push(program(defs, vec![6, 8], 2, 2).spec());
    // Outputs of every width in one program (four elements per thread):
    // u8 and f64 of an i16 load, and a u8 dequantised to f32.
    let mut defs = vec![
        load(DType::I16, Source::Input(0), false),
        load(DType::U8, Source::Input(1), true),
        Def::Const { dtype: DType::F32 },
    ];
    let ops = [
        (ElementwiseOp::Cast, vec![0], DType::U8),
        (ElementwiseOp::Cast, vec![0], DType::F64),
        (ElementwiseOp::Cast, vec![1], DType::F32),
        (ElementwiseOp::Binary(BinaryOp::Mul), vec![5, 2], DType::F32),
    ];
    for (op, args, dtype) in ops {
        defs.push(Def::Op {
            op,
            args: args.into(),
            dtype,
        });
    }
    out.push(program(defs, vec![3, 4, 6, 1], 2, 2).spec());
    out.extend(wide::specs());
    out
}
