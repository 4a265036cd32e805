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
//! whole number of `vec4`s, or reads one element for all (a broadcast
//! scalar, loaded once per thread), and every buffer the program touches
//! is a multiple of 16 bytes long (pool buffers always are), at any size:
//! no threshold, so a dense program compiles one variant. Strided loads
//! and gathers stay in the scalar variant (one element, or one word of a
//! packed output, per thread), and so does a view whose offset is not a
//! whole `vec4` (say `x[1..]` of f32).
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
/// coalesced, takes the wide variant over `bound` (see the module docs).
pub(super) fn fits(p: &Program, strides: &[Vec<isize>], bound: &Bound<'_>) -> bool {
    let whole = |b: &wgpu::Buffer| b.size().is_multiple_of(16);
    // Room for the last thread's whole share of every output (at offset 0).
    let shares = bound.shape.iter().product::<usize>().div_ceil(elements(p));
    let room = p.outputs.iter().zip(&bound.outputs).all(|(&v, b)| {
        let share = elements(p) * width(p.defs[v as usize].dtype());
        whole(b) && b.size() >= (shares * share) as u64
    });
    if !room {
        return false;
    }
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
        let ok = gather.is_none()
            && whole(buffer)
            && if *dense {
                (data.offset * width(*dtype)).is_multiple_of(16)
            } else {
                s.iter().all(|&x| x == 0)
            };
        if !ok {
            return false;
        }
    }
    true
}

/// Word `i` (a constant) of the `vec4`s `x{li}_{m}` a thread loaded.
fn loaded_word(li: usize, i: usize) -> String {
    format!("x{li}_{}.{}", i / 4, ["x", "y", "z", "w"][i % 4])
}

/// The bits of element `e` (a WGSL `u32` expression) of dtype `d` in the
/// `array<vec4<u32>>` named `array`, read a word at a time.
fn element_bits(d: DType, array: &str, e: &str) -> String {
    let word = |w: String| format!("{array}[({w}) >> 2u][({w}) & 3u]");
    match width(d) {
        1 => format!("byte_of({}, {e})", word(format!("({e}) >> 2u"))),
        2 => format!("half_word({}, {e})", word(format!("({e}) >> 1u"))),
        4 => word(e.to_string()),
        _ => format!(
            "word_pair({}, {})",
            word(format!("2u * ({e})")),
            word(format!("2u * ({e}) + 1u"))
        ),
    }
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
    // a broadcast scalar, its one element.
    let mut bits: Vec<Vec<String>> = Vec::new();
    let mut li = 0;
    for d in &p.defs {
        let Def::Load {
            dtype,
            source,
            dense,
            ..
        } = d
        else {
            continue;
        };
        let array = match source {
            Source::Input(i) => format!("in{i}"),
            Source::Output(j) => format!("o{j}"),
            Source::Acc => unreachable!("a GEMM epilogue is never wide (`fits` refuses it)"),
        };
        let (w, off) = (width(*dtype), pw(layout.loads[li]));
        if *dense {
            let vecs = k * w / 16;
            // The offset in vec4s: elements times w over 16, exact.
            let shift = (16 / w).trailing_zeros();
            s.push_str(&format!(
                "    let base{li} = ({off} >> {shift}u) + t * {vecs}u;\n"
            ));
            for m in 0..vecs {
                s.push_str(&format!("    let x{li}_{m} = {array}[base{li} + {m}u];\n"));
            }
            bits.push(
                (0..k)
                    .map(|q| match w {
                        1 => format!("byte_of({}, {q}u)", loaded_word(li, q / 4)),
                        2 => format!("half_word({}, {q}u)", loaded_word(li, q / 2)),
                        4 => loaded_word(li, q),
                        _ => format!(
                            "word_pair({}, {})",
                            loaded_word(li, 2 * q),
                            loaded_word(li, 2 * q + 1)
                        ),
                    })
                    .collect(),
            );
        } else {
            s.push_str(&format!(
                "    let u{li} = {};\n",
                element_bits(*dtype, &array, &off)
            ));
            bits.push(vec![format!("u{li}"); k]);
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
