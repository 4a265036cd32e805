//! The quantized GEMM family (`GemmKernel::Quant`, `wgsl/gemm_quant.wgsl`):
//! `x @ W^T` with `W` in one of ggml's block formats or MLX's affine
//! quantization (`Mode::QuantK`), and `x @ W` with `W` affine-quantized
//! along its columns (`Mode::QuantN`), reading `W` as stored and
//! dequantizing it in registers.
//!
//! Formats are data for one generator, as llama.cpp's Vulkan backend keeps
//! them in `dequant_funcs.comp` and writes `mul_mat_vec.comp` once: a block
//! format is its geometry ([`DType::block_size`], [`DType::size_in_bytes`])
//! and the two decode functions of `wgsl/quant_blocks.wgsl` that the
//! dequantize kernel calls too (`dm_F`, `quad_F`, through `q_word`); affine
//! is its bit width and group size, decoded by [`FORMAT`]'s functions.
//! The generator writes, per K step, the loads of each of a thread's rows
//! of `W` (aligned `vec4<u32>` chunks, realigned in registers into the
//! private array `qw`, which `q_word` reads), then the decode calls with
//! constant arguments and the multiply-adds: so every packed byte is
//! loaded once, in the widest loads the layout allows, whatever the format.
//!
//! Two forms of the multiply-adds, by the rows of x per thread:
//! - few rows (the matrix-vector classes, decode): per sub-block of
//!   constant scale `d` and offset `m`, `d * sum(q x) + m * sum(x)`, so a
//!   quantized element costs one multiply-add and its decode;
//! - many rows (prefill): each quad of `W` dequantized once (`q d + m`, as
//!   the dequantize kernel computes it) and multiplied into every row of x,
//!   as the register family's block does.
//!
//! On software adapters x is read through a uniform binding where its
//! rows are dense and aligned (`GemmVariant::a_quads`): llvmpipe gathers a
//! uniform load in one pass but loops over the lanes for a storage load.

use super::common::indent;
use super::common::operand::{Gemm, Mode};
use super::common::prelude::{Family, GEMM_COMMON, family_kernel};
use super::common::store::store_quads;
use crate::kernels::quant::{QUANT_BLOCKS, Rows, Source, format_name, scale_loads};
use crate::kernels::{CONVERT, Kernel, Params};
use crate::{DType, Result};

const SOURCE: &str = include_str!("../../../wgsl/gemm_quant.wgsl");

/// The quantized GEMM (`wgsl/gemm_quant.wgsl`).
pub(crate) static GEMM_QUANT: Kernel =
    family_kernel("gemm_quant", &[CONVERT, QUANT_BLOCKS, GEMM_COMMON], SOURCE);

/// The same under a fused epilogue, whose wrapping
/// (`prelude::GEMM_EPILOGUE`) brings `wgsl/convert.wgsl` itself.
pub(crate) static GEMM_QUANT_FUSED: Kernel =
    family_kernel("gemm_quant_fused", &[QUANT_BLOCKS, GEMM_COMMON], SOURCE);

/// Columns per thread of `x @ W` (`Mode::QuantN`): one span of 32 quants,
/// `bits` whole words of a row of `W`.
pub(crate) const SPAN_COLUMNS: u32 = 32;

/// The rows of x one thread of the matrix-vector form takes at most (the
/// classes' product rows, `m <= 8`); more rows take the dequantizing form.
pub(crate) const FACTORED_ROWS: u32 = 8;

/// A K step of one row of `W` for a format: what the generator lays out.
struct Step {
    /// K per step (`Mode::QuantK`; `Mode::QuantN` steps `g` rows of W).
    k: u32,
    /// Units of `W` per row and step: bytes for block formats, words for
    /// affine.
    units: u32,
    /// Data words per row and step once realigned.
    words: u32,
    /// Rows may start two bytes off a word (Q4_0, Q8_0, Q6_K blocks).
    funnel: bool,
    /// Elements sharing one scale and offset.
    sub: u32,
    /// The format adds an offset (`m` not -0.0).
    has_min: bool,
}

