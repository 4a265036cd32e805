//! The quantization kernels: dequantize (`wgsl/quant_dequant.wgsl`) for
//! ggml's block formats and MLX's affine quantization, and MLX's affine
//! quantize (`wgsl/quant_quantize.wgsl`).
//!
//! Block formats are data for one generator, as llama.cpp's Vulkan
//! backend keeps them in one include (`dequant_funcs.comp`): each format
//! is its block geometry (`DType::block_size`, `DType::size_in_bytes`) and
//! a pair of WGSL functions in `wgsl/quant_blocks.wgsl` (`dm_F`, `quad_F`:
//! a sub-block's scale and offset, four elements' quants), named by
//! [`format_name`]. The dequantize kernel calls them per span of 32
//! elements; a GEMM family that reads block-format weights includes the
//! same file (its prelude [`QUANT_BLOCKS`]) and calls the same functions
//! from its own loads, defining `q_word` over its weights binding.

use super::elementwise::{decode, element_bits};
use super::{Context, Dispatch, Kernel, Params, QuickKey, Spec};
use crate::{DType, Error, Result};

/// The block formats' decode functions (`wgsl/quant_blocks.wgsl`); a
/// kernel that includes it defines `fn q_word(i: u32) -> u32` and has
/// `wgsl/convert.wgsl` before it.
pub(crate) const QUANT_BLOCKS: &str = include_str!("../../wgsl/quant_blocks.wgsl");

/// Dequantize rows of block-format or affine weights.
pub(crate) static DEQUANT: Kernel = Kernel {
    name: "quant_dequant",
    prelude: &[super::CONVERT, QUANT_BLOCKS],
    source: include_str!("../../wgsl/quant_dequant.wgsl"),
    reads: 1,
    writes: 1,
};

/// MLX's affine quantize: one input, three outputs.
pub(crate) static QUANTIZE: Kernel = Kernel {
    name: "quant_quantize",
    prelude: &[super::CONVERT],
    source: include_str!("../../wgsl/quant_quantize.wgsl"),
    reads: 1,
    writes: 3,
};

/// Elements of one thread's span: every block and every affine group is a
/// whole number of spans.
pub(crate) const SPAN: usize = 32;

/// The suffix of a block format's functions in `wgsl/quant_blocks.wgsl`
/// (`dm_q4_0`, `quad_q4_0`, ...), `None` for an element dtype.
pub(crate) fn format_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::Q4_0 => "q4_0",
        DType::Q4_1 => "q4_1",
        DType::Q8_0 => "q8_0",
        DType::Q4K => "q4_k",
        DType::Q6K => "q6_k",
        _ => return None,
    })
}

/// Where dequantized elements come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    /// A block format (the dtype), rows addressed in bytes.
    Blocks(DType),
    /// MLX's affine quantization: `bits`-bit quants in u32 words (rows
    /// addressed in words), one scale and bias of dtype `scales` per
    /// `group_size` elements.
    Affine {
        bits: u32,
        group_size: u32,
        scales: DType,
    },
}

impl Source {
    /// What the kernel is specialised on: affine bits and group sizes are
    /// parameter words, so one pipeline serves them all.
    fn spec_key(self) -> Source {
        match self {
            Source::Affine { scales, .. } => Source::Affine {
                bits: 0,
                group_size: 0,
                scales,
            },
            s => s,
        }
    }
}

/// The compact key of a quantization kernel's specialisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum QuantKey {
    Dequant { source: Source, out: DType },
    Quantize { dtype: DType },
}

/// The wgsl/convert.wgsl function rounding f32 bits to a 2-byte float
/// dtype's (f16 or bf16).
fn half_encoder(dtype: DType) -> &'static str {
    if dtype == DType::F16 {
        "f32_to_f16_bits"
    } else {
        "f32_to_bf16_bits"
    }
}

/// Statements of `fn store4(o, v)`: four f32 values rounded into elements
/// `o..o + 4` (`o` a multiple of 4) of the dense output `out` of `dtype`.
fn store4(dtype: DType) -> String {
    match dtype {
        DType::F32 => "    out[o] = bitcast<u32>(v.x);\n    out[o + 1u] = bitcast<u32>(v.y);\n    \
                       out[o + 2u] = bitcast<u32>(v.z);\n    out[o + 3u] = bitcast<u32>(v.w);"
            .to_string(),
        _ => {
            let f = half_encoder(dtype);
            format!(
                "    let h = o >> 1u;\n    \
                 out[h] = {f}(bitcast<u32>(v.x)) | ({f}(bitcast<u32>(v.y)) << 16u);\n    \
                 out[h + 1u] = {f}(bitcast<u32>(v.z)) | ({f}(bitcast<u32>(v.w)) << 16u);"
            )
        }
    }
}

