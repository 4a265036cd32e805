//! The GEMM's fused epilogue: an elementwise [`Program`] (bias, scale,
//! activation, residual add, casts: whatever group of elementwise ops reads
//! a matmul's result, planned by `graph::fuse`) applied to each result of
//! the GEMM where it is stored, in `store_quad` (`wgsl/gemm_common.wgsl`),
//! so that `gelu(x @ w + b)` is one dispatch and the product is never
//! written unless someone holds it.
//!
//! The program is the elementwise generator's (`kernels::program`): the
//! same op functions, loads, constants and rounding, with one more kind of
//! load, [`crate::kernels::program::Source::Acc`], the GEMM's result at the element. Its iteration
//! space is the product's `[batch.., m, n]`, and element `e` is the dense
//! output index `out_base + row * n + col`, unravelled over the program's
//! merged shape for strided loads (a bias broadcast along rows, a
//! transposed residual); its parameter words follow the GEMM's own
//! (`params::GEMM_WORDS`) as `p.w`, laid out as the elementwise kernel lays them
//! out. Outputs of one or two bytes are packed four or two to a word:
//! a quad that covers whole words stores them, others merge their elements
//! into shared words with atomics (a row's quads need not be word aligned).
//!
//! Every family uses it (register, workgroup-memory, split-K,
//! cooperative-matrix), since all of them store through `store_quad`.

use crate::kernels::elementwise::{compute_type, encode};
use crate::kernels::program::{Bound, Def, Program, prepare};
use crate::{DType, Result};

/// A fused epilogue at dispatch: its program (structure; `rank` and the
/// loads' `dense` flags are filled in by [`params`]) and what it binds.
/// Load `Acc` takes a [`crate::kernels::program::LoadData`] like any other load (its
/// values are unused).
pub(crate) struct Epilogue<'a> {
    pub program: Program,
    pub bound: Bound<'a>,
}

/// Whether `program` can run as an epilogue: no f64 value (the GEMM
/// kernels do not enable it) and no gather.
pub(crate) fn supported(program: &Program) -> bool {
    program.defs.iter().all(|d| {
        d.dtype() != DType::F64
            && !matches!(
                d,
                Def::Load {
                    gather: Some(_),
                    ..
                }
            )
    })
}

/// The epilogue's parameter words (to be placed at `params::GEMM_WORDS`),
/// filling in the program's merged rank and dense-load flags.
///
/// # Errors
/// As `program::dispatch`: sizes, strides or offsets past `u32`, more than
/// `program::MAX_RANK` merged dimensions.
pub(crate) fn params(e: &mut Epilogue<'_>) -> Result<Vec<u32>> {
    Ok(prepare(&mut e.program, &e.bound, false)?
        .map(|p| p.words())
        .unwrap_or_default())
}

/// The WGSL element type of output `j`'s binding: packed outputs are
/// merged with atomics.
fn packed(d: DType) -> bool {
    d.size_in_bytes() < 4
}

/// `EPILOGUE_PARAMS`: the epilogue's words in the GEMM's parameter struct.
pub(crate) fn params_field(program: &Program) -> String {
    let rank = program.rank as usize;
    let words = program.layout(4 + rank, &[rank]).words;
    format!("    w: array<vec4<u32>, {}>,", words / 4)
}