impl Step {
    fn new(source: Source, mode: Mode, g: u32) -> Step {
        match (source, mode) {
            (Source::Blocks(d), _) => {
                let (be, bb) = (d.block_size() as u32, d.size_in_bytes() as u32);
                Step {
                    k: g * be,
                    units: g * bb,
                    words: (g * bb).div_ceil(4),
                    funnel: !bb.is_multiple_of(4),
                    sub: if d == DType::Q6K { 16 } else { 32 },
                    has_min: matches!(d, DType::Q4_1 | DType::Q4K),
                }
            }
            (Source::Affine { bits, .. }, Mode::QuantN) => Step {
                k: g,
                units: bits,
                words: bits,
                funnel: false,
                sub: SPAN_COLUMNS,
                has_min: true,
            },
            (Source::Affine { bits, .. }, _) => Step {
                k: 32 * g,
                units: bits * g,
                words: bits * g,
                funnel: false,
                sub: 32,
                has_min: true,
            },
        }
    }

    /// Words of `qw` per row: the data and one more, which a decode of
    /// bytes that end inside the last word reads (and discards).
    fn qw(&self) -> u32 {
        self.words + 1
    }
}

/// How the kernel reads x.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum XLoad {
    /// vec4 storage loads along k.
    Inner,
    /// Scalar storage loads through both strides.
    Scalar,
    /// A uniform binding of the dense rows (`a_quads` quads).
    Uniform(u32),
}

/// The generator's view of one specialisation.
pub(crate) struct Spec {
    pub source: Source,
    /// `Mode::QuantK` or `Mode::QuantN`.
    pub mode: Mode,
    /// `GemmKernel::Quant`'s parameters, fitted to the product.
    pub wg: u32,
    pub tm: u32,
    pub nc: u32,
    pub g: u32,
    pub lanes: u32,
    pub x: XLoad,
    /// A fused epilogue: stores as one loop, and the kernel under it.
    pub epilogue: bool,
    /// Where a uniform x binds (after every storage binding).
    pub window_binding: usize,
}

