//! The wide variant of a generated elementwise program ([`Program::vec4`]):
//! its bindings are `array<vec4<u32>>` and each thread handles `K`
//! consecutive elements, `K = 16 / w` for the narrowest operand width `w`
//! in bytes: 4 for f32, i32, u32 and bool (stored as a u32 word), 8 for
//! f16, bf16, i16 and u16, 16 for i8 and u8, 2 for f64. Every load and
//! store moves whole `vec4<u32>`s (one for each 16 bytes of that operand:
//! a wider operand of the same program moves several). The thread loads
//! first, then calls `compute` (the scalar variant's per-element function,
//! taking each load's element bits instead of loading them) for each of its
//! elements, then stores.
//!
//! It is chosen by [`fits`] when every load is dense with an offset of a
//! whole number of `vec4`s, or walks the iteration space's last
//! (merged) dimension in one of two ways that keep a thread's `K`
//! elements together (that dimension a multiple of `K` long): constant
//! along it (a row's statistic in a normalisation, `x - max` of a
//! softmax, `(x - mean) * rstd`: one element per thread; a broadcast
//! scalar is the case where every stride is 0), or unit-stride from an
//! address of whole `vec4`s (a layer norm's weight and bias, `[cols]`
//! broadcast over the rows); and every buffer the program touches is a
//! multiple of 16 bytes long (pool buffers always are), at any size: no
//! threshold, so a dense program compiles one variant. Such a load's
//! address is its strides over the thread's first element, unravelled
//! once per thread; it loads the `vec4`s at that address (the same one
//! again, for a constant load wider than one `vec4` per thread) and
//! takes element `q` at word `(address mod 16 bytes) + q * stride`, one
//! code for both. Other strided loads and gathers stay in the scalar
//! variant (one element, or one word of a packed output, per thread), and
//! so does a dense view whose offset is not a whole `vec4` (say `x[1..]`
//! of f32).
//!
//! Why `vec4<u32>` bindings and not four `u32` loads: on lavapipe a thread's
//! overhead (index, guard, parameter reads) costs as much as its loads, and
//! a `vec4` load costs about one `u32` load (each storage access runs lane
//! by lane). Measured (docs/PERFORMANCE.md, "Elementwise bandwidth"), raw
//! `a + b` on f32[16M] on lavapipe, same run: one element per thread 0.34
//! of a raw vec4 copy's bandwidth, four `u32` loads 0.66 to 0.73, one
//! `vec4<u32>` load 1.04.
//!
//! The last thread's share may pass `n`, and it has no tail code: lavapipe
//! runs both sides of an `if`, masked, so a guarded tail (word by word
//! stores up to `n`) cost 15 % of `a + b` in every thread. Its loads stay
//! inside the buffers or read past the end of one, which returns some
//! value of the buffer or 0, never a fault (a dense operand's share is
//! whole `vec4`s from an aligned offset, and the buffer a multiple of 16
//! bytes); what it computes past `n` is dropped; and it stores its whole
//! share: [`fits`] checks that every output buffer has room for it (pool
//! buffers are rounded up to 256 bytes, so they always have), and packed
//! words hold 0 for the elements past `n`, as in the scalar variant. The
//! words past the last element of a 4- or 8-byte output are padding no
//! view reaches.

use super::{Bound, Def, Layout, Program, Source, WG, pw};
use crate::DType;

/// Bytes of one element of `d` in memory.
fn width(d: DType) -> usize {
    d.size_in_bytes()
}

/// `K`, the elements each thread handles: 16 over the narrowest width among
/// the loads and outputs (constants and intermediates live in registers).
pub(super) fn elements(p: &Program) -> usize {
    let loads = p.defs.iter().filter_map(|d| match d {
        Def::Load { dtype, .. } => Some(width(*dtype)),
        _ => None,
    });
    let outputs = p.outputs.iter().map(|&v| width(p.defs[v as usize].dtype()));
    16 / loads.chain(outputs).min().unwrap_or(4).min(16)
}

