//! The concatenation kernel (wgsl/concat.wgsl): one dispatch per group of
//! up to [`MAX_GROUP`] inputs, each read through its own strides.

use super::{CONVERT, Context, Dispatch, Kernel, Operand, PARAMS_WORDS, Params, Spec};
use crate::{DType, Result};

/// Concatenation of same-dtype inputs along an axis.
pub(crate) static CONCAT: Kernel = Kernel::new("concat", &[CONVERT], wgsl!("concat"), 1, 1);

/// Inputs one dispatch reads at most: WebGPU guarantees 8 storage buffers
/// per shader stage, and the output takes one.
pub(crate) const MAX_GROUP: usize = 7;

/// Inputs of rank `ndim` whose parameters fit one dispatch's 64 words.
fn group_size(ndim: usize) -> usize {
    ((PARAMS_WORDS - 6 - ndim) / (ndim + 2)).min(MAX_GROUP)
}

/// The specialisation for `nin` inputs of a dtype of `bytes` bytes.
pub(crate) fn spec(nin: usize, bytes: usize) -> (Spec, &'static Kernel) {
    let mut bindings = String::new();
    let mut load = String::from("    switch j {\n");
    for j in 0..nin {
        bindings.push_str(&format!(
            "@group(0) @binding({}) var<storage, read> in{j}: array<u32>;\n",
            1 + j
        ));
        if j + 1 < nin {
            load.push_str(&format!("        case {j}u: {{ return in{j}[i]; }}\n"));
        } else {
            load.push_str(&format!("        default: {{ return in{j}[i]; }}\n"));
        }
    }
    load.push_str("    }");
    bindings.push_str(&format!(
        "@group(0) @binding({}) var<storage, read_write> out: array<u32>;\n",
        1 + nin
    ));
    CONCAT.spec_with_bindings(
        &[
            ("NIN", &nin.to_string()),
            ("OUT_BYTES", &bytes.to_string()),
            ("BINDINGS", &bindings),
            ("LOAD_WORD", &load),
        ],
        nin as u32,
        1,
    )
}

/// Every specialisation [`concat_group`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for nin in 1..=MAX_GROUP {
        for bytes in [1, 2, 4] {
            out.push(spec(nin, bytes));
        }
    }
    out
}

/// One input: its operand (strides over the output's axes) and where it
/// starts along the joined axis, and its length there.
pub(crate) struct Part<'a> {
    pub src: Operand<'a>,
    pub start: usize,
    pub len: usize,
}

/// Encode `out` (dense, of `shape`, elements of the parts' dtype) as the
/// `parts` joined along `axis`, in order: one dispatch per group of inputs
/// whose bindings and parameters fit one dispatch.
pub(crate) fn concat(
    cx: &Context,
    shape: &[usize],
    axis: usize,
    parts: &[Part<'_>],
    out: &wgpu::Buffer,
) -> Result<Vec<Dispatch>> {
    if parts
        .first()
        .is_some_and(|p| p.src.dtype.size_in_bytes() == 8)
    {
        // An 8-byte element is two words: join words, over an extra last
        // axis of length 2 (stride 1) and doubled strides and offsets.
        let mut words_shape = shape.to_vec();
        words_shape.push(2);
        let words: Vec<Part<'_>> = parts
            .iter()
            .map(|p| {
                let mut strides: Vec<isize> = p.src.strides.iter().map(|s| 2 * s).collect();
                strides.push(1);
                Part {
                    src: Operand {
                        buffer: p.src.buffer,
                        dtype: DType::U32,
                        offset: 2 * p.src.offset,
                        strides,
                    },
                    start: p.start,
                    len: p.len,
                }
            })
            .collect();
        return concat(cx, &words_shape, axis, &words, out);
    }
    // Axes of length 1 (but the joined one) carry no index: dropping them
    // leaves parameter room for more inputs per dispatch.
    let keep: Vec<usize> = (0..shape.len())
        .filter(|&d| d == axis || shape[d] != 1)
        .collect();
    let kept_shape: Vec<usize> = keep.iter().map(|&d| shape[d]).collect();
    let kept_axis = keep.iter().position(|&d| d == axis).unwrap_or(0);
    let parts: Vec<Part<'_>> = parts
        .iter()
        .filter(|p| p.len > 0)
        .map(|p| Part {
            src: Operand {
                buffer: p.src.buffer,
                dtype: p.src.dtype,
                offset: p.src.offset,
                strides: keep.iter().map(|&d| p.src.strides[d]).collect(),
            },
            start: p.start,
            len: p.len,
        })
        .collect();
    let mut out_dispatches = Vec::new();
    for group in parts.chunks(group_size(kept_shape.len())) {
        out_dispatches.extend(concat_group(cx, &kept_shape, kept_axis, group, out)?);
    }
    Ok(out_dispatches)
}

/// Encode the output elements of `parts` (consecutive along `axis`) into
/// the dense `out` of `shape`.
fn concat_group(
    cx: &Context,
    shape: &[usize],
    axis: usize,
    parts: &[Part<'_>],
    out: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let n: usize = shape.iter().product();
    let nd = shape.len();
    if n == 0 || parts.is_empty() {
        return Ok(None);
    }
    let bytes = parts[0].src.dtype.size_in_bytes();
    let inner: usize = shape[axis + 1..].iter().product();
    let first = parts[0].start;
    let last = &parts[parts.len() - 1];
    let mut words: Vec<i64> = vec![
        n as i64,
        nd as i64,
        inner as i64,
        shape[axis] as i64,
        first as i64,
        (last.start + last.len) as i64,
    ];
    words.extend(shape.iter().map(|&d| d as i64));
    for part in parts {
        // Only ever added to in-range terms: wrap it to u32 (mod 2^32).
        let base = part.src.offset as i64 - part.start as i64 * part.src.strides[axis] as i64;
        words.push(base.rem_euclid(1 << 32) as u32 as i32 as i64);
        words.push(part.start as i64);
        words.extend(part.src.strides.iter().map(|&s| s as i64));
    }
    let mut p = Params::new("concatenate");
    p.put(0, words)?;
    let (spec, kernel) = spec(parts.len(), bytes);
    let threads = n.div_ceil(4 / bytes);
    let mut buffers: Vec<wgpu::Buffer> = parts.iter().map(|q| q.src.buffer.clone()).collect();
    buffers.push(out.clone());
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline: cx.cache.get(kernel, &spec)?,
        params: p.words(),
        buffers,
        workgroups: cx.grid(threads as u64)?,
    }))
}