/// The family's kernel and substitutions for `s`.
pub(crate) fn family(s: &Spec) -> Family {
    let step = Step::new(s.source, s.mode, s.g);
    let rows = if s.mode == Mode::QuantN { s.g } else { s.nc };
    let mut decls = Vec::new();
    for r in 0..s.tm {
        decls.push(match s.x {
            XLoad::Uniform(_) => {
                format!("let xrow_{r} = min(row0 + {r}u, p.m - 1u) * (p.k >> 2u);")
            }
            _ => format!("let arow_{r} = a_base + min(row0 + {r}u, p.m - 1u) * p.a_rs;"),
        });
    }
    let quads = s.nc / 4;
    if s.mode == Mode::QuantN {
        // One span of SPAN_COLUMNS columns: `bits` words of each row of W
        // from word `span0`, its scale's group `gcol`.
        let Source::Affine {
            bits, group_size, ..
        } = s.source
        else {
            unreachable!("x @ W is affine only (the planner's check)")
        };
        decls.push("let col = min(col0, last_col);".into());
        decls.push(format!("let span0 = (col / {SPAN_COLUMNS}u) * {bits}u;"));
        decls.push(format!("let gcol = col / {group_size}u;"));
    } else {
        for c in 0..s.nc {
            decls.push(format!("let col_{c} = min(col0 + {c}u, last_col);"));
            decls.push(format!("let wrow_{c} = p.b_off + col_{c} * p.b_cs;"));
        }
    }
    for r in 0..s.tm {
        for q in 0..quads {
            decls.push(format!("var acc_{r}_{q} = vec4<f32>(0.0);"));
        }
    }
    let body = match s.mode {
        Mode::QuantN => step_n(s, &step),
        _ if s.tm <= FACTORED_ROWS => step_factored(s, &step),
        _ => step_dequant(s, &step),
    };
    let steps = format!("(p.k / {}u)", step.k);
    let mut reduce = Vec::new();
    if s.lanes > 1 {
        for r in 0..s.tm {
            for q in 0..quads {
                let mut mask = s.lanes / 2;
                while mask > 0 {
                    reduce.push(format!(
                        "red[li] = acc_{r}_{q}; workgroupBarrier(); if lane < {mask}u {{ acc_{r}_{q} += red[li + {mask}u]; }} workgroupBarrier();"
                    ));
                    mask /= 2;
                }
            }
        }
    }
    let calls: Vec<[String; 3]> = (0..s.tm)
        .flat_map(|r| {
            (0..quads).map(move |q| {
                [
                    format!("row0 + {r}u"),
                    format!("(col0 >> 2u) + {q}u"),
                    format!("acc_{r}_{q}"),
                ]
            })
        })
        .collect();
    let looped = s.epilogue || calls.len() > 16;
    let mut stores = store_quads(&calls, "c_base", "out_base", looped);
    if s.lanes > 1 {
        stores.insert(0, "if lane == 0u {".into());
        stores.push("}".into());
    }
    let format = match s.source {
        Source::Blocks(_) => String::new(),
        Source::Affine { bits, scales, .. } => affine_functions(bits, scales),
    };
    let x_binding = match s.x {
        XLoad::Uniform(quads) => format!(
            "@group(0) @binding({}) var<uniform> xw: array<vec4<f32>, {quads}>;",
            s.window_binding
        ),
        _ => String::new(),
    };
    let red = if s.lanes > 1 {
        format!("var<workgroup> red: array<vec4<f32>, {}>;", s.wg * s.lanes)
    } else {
        String::new()
    };
    let subs = vec![
        ("WG", s.wg.to_string()),
        ("LANES", s.lanes.to_string()),
        ("TM", s.tm.to_string()),
        ("NC", s.nc.to_string()),
        ("QW", step.qw().to_string()),
        ("QROWS", rows.to_string()),
        ("STEPS", steps),
        ("FORMAT", format),
        ("X_BINDING", x_binding),
        ("RED", red),
        ("DECLS", indent(decls, 1)),
        ("STEP", indent(body, 2)),
        ("REDUCE", indent(reduce, 1)),
        ("EPILOGUE", indent(stores, 1)),
    ];
    let kernel = if s.epilogue {
        &GEMM_QUANT_FUSED
    } else {
        &GEMM_QUANT
    };
    let mut family = Family::new(kernel, subs);
    if let Source::Affine { .. } = s.source {
        family.reads = vec![("scales", "u32"), ("biases", "u32")];
    }
    if let XLoad::Uniform(quads) = s.x {
        family.windows = vec![16 * quads as u64];
    }
    family
}

/// Affine's decode functions (`FORMAT`): the scale and bias loads of
/// `scales` dtype, the quant of `bits` bits at bit `s` of word `w` of
/// `qw` (both constants where it is called), and a row's scale and offset
/// for a group (the bias words of the parameters hold the scales' and
/// biases' rows, see `wgsl/gemm_quant.wgsl`).
fn affine_functions(bits: u32, scales: DType) -> String {
    let mask = (1u64 << bits) - 1;
    format!(
        "{}\
         fn affine_q(w: u32, s: u32) -> f32 {{\n    \
             var v = q_word(w) >> s;\n    \
             if s + {bits}u > 32u {{\n        v = v | (q_word(w + 1u) << (32u - s));\n    }}\n    \
             return f32(v & {mask}u);\n}}\n\
         fn affine_dm(row: u32, g: u32) -> vec2<f32> {{\n    \
             return vec2<f32>(scales_at(p.c_off + row * p.c_rs + g), biases_at(p.c_cs + row * p._pad0 + g));\n}}\n",
        scale_loads(scales)
    )
}