/// The dequantize kernel for `source` into `out` (f32, f16 or bf16); for
/// affine weights the bits and group size are parameter words.
pub(crate) fn dequant_spec(source: Source, out: DType) -> (Spec, &'static Kernel) {
    let out_binding = "@group(0) @binding({}) var<storage, read_write> out: array<u32>;";
    let w_binding = "@group(0) @binding(1) var<storage, read> w: array<u32>;\n";
    let (bindings, helpers, base, dm, quad, reads) = match source {
        Source::Blocks(d) => {
            let f = format_name(d).expect("a block format");
            let (block, bytes) = (d.block_size(), d.size_in_bytes());
            (
                format!("{w_binding}{}", out_binding.replace("{}", "2")),
                String::new(),
                format!("    return p.w.x + row * p.w.y + (j / {block}u) * {bytes}u;"),
                format!("    return dm_{f}(base, j % {block}u);"),
                format!("    return quad_{f}(base, j % {block}u);"),
                1,
            )
        }
        Source::Affine { scales, .. } => {
            let load = |name: &str| {
                let b = element_bits(scales, name, "i");
                format!(
                    "fn {name}_at(i: u32) -> f32 {{\n    return {};\n}}\n",
                    decode(scales, &b)
                )
            };
            let helpers = format!(
                "// Value e of the bit stream of `p.sb.w`-bit values whose first word is\n\
                 // `base`.\n\
                 fn affine_q(base: u32, e: u32) -> f32 {{\n    \
                     let bits = p.sb.w;\n    \
                     let b = e * bits;\n    let i = base + (b >> 5u);\n    let s = b & 31u;\n    \
                     var v = q_word(i) >> s;\n    \
                     if s + bits > 32u {{\n        v = v | (q_word(i + 1u) << (32u - s));\n    }}\n    \
                     return f32(v & ((1u << bits) - 1u));\n}}\n{}{}",
                load("scales"),
                load("biases")
            );
            (
                format!(
                    "{w_binding}@group(0) @binding(2) var<storage, read> scales: array<u32>;\n\
                     @group(0) @binding(3) var<storage, read> biases: array<u32>;\n{}",
                    out_binding.replace("{}", "4")
                ),
                helpers,
                "    return p.w.x + row * p.w.y + (j / 32u) * p.sb.w;".to_string(),
                "    let g = j / p.sb.z;\n    \
                 return vec2<f32>(scales_at(p.w.z + row * p.w.w + g), \
                 biases_at(p.sb.x + row * p.sb.y + g));"
                    .to_string(),
                "    let e = j & 31u;\n    \
                 return vec4<f32>(affine_q(base, e), affine_q(base, e + 1u), \
                 affine_q(base, e + 2u), affine_q(base, e + 3u));"
                    .to_string(),
                3,
            )
        }
    };
    DEQUANT.spec_with_bindings(
        &[
            ("BINDINGS", &bindings),
            ("HELPERS", &helpers),
            ("BASE", &base),
            ("DM", &dm),
            ("QUAD", &quad),
            ("STORE", &store4(out)),
        ],
        reads,
        1,
    )
}

/// The affine quantize kernel for input `dtype` (bits and group size are
/// parameter words).
pub(crate) fn quantize_spec(dtype: DType) -> (Spec, &'static Kernel) {
    let load = format!(
        "    return {};",
        decode(dtype, &element_bits(dtype, "w", "i"))
    );
    let scales = match dtype {
        DType::F32 => "    scales[2u * t] = bitcast<u32>(s0);\n    biases[2u * t] = bitcast<u32>(b0);\n    \
                       if 2u * t + 1u < p.head.x {\n        scales[2u * t + 1u] = bitcast<u32>(s1);\n        \
                       biases[2u * t + 1u] = bitcast<u32>(b1);\n    }"
            .to_string(),
        _ => {
            let f = half_encoder(dtype);
            format!(
                "    scales[t] = {f}(bitcast<u32>(s0)) | ({f}(bitcast<u32>(s1)) << 16u);\n    \
                 biases[t] = {f}(bitcast<u32>(b0)) | ({f}(bitcast<u32>(b1)) << 16u);"
            )
        }
    };
    QUANTIZE.spec(&[("LOAD", &load), ("SCALES", &scales)])
}