/// Whether the program, its loads' `dense` flags filled in and `strides`
/// coalesced over `shape`, takes the wide variant over `bound` (see the
/// module docs).
pub(super) fn fits(
    p: &Program,
    shape: &[usize],
    strides: &[Vec<isize>],
    bound: &Bound<'_>,
) -> bool {
    let whole = |b: &wgpu::Buffer| b.size().is_multiple_of(16);
    let k = elements(p);
    // Room for the last thread's whole share of every output (at offset 0).
    let shares = bound.shape.iter().product::<usize>().div_ceil(k);
    let room = p.outputs.iter().zip(&bound.outputs).all(|(&v, b)| {
        let share = k * width(p.defs[v as usize].dtype());
        whole(b) && b.size() >= (shares * share) as u64
    });
    if !room {
        return false;
    }
    // A thread's K elements share every index but the last.
    let rows_whole = shape.last().is_some_and(|&n| n.is_multiple_of(k));
    let mut li = 0;
    for d in &p.defs {
        let Def::Load {
            dtype,
            source,
            dense,
            gather,
        } = d
        else {
            continue;
        };
        let (data, s) = (&bound.loads[li], &strides[li]);
        li += 1;
        let buffer = match source {
            Source::Input(i) => bound.inputs[*i as usize],
            Source::Output(j) => bound.outputs[*j as usize],
            // A GEMM epilogue's product: never wide (`prepare` says so).
            Source::Acc => return false,
        };
        // Elements per vec4 of this load.
        let per = (16 / width(*dtype)) as isize;
        let ok = gather.is_none()
            && whole(buffer)
            && if *dense {
                (data.offset * width(*dtype)).is_multiple_of(16)
            } else {
                let (last, outer) = s.split_last().unwrap_or((&0, &[]));
                s.iter().all(|&x| x == 0)
                    || (rows_whole && *last == 0)
                    || (rows_whole
                        && *last == 1
                        && (data.offset as isize) % per == 0
                        && outer.iter().all(|&x| x.rem_euclid(per) == 0))
            };
        if !ok {
            return false;
        }
    }
    true
}

/// What both wide generators know of a load with parameter slot `lw`: its
/// binding's name, its element width `w` in bytes, its offset expression,
/// the vec4s it reads per thread (`k` elements), and the shift from
/// elements to vec4s (elements times `w` over 16, exact).
fn wide_load(d: &Def, lw: usize, k: usize) -> (String, usize, String, usize, u32) {
    let Def::Load { dtype, source, .. } = d else {
        unreachable!("a load")
    };
    let array = match source {
        Source::Input(i) => format!("in{i}"),
        Source::Output(j) => format!("o{j}"),
        Source::Acc => unreachable!("a GEMM epilogue is never wide (`fits` refuses it)"),
    };
    let w = width(*dtype);
    (array, w, pw(lw), k * w / 16, (16 / w).trailing_zeros())
}

/// Word `i` (a constant) of the `vec4`s `x{li}_{m}` a thread loaded.
fn loaded_word(li: usize, i: usize) -> String {
    format!("x{li}_{}.{}", i / 4, ["x", "y", "z", "w"][i % 4])
}