/// The WGSL of four consecutive x of row `r` from k `k` (a multiple of
/// four), as f32.
fn x4(x: XLoad, r: u32, k: &str) -> String {
    match x {
        XLoad::Uniform(_) => format!("xw[xrow_{r} + (({k}) >> 2u)]"),
        XLoad::Inner => format!("a4(arow_{r} + {k})"),
        XLoad::Scalar => {
            let one = |d: u32| format!("a1(arow_{r} + ({k} + {d}u) * p.a_cs)");
            format!("vec4<f32>({}, {}, {}, {})", one(0), one(1), one(2), one(3))
        }
    }
}

/// The WGSL of x of row `r` at k `k`.
fn x1(x: XLoad, r: u32, k: &str) -> String {
    match x {
        XLoad::Uniform(_) => format!("xw[xrow_{r} + (({k}) >> 2u)][({k}) & 3u]"),
        XLoad::Inner | XLoad::Scalar => format!("a1(arow_{r} + ({k}) * p.a_cs)"),
    }
}

/// Statements loading one K step of a row of `W` into `qw[row]`: from
/// `start` (bytes, or words for affine), the aligned `vec4<u32>` chunks
/// that cover it, then each word picked by the start's word phase (and
/// shifted by two bytes where rows may start there).
fn load_row(row: u32, start: &str, step: &Step, words_unit: bool) -> Vec<String> {
    let mut out = vec![format!("let s0 = {start};")];
    if words_unit {
        out.push("let ch = s0 >> 2u;".into());
        out.push("let ws = s0 & 3u;".into());
    } else {
        out.push("let ch = s0 >> 4u;".into());
        out.push("let ws = (s0 >> 2u) & 3u;".into());
        if step.funnel {
            out.push("let odd = (s0 & 2u) != 0u;".into());
        }
    }
    let funnel = step.funnel as u32;
    let chunks = (step.words + 3 + funnel).div_ceil(4);
    for i in 0..chunks {
        out.push(format!("let l{i} = b[ch + {i}u];"));
    }
    let last = 4 * chunks - 1;
    let c = |i: u32| {
        let i = i.min(last);
        format!("l{}[{}]", i / 4, i % 4)
    };
    let words = step.qw();
    for j in 0..words + funnel {
        out.push(format!(
            "let v{j} = pick(ws, {}, {}, {}, {});",
            c(j),
            c(j + 1),
            c(j + 2),
            c(j + 3)
        ));
    }
    for j in 0..words {
        out.push(if step.funnel {
            format!("qw[{row}][{j}] = half_shift(odd, v{j}, v{});", j + 1)
        } else {
            format!("qw[{row}][{j}] = v{j};")
        });
    }
    out
}

/// The decode of element `e` (a multiple of four) of the step of row `row`:
/// its sub-block's scale and offset, and its quad of quants, as WGSL.
struct Decode<'a> {
    source: Source,
    step: &'a Step,
}

impl Decode<'_> {
    /// `(d, m)` of the sub-block holding element `e` of row `row`'s step
    /// (`col` its column of W, for affine scale loads).
    fn dm(&self, row: u32, e: u32, col: &str) -> String {
        match self.source {
            Source::Blocks(d) => {
                let (base, j) = self.block(d, row, e);
                format!(
                    "dm_{}({base}u, {j}u)",
                    format_name(d).expect("a block format")
                )
            }
            Source::Affine { group_size, .. } => format!(
                "affine_dm({col}, (st * {}u + {e}u) / {group_size}u)",
                self.step.k
            ),
        }
    }

    /// The four quants from element `e` of row `row`'s step.
    fn quad(&self, row: u32, e: u32) -> String {
        match self.source {
            Source::Blocks(d) => {
                let (base, j) = self.block(d, row, e);
                format!(
                    "quad_{}({base}u, {j}u)",
                    format_name(d).expect("a block format")
                )
            }
            Source::Affine { bits, .. } => {
                let one = |i: u32| {
                    let bit = (e + i) * bits;
                    format!(
                        "affine_q({}u, {}u)",
                        row * self.step.qw() + bit / 32,
                        bit % 32
                    )
                };
                format!("vec4<f32>({}, {}, {}, {})", one(0), one(1), one(2), one(3))
            }
        }
    }

    /// The byte of `qw` where the block of element `e` of row `row`
    /// starts, and `e`'s index in its block.
    fn block(&self, d: DType, row: u32, e: u32) -> (u32, u32) {
        let be = d.block_size() as u32;
        let base = 4 * row * self.step.qw() + (e / be) * d.size_in_bytes() as u32;
        (base, e % be)
    }
}