/// The float dtypes scales, activations and dequantized outputs take.
pub(crate) const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// The bit widths of MLX's affine quantization.
pub(crate) const AFFINE_BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];

/// The group sizes of MLX's affine quantization.
pub(crate) const AFFINE_GROUP_SIZES: [u32; 3] = [32, 64, 128];

/// Every specialisation [`dequantize`] and [`quantize`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for &o in &FLOATS {
        for d in DType::BLOCK_FORMATS {
            out.push(dequant_spec(Source::Blocks(d), o));
        }
        for &s in &FLOATS {
            let source = Source::Affine {
                bits: 0,
                group_size: 0,
                scales: s,
            };
            out.push(dequant_spec(source, o));
        }
        out.push(quantize_spec(o));
    }
    out
}

/// Rows of one operand: a buffer, the offset of row 0 and the stride from
/// one row to the next, in the unit its kernel reads (bytes for block
/// formats, words for affine quants, elements for scales and biases).
pub(crate) struct Rows<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: usize,
    pub stride: usize,
}

/// Encode the dequantization of `rows` rows of `row_len` elements (a
/// multiple of [`SPAN`]) from `w` (and, for affine, `scales` and `biases`)
/// into the dense `out` of `out_dtype`. `None` when there is nothing to do.
///
/// # Errors
/// [`Error::TooLarge`] for offsets or strides past the kernels' 32-bit
/// indices; [`Error::Kernel`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn dequantize(
    cx: &Context,
    source: Source,
    w: &Rows<'_>,
    scales: Option<&Rows<'_>>,
    biases: Option<&Rows<'_>>,
    rows: usize,
    row_len: usize,
    out: &wgpu::Buffer,
    out_dtype: DType,
) -> Result<Option<Dispatch>> {
    if rows == 0 || row_len == 0 {
        return Ok(None);
    }
    if !row_len.is_multiple_of(SPAN) {
        return Err(Error::Internal(format!(
            "dequantize: rows of {row_len} elements"
        )));
    }
    let spans = row_len / SPAN;
    let threads = rows.saturating_mul(spans);
    let mut p = Params::new("dequantize");
    p.put(
        0,
        [threads, spans, row_len, 0, w.offset, w.stride].map(|v| v as i64),
    )?;
    let mut buffers = vec![w.buffer.clone()];
    if let (Some(s), Some(b)) = (scales, biases) {
        p.put(
            6,
            [s.offset, s.stride, b.offset, b.stride].map(|v| v as i64),
        )?;
        if let Source::Affine {
            bits, group_size, ..
        } = source
        {
            p.put(10, [group_size, bits].map(i64::from))?;
        }
        buffers.push(s.buffer.clone());
        buffers.push(b.buffer.clone());
    }
    buffers.push(out.clone());
    let source = source.spec_key();
    let key = QuickKey::Quant(QuantKey::Dequant {
        source,
        out: out_dtype,
    });
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline: cx
            .cache
            .get_quick(key, || dequant_spec(source, out_dtype))?,
        params: p.words(),
        buffers,
        workgroups: cx.grid(threads as u64)?,
    }))
}

/// Encode MLX's affine quantization of `groups` groups of `group_size`
/// elements of `w` (of `dtype`; rows of `per_row` groups, row 0 at element
/// `offset`, rows `stride` elements apart) into the dense `wq`, `scales`
/// and `biases`. `None` when there is nothing to do.
///
/// # Errors
/// As [`dequantize`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn quantize(
    cx: &Context,
    dtype: DType,
    bits: u32,
    group_size: u32,
    w: &Rows<'_>,
    groups: usize,
    per_row: usize,
    wq: &wgpu::Buffer,
    scales: &wgpu::Buffer,
    biases: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    if groups == 0 {
        return Ok(None);
    }
    let mut p = Params::new("quantize");
    p.put(0, [groups, per_row, w.offset, w.stride].map(|v| v as i64))?;
    p.put(4, [group_size, bits].map(i64::from))?;
    let key = QuickKey::Quant(QuantKey::Quantize { dtype });
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline: cx.cache.get_quick(key, || quantize_spec(dtype))?,
        params: p.words(),
        buffers: vec![w.buffer.clone(), wq.clone(), scales.clone(), biases.clone()],
        workgroups: cx.grid(groups.div_ceil(2) as u64)?,
    }))
}