/// The entry point of the wide variant of `p` (its `compute` takes the bits
/// of each load; `slot[j]` is output `j`'s first word of its result).
pub(super) fn main(p: &Program, layout: &Layout, slot: &[usize]) -> String {
    let k = elements(p);
    let mut s = format!(
        "\n@compute @workgroup_size({WG})\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{\n\
         \x20   let t = gid.x + gid.y * nwg.x * {WG}u;\n\
         \x20   let n = {};\n\
         \x20   let e = {k}u * t;\n\
         \x20   if e >= n {{\n        return;\n    }}\n",
        pw(0)
    );
    // Loads: each dense one's share, whole vec4s from its aligned offset;
    // a strided one's vec4s at its address for the thread's first element
    // (the thread's index unravelled once), element q at word
    // `address mod vec4 + q * (its last stride, 0 or 1)`.
    let rank = p.rank as usize;
    let strided = p
        .defs
        .iter()
        .any(|d| matches!(d, Def::Load { dense: false, .. }));
    if strided && rank > 0 {
        s.push_str(&super::unravel("e", "i", 4, rank));
    }
    let mut bits: Vec<Vec<String>> = Vec::new();
    let mut li = 0;
    for d in &p.defs {
        let Def::Load { dense, .. } = d else {
            continue;
        };
        let lw = layout.loads[li];
        let (array, w, off, vecs, shift) = wide_load(d, lw, k);
        let word_of = |i: usize| chunk_word(w, li, i);
        if *dense {
            s.push_str(&format!(
                "    let base{li} = ({off} >> {shift}u) + t * {vecs}u;\n"
            ));
            for m in 0..vecs {
                s.push_str(&format!("    let x{li}_{m} = {array}[base{li} + {m}u];\n"));
            }
            bits.push((0..k).map(word_of).collect());
        } else {
            let mut a = off.clone();
            for dim in 0..rank {
                a.push_str(&format!(" + i{dim} * {}", pw(lw + 1 + dim)));
            }
            let last = if rank > 0 {
                pw(lw + rank)
            } else {
                "0u".to_string()
            };
            s.push_str(&format!(
                "    let a{li} = {a};\n    let st{li} = {last};\n    let base{li} = a{li} >> {shift}u;\n"
            ));
            for m in 0..vecs {
                s.push_str(&format!(
                    "    let x{li}_{m} = {array}[base{li} + {m}u * st{li}];\n"
                ));
            }
            // Constant along the row: the element at a, in the first vec4.
            let one = element_at(w, &format!("x{li}_0"), &format!("a{li}"));
            s.push_str(&format!("    let c{li} = {one};\n"));
            bits.push(
                (0..k)
                    .map(|q| format!("select(c{li}, {}, st{li} == 1u)", word_of(q)))
                    .collect(),
            );
        }
        li += 1;
    }
    for q in 0..k {
        let args: String = bits.iter().map(|b| format!(", {}", b[q])).collect();
        s.push_str(&format!("    let r{q} = compute(e + {q}u{args});\n"));
    }
    // Stores: whole vec4s, the last thread's too (`fits` saw room for it);
    // elements past n are 0 in packed words, the padding of the last word.
    for (j, &v) in p.outputs.iter().enumerate() {
        let (w, sl) = (width(p.defs[v as usize].dtype()), slot[j]);
        let word = |i: usize| -> String {
            match w {
                4 => format!("r{i}[{sl}]"),
                8 => format!("r{}[{}]", i / 2, sl + i % 2),
                _ => {
                    let per = 4 / w;
                    let parts: Vec<String> = (0..per)
                        .map(|c| {
                            let el = i * per + c;
                            let part = if el > 0 {
                                format!("select(0u, r{el}[{sl}], e + {el}u < n)")
                            } else {
                                format!("r0[{sl}]")
                            };
                            format!("({part} << {}u)", 8 * w * c)
                        })
                        .collect();
                    parts.join(" | ")
                }
            }
        };
        let vecs = k * w / 16;
        for m in 0..vecs {
            let words: Vec<String> = (0..4).map(|c| word(4 * m + c)).collect();
            s.push_str(&format!(
                "    o{j}[t * {vecs}u + {m}u] = vec4<u32>({});\n",
                words.join(", ")
            ));
        }
    }
    s.push_str("}\n");
    s
}

/// Threads per workgroup of the rows geometry ([`rows`]).
pub(super) const ROWS_WG: usize = 64;

/// How each load of a program in the rows geometry walks a row: a load's
/// address is constant over a thread's work or changes with the chunk,
/// and is the same for every thread of a workgroup or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RowLoad {
    /// Dense over `[rows, n]`.
    Dense,
    /// One element for the whole row: a row's statistic (its strides
    /// `[s, 0]`), or a broadcast scalar (`[0, 0]`).
    Splat,
    /// The same row for every row (`[0, 1]`: a layer norm's weight):
    /// loaded at an address every thread of the workgroup shares.
    Shared,
    /// A row of its own, unit-stride (`[s, 1]`, aligned).
    Own,
}

/// The rows geometry of a wide program of rank 2 (`[rows, n]` after
/// merging, `n` a multiple of `K`) on a software adapter: each thread
/// walks the chunks of one row (or of one segment of it, the segment
/// from the workgroup's second index), so that the chunk index is the same
/// for every thread of a workgroup. A load constant along the row is then
/// loaded once per thread, and one shared by every row (`[0, 1]`, a layer
/// norm's weight and bias) at an address every thread shares, which
/// lavapipe loads once per group of lanes instead of lane by lane: a
/// normalisation's second kernel moves the bytes of a copy. Returns the
/// loads' kinds and the segments per row, or `None` where the flat
/// geometry is as good (no load of a row's statistic or a shared row) or
/// the rows do not fit one dispatch (`max_groups` workgroups per
/// dimension).
pub(super) fn rows(
    p: &Program,
    shape: &[usize],
    strides: &[Vec<isize>],
    max_groups: usize,
) -> Option<(Vec<RowLoad>, usize)> {
    let k = elements(p);
    let [rows, n] = shape else { return None };
    if !n.is_multiple_of(k) || rows.div_ceil(ROWS_WG) > max_groups {
        return None;
    }
    let mut kinds = Vec::new();
    let mut li = 0;
    for d in &p.defs {
        let Def::Load { dense, .. } = d else { continue };
        let s = &strides[li];
        li += 1;
        kinds.push(match (dense, s[0], s[1]) {
            (true, ..) => RowLoad::Dense,
            (false, _, 0) => RowLoad::Splat,
            (false, 0, 1) => RowLoad::Shared,
            (false, _, 1) => RowLoad::Own,
            _ => return None,
        });
    }
    let useful = kinds
        .iter()
        .zip(strides)
        .any(|(&kd, s)| kd == RowLoad::Shared || (kd == RowLoad::Splat && s[0] != 0));
    if !useful {
        return None;
    }
    // Enough threads for every core, each at least 64 chunks, and few
    // enough chunks per thread for llvmpipe's loop limit.
    let chunks = n / k;
    let segments = 2048usize
        .div_ceil(*rows)
        .min(chunks.div_ceil(64))
        .max(chunks.div_ceil(16384))
        .clamp(1, max_groups);
    Some((kinds, segments))
}