/// The step's loads of each row of W (`Mode::QuantK`).
fn load_rows(s: &Spec, step: &Step) -> Vec<String> {
    let mut out = Vec::new();
    let words = matches!(s.source, Source::Affine { .. });
    for c in 0..s.nc {
        out.push("{".into());
        let start = format!("wrow_{c} + st * {}u", step.units);
        out.extend(
            load_row(c, &start, step, words)
                .into_iter()
                .map(|l| format!("    {l}")),
        );
        out.push("}".into());
    }
    out
}

/// One K step, the matrix-vector form: per sub-block, the quants of each
/// row of W multiplied into each row of x, then scaled once.
fn step_factored(s: &Spec, step: &Step) -> Vec<String> {
    let dec = Decode {
        source: s.source,
        step,
    };
    let mut out = vec![format!("let kst = st * {}u;", step.k)];
    out.extend(load_rows(s, step));
    let nq = step.sub / 4;
    for sb in 0..step.k / step.sub {
        let e0 = sb * step.sub;
        out.push("{".into());
        for r in 0..s.tm {
            for i in 0..nq {
                out.push(format!(
                    "    let x{r}_{i} = {};",
                    x4(s.x, r, &format!("kst + {}u", e0 + 4 * i))
                ));
            }
            if step.has_min {
                let sum = (0..nq)
                    .map(|i| format!("x{r}_{i}"))
                    .collect::<Vec<_>>()
                    .join(" + ");
                out.push(format!("    let xs{r} = dot({sum}, vec4<f32>(1.0));"));
            }
        }
        for c in 0..s.nc {
            out.push("    {".into());
            out.push(format!(
                "        let dm = {};",
                dec.dm(c, e0, &format!("col_{c}"))
            ));
            for i in 0..nq {
                out.push(format!("        let q{i} = {};", dec.quad(c, e0 + 4 * i)));
            }
            let (q, lane) = (c / 4, c % 4);
            for r in 0..s.tm {
                let mut t = format!("q0 * x{r}_0");
                for i in 1..nq {
                    t = format!("fma(q{i}, x{r}_{i}, {t})");
                }
                let add = if step.has_min {
                    format!("fma(dm.x, dot({t}, vec4<f32>(1.0)), dm.y * xs{r})")
                } else {
                    format!("dm.x * dot({t}, vec4<f32>(1.0))")
                };
                out.push(format!("        acc_{r}_{q}[{lane}] += {add};"));
            }
            out.push("    }".into());
        }
        out.push("}".into());
    }
    out
}