/// `EPILOGUE_FN`: the epilogue's bindings (from binding `first`), its op
/// functions, `epi1(e, acc)` (every output's bits at element `e`) and
/// `epilogue(o, r, count)`, which `store_quad` calls with the quad's first
/// element, its four results and how many of them lie inside the row.
pub(crate) fn wgsl(program: &Program, first: usize) -> String {
    let rank = program.rank as usize;
    let layout = program.layout(4 + rank, &[rank]);
    let dtypes: Vec<DType> = program
        .outputs
        .iter()
        .map(|&v| program.defs[v as usize].dtype())
        .collect();
    let outputs: Vec<(String, &str)> = dtypes
        .iter()
        .enumerate()
        .map(|(j, &d)| {
            (
                format!("o{j}"),
                if packed(d) { "atomic<u32>" } else { "u32" },
            )
        })
        .collect();
    let mut s = program.storage_bindings(first, &outputs);
    s.push_str(&program.functions());
    let slots = program.outputs.len();
    s.push_str(&format!(
        "\nfn epi1(e: u32, acc: f32) -> array<u32, {slots}> {{\n"
    ));
    s.push_str(&program.element_statements(&layout));
    let words: Vec<String> = program
        .outputs
        .iter()
        .zip(&dtypes)
        .map(|(&v, &d)| encode(d, &format!("v{v}"), compute_type(d)))
        .collect();
    s.push_str(&format!(
        "    return array<u32, {slots}>({});\n}}\n",
        words.join(", ")
    ));
    // One loop over the quad's elements (the driver inlines `epi1` once):
    // 4-byte outputs are stored element by element; a packed output's
    // whole words after the loop when the quad covers them, else each
    // element merged into its share of a word.
    let any_packed = dtypes.iter().any(|&d| packed(d));
    s.push_str("\nfn epilogue(o: u32, r: vec4<f32>, count: u32) {\n");
    if any_packed {
        s.push_str(&format!("    var w: array<array<u32, {slots}>, 4>;\n"));
    }
    s.push_str(
        "    for (var q = 0u; q < count; q++) {\n        let e = o + q;\n        let x = epi1(e, r[q]);\n",
    );
    if any_packed {
        s.push_str("        w[q] = x;\n");
    }
    let mut after = String::new();
    for (j, &d) in dtypes.iter().enumerate() {
        if !packed(d) {
            s.push_str(&format!("        o{j}[e] = x[{j}];\n"));
            continue;
        }
        let per = 4 / d.size_in_bytes();
        let bits = 8 * d.size_in_bytes();
        let mask = (1u64 << bits) - 1;
        let whole = format!("count == 4u && (o % {per}u) == 0u");
        s.push_str(&format!(
            "        if !({whole}) {{\n            let s = (e % {per}u) * {bits}u;\n            \
             atomicAnd(&o{j}[e / {per}u], ~({mask}u << s));\n            \
             atomicOr(&o{j}[e / {per}u], (x[{j}] & {mask}u) << s);\n        }}\n"
        ));
        let words: Vec<String> = (0..4 / per)
            .map(|wd| {
                let parts: Vec<String> = (0..per)
                    .map(|k| format!("((w[{}][{j}] & {mask}u) << {}u)", wd * per + k, bits * k))
                    .collect();
                format!(
                    "atomicStore(&o{j}[(o / {per}u) + {wd}u], {});",
                    parts.join(" | ")
                )
            })
            .collect();
        after.push_str(&format!(
            "    if {whole} {{\n        {}\n    }}\n",
            words.join("\n        ")
        ));
    }
    s.push_str("    }\n");
    s.push_str(&after);
    s.push_str("}\n");
    s
}

/// `EPILOGUE_FN` of a GEMM without an epilogue (never called).
pub(crate) const NO_EPILOGUE: &str = "fn epilogue(o: u32, r: vec4<f32>, count: u32) {}";

/// An epilogue for the portability test: the product (held), plus a bias
/// row read through strides, times a constant, gelu, plus a dense f32
/// residual, and that sum as f16 (two to a word) and compared as bool (four
/// to a word): four outputs, every store path.
#[cfg(test)]
pub(crate) fn sample(dtype: DType) -> Program {
    use crate::graph::primitive::{BinaryOp, ElementwiseOp, UnaryOp};
    use crate::kernels::program::Source;
    let (load, op) = (Def::load, Def::op);
    let bin = ElementwiseOp::Binary;
    Program {
        defs: vec![
            load(dtype, Source::Acc, true),
            load(dtype, Source::Input(0), false),
            Def::Const { dtype },
            op(bin(BinaryOp::Add), vec![0, 1], dtype),
            op(bin(BinaryOp::Mul), vec![3, 2], dtype),
            op(ElementwiseOp::Unary(UnaryOp::Gelu), vec![4], dtype),
            load(DType::F32, Source::Input(1), true),
            op(ElementwiseOp::Cast, vec![5], DType::F32),
            op(bin(BinaryOp::Add), vec![7, 6], DType::F32),
            op(ElementwiseOp::Cast, vec![8], DType::F16),
            op(bin(BinaryOp::Greater), vec![8, 6], DType::Bool),
        ],
        outputs: vec![0, 8, 9, 10],
        inputs: 2,
        rank: 2,
        vec4: false,
    }
}