/// The entry point of the rows geometry (see [`rows`]): thread `gid.x` is
/// the row, workgroup `wid.y` the segment (word 2: segments per row).
pub(super) fn rows_main(p: &Program, layout: &Layout, slot: &[usize], kinds: &[RowLoad]) -> String {
    let k = elements(p);
    let mut s = format!(
        "\n@compute @workgroup_size({ROWS_WG})\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {{\n\
         \x20   let row = gid.x;\n\
         \x20   if row >= {rows} {{\n        return;\n    }}\n\
         \x20   let n = {n};\n\
         \x20   let segments = {segs};\n\
         \x20   let nc = n / {k}u;\n\
         \x20   let per = (nc + segments - 1u) / segments;\n\
         \x20   let c0 = min(wid.y * per, nc);\n\
         \x20   let c1 = min(c0 + per, nc);\n",
        rows = pw(4),
        n = pw(5),
        segs = pw(2),
    );
    // Per load: its first vec4 (row and shared loads), or its bits (splat).
    let mut bits: Vec<Vec<String>> = Vec::new();
    let mut loads = Vec::new();
    let mut li = 0;
    for d in &p.defs {
        if !matches!(d, Def::Load { .. }) {
            continue;
        }
        let lw = layout.loads[li];
        let (array, w, off, vecs, shift) = wide_load(d, lw, k);
        match kinds[li] {
            RowLoad::Dense => {
                s.push_str(&format!(
                    "    let vb{li} = ({off} + row * n) >> {shift}u;\n"
                ));
                loads.push((li, array, vecs));
                bits.push((0..k).map(|q| chunk_word(w, li, q)).collect());
            }
            RowLoad::Own => {
                s.push_str(&format!(
                    "    let vb{li} = ({off} + row * {}) >> {shift}u;\n",
                    pw(lw + 1)
                ));
                loads.push((li, array, vecs));
                bits.push((0..k).map(|q| chunk_word(w, li, q)).collect());
            }
            RowLoad::Shared => {
                s.push_str(&format!("    let vb{li} = {off} >> {shift}u;\n"));
                loads.push((li, array, vecs));
                bits.push((0..k).map(|q| chunk_word(w, li, q)).collect());
            }
            RowLoad::Splat => {
                let a = format!("{off} + row * {}", pw(lw + 1));
                s.push_str(&format!(
                    "    let a{li} = {a};\n    let y{li} = {array}[a{li} >> {shift}u];\n"
                ));
                let one = element_at(w, &format!("y{li}"), &format!("a{li}"));
                s.push_str(&format!("    let sp{li} = {one};\n"));
                bits.push(vec![format!("sp{li}"); k]);
            }
        }
        li += 1;
    }
    for (j, &v) in p.outputs.iter().enumerate() {
        let w = width(p.defs[v as usize].dtype());
        s.push_str(&format!("    let ob{j} = (row * n) / {}u;\n", 16 / w));
    }
    s.push_str("    for (var c = c0; c < c1; c++) {\n");
    for (li, array, vecs) in &loads {
        for m in 0..*vecs {
            s.push_str(&format!(
                "        let x{li}_{m} = {array}[vb{li} + c * {vecs}u + {m}u];\n"
            ));
        }
    }
    for q in 0..k {
        let args: String = bits.iter().map(|b| format!(", {}", b[q])).collect();
        s.push_str(&format!("        let r{q} = compute(0u{args});\n"));
    }
    for (j, &v) in p.outputs.iter().enumerate() {
        let (w, sl) = (width(p.defs[v as usize].dtype()), slot[j]);
        let vecs = k * w / 16;
        for m in 0..vecs {
            let words: Vec<String> = (0..4).map(|c| output_word(w, sl, 4 * m + c)).collect();
            s.push_str(&format!(
                "        o{j}[ob{j} + c * {vecs}u + {m}u] = vec4<u32>({});\n",
                words.join(", ")
            ));
        }
    }
    s.push_str("    }\n}\n");
    s
}