/// One K step, the dequantizing form: each quad of each row of W
/// dequantized once (`q d + m`) and multiplied into every row of x, four
/// columns at a time as the register family does.
fn step_dequant(s: &Spec, step: &Step) -> Vec<String> {
    let dec = Decode {
        source: s.source,
        step,
    };
    let mut out = vec![format!("let kst = st * {}u;", step.k)];
    out.extend(load_rows(s, step));
    for sb in 0..step.k / step.sub {
        let e0 = sb * step.sub;
        out.push("{".into());
        for c in 0..s.nc {
            out.push(format!(
                "    let dm{c} = {};",
                dec.dm(c, e0, &format!("col_{c}"))
            ));
        }
        for i in 0..step.sub / 4 {
            let e = e0 + 4 * i;
            out.push("    {".into());
            for r in 0..s.tm {
                out.push(format!(
                    "        let x{r} = {};",
                    x4(s.x, r, &format!("kst + {e}u"))
                ));
            }
            for q in 0..s.nc / 4 {
                out.push("        {".into());
                for j in 0..4 {
                    let c = 4 * q + j;
                    out.push(format!(
                        "            let w{j} = fma({}, vec4<f32>(dm{c}.x), vec4<f32>(dm{c}.y));",
                        dec.quad(c, e)
                    ));
                }
                for kk in 0..4 {
                    out.push(format!(
                        "            let b{kk} = vec4<f32>(w0[{kk}], w1[{kk}], w2[{kk}], w3[{kk}]);"
                    ));
                }
                for r in 0..s.tm {
                    out.push(format!(
                        "            acc_{r}_{q} = fma(vec4<f32>(x{r}.w), b3, fma(vec4<f32>(x{r}.z), b2, fma(vec4<f32>(x{r}.y), b1, fma(vec4<f32>(x{r}.x), b0, acc_{r}_{q}))));"
                    ));
                }
                out.push("        }".into());
            }
            out.push("    }".into());
        }
        out.push("}".into());
    }
    out
}

/// One K step of `x @ W` (affine along n): `g` rows of W, each its span of
/// the thread's columns dequantized and multiplied into every row of x.
fn step_n(s: &Spec, step: &Step) -> Vec<String> {
    let dec = Decode {
        source: s.source,
        step,
    };
    let mut out = vec![format!("let kst = st * {}u;", s.g)];
    for kk in 0..s.g {
        out.push("{".into());
        let start = format!("p.b_off + (kst + {kk}u) * p.b_rs + span0");
        out.extend(
            load_row(kk, &start, step, true)
                .into_iter()
                .map(|l| format!("    {l}")),
        );
        out.push("}".into());
    }
    for kk in 0..s.g {
        out.push(format!(
            "let dm{kk} = vec2<f32>(scales_at(p.c_off + (kst + {kk}u) * p.c_rs + gcol), biases_at(p.c_cs + (kst + {kk}u) * p._pad0 + gcol));"
        ));
        for r in 0..s.tm {
            out.push(format!(
                "let x{r}_{kk} = {};",
                x1(s.x, r, &format!("kst + {kk}u"))
            ));
        }
    }
    for q in 0..SPAN_COLUMNS / 4 {
        for kk in 0..s.g {
            out.push(format!(
                "{{ let w = fma({}, vec4<f32>(dm{kk}.x), vec4<f32>(dm{kk}.y));",
                dec.quad(kk, 4 * q)
            ));
            for r in 0..s.tm {
                out.push(format!(
                    "    acc_{r}_{q} = fma(vec4<f32>(x{r}_{kk}), w, acc_{r}_{q});"
                ));
            }
            out.push("}".into());
        }
    }
    out
}

/// Fill in the family's parameter words after the GEMM's own block was
/// made for `g` (`common::params::gemm_params`): `W`'s offset and row
/// stride in its unit, and for affine the scales' and biases' rows (in
/// the bias's words, which the family never binds; see
/// `wgsl/gemm_quant.wgsl`).
///
/// # Errors
/// [`crate::Error::TooLarge`] for offsets or strides past `u32`.
pub(crate) fn put_params(p: &mut Params, g: &Gemm<'_>, mode: Mode) -> Result<()> {
    let stride = if mode == Mode::QuantN {
        g.b.strides[4]
    } else {
        g.b.strides[5]
    };
    p.put(7, [g.b.offset as i64, stride as i64, stride as i64])?;
    if let Some(q) = &g.quant
        && let (Some(s), Some(b)) = (&q.scales, &q.biases)
    {
        let words = |r: &Rows<'_>| [r.offset as i64, r.stride as i64];
        p.put(10, words(s))?;
        let [off, stride] = words(b);
        p.put(12, [off])?;
        p.put(3, [stride])?;
    }
    Ok(())
}