/// The bits of element `q` of load `li`'s chunk (`x{li}_{m}`), `w` bytes
/// per element.
fn chunk_word(w: usize, li: usize, q: usize) -> String {
    match w {
        1 => format!("byte_of({}, {q}u)", loaded_word(li, q / 4)),
        2 => format!("half_word({}, {q}u)", loaded_word(li, q / 2)),
        4 => loaded_word(li, q),
        _ => format!(
            "word_pair({}, {})",
            loaded_word(li, 2 * q),
            loaded_word(li, 2 * q + 1)
        ),
    }
}

/// Word `i` of a chunk of output slot `sl` (`w` bytes per element) from
/// the results `r{q}`: whole rows, so no element is past the end.
fn output_word(w: usize, sl: usize, i: usize) -> String {
    match w {
        4 => format!("r{i}[{sl}]"),
        8 => format!("r{}[{}]", i / 2, sl + i % 2),
        _ => {
            let per = 4 / w;
            (0..per)
                .map(|c| format!("(r{}[{sl}] << {}u)", i * per + c, 8 * w * c))
                .collect::<Vec<_>>()
                .join(" | ")
        }
    }
}

/// The bits of the `w`-byte element at element address `addr` inside
/// `chunk`, the 16-byte `vec4<u32>` that holds it (a WGSL expression).
fn element_at(w: usize, chunk: &str, addr: &str) -> String {
    let lane = format!("({addr} & {}u)", 16 / w - 1);
    match w {
        1 => format!("byte_of({chunk}[{lane} >> 2u], {lane})"),
        2 => format!("half_word({chunk}[{lane} >> 1u], {lane})"),
        4 => format!("{chunk}[{lane}]"),
        _ => format!("word_pair({chunk}[2u * {lane}], {chunk}[2u * {lane} + 1u])"),
    }
}

/// Wide programs for the portability test: a binary op on f32 with a
/// broadcast scalar and a donated load, f16 (eight per thread), a
/// comparison to bool beside an f32 load (sixteen per thread), and f64.
#[cfg(test)]
pub(super) fn specs() -> Vec<(crate::kernels::Spec, &'static crate::kernels::Kernel)> {
    use crate::graph::primitive::{BinaryOp, ElementwiseOp, UnaryOp};
    let (load, op) = (Def::load, Def::op);
    let mut out = Vec::new();
    for d in [DType::F32, DType::F16, DType::U8, DType::F64] {
        let defs = vec![
            load(d, Source::Input(0), true),
            load(d, Source::Input(1), false),
            load(d, Source::Output(0), true),
            op(ElementwiseOp::Binary(BinaryOp::Add), vec![0, 1], d),
            op(ElementwiseOp::Binary(BinaryOp::Mul), vec![3, 2], d),
            op(
                ElementwiseOp::Binary(BinaryOp::Less),
                vec![4, 0],
                DType::Bool,
            ),
        ];
        let p = Program {
            defs,
            outputs: vec![4, 5],
            inputs: 2,
            rank: 1,
            vec4: true,
        };
        out.push(p.spec());
    }
    // Rank 2: a load constant along the rows or unit-stride along them
    // (a normalisation's statistic, a layer norm's weight).
    let p = Program {
        defs: vec![
            load(DType::F16, Source::Input(0), true),
            load(DType::F32, Source::Input(1), false),
            load(DType::F32, Source::Input(2), false),
            op(ElementwiseOp::Binary(BinaryOp::Sub), vec![0, 1], DType::F32),
            op(ElementwiseOp::Binary(BinaryOp::Mul), vec![3, 2], DType::F32),
        ],
        outputs: vec![4],
        inputs: 3,
        rank: 2,
        vec4: true,
    };
    out.push(p.spec());
    let p = Program {
        defs: vec![
            load(DType::BF16, Source::Input(0), true),
            op(ElementwiseOp::Unary(UnaryOp::Exp), vec![0], DType::BF16),
        ],
        outputs: vec![1],
        inputs: 1,
        rank: 1,
        vec4: true,
    };
    out.push(p.spec());
    out
}
