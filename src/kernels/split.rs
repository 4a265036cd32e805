//! The split kernel (wgsl/split.wgsl): every live part of a split written
//! by one dispatch, each a dense output of its own.

use super::{Context, Dispatch, Kernel, Operand, Params, Spec};
use crate::Result;

/// A split of one input into up to [`MAX_PARTS`] dense outputs.
pub(crate) static SPLIT: Kernel = Kernel {
    name: "split",
    prelude: &[super::CONVERT],
    source: include_str!("../../wgsl/split.wgsl"),
    reads: 1,
    writes: 1,
};

/// Parts one dispatch writes at most: WebGPU guarantees 8 storage buffers
/// per shader stage, and the input takes one.
pub(crate) const MAX_PARTS: usize = 7;

/// Dimensions the parameter block holds.
pub(crate) const MAX_DIMS: usize = 8;

/// The specialisation for `nout` parts of a dtype of `bytes` bytes (1, 2
/// or 4).
fn spec(nout: usize, bytes: usize) -> (Spec, &'static Kernel) {
    let mut bindings = String::new();
    let mut store = String::from("    switch j {\n");
    for j in 0..nout {
        bindings.push_str(&format!(
            "@group(0) @binding({}) var<storage, read_write> out{j}: array<u32>;\n",
            2 + j
        ));
        let case = if j + 1 < nout {
            format!("case {j}u")
        } else {
            "default".to_string()
        };
        store.push_str(&format!("        {case}: {{ out{j}[i] = v; }}\n"));
    }
    store.push_str("    }");
    SPLIT.spec_with_bindings(
        &[
            ("NOUT", &nout.to_string()),
            ("OUT_BYTES", &bytes.to_string()),
            ("BINDINGS", &bindings),
            ("STORE", &store),
        ],
        1,
        nout as u32,
    )
}

/// Every specialisation [`split`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for nout in 1..=MAX_PARTS {
        for bytes in [1, 2, 4] {
            out.push(spec(nout, bytes));
        }
    }
    out
}

/// One part: its start and length along the axis and its dense output.
pub(crate) struct Part<'a> {
    pub start: usize,
    pub len: usize,
    pub out: &'a wgpu::Buffer,
}

/// Whether [`split`] takes an input of `ndim` dimensions, elements of
/// `bytes` bytes, and `parts` parts.
pub(crate) fn fits(ndim: usize, bytes: usize, parts: usize) -> bool {
    ndim <= MAX_DIMS && matches!(bytes, 1 | 2 | 4) && (1..=MAX_PARTS).contains(&parts)
}

/// Encode the `parts` of `src` (of `shape`, strides over its axes) along
/// `axis`, each into its dense output: one dispatch (see [`fits`]), none
/// when every part is empty.
pub(crate) fn split(
    cx: &Context,
    src: &Operand<'_>,
    shape: &[usize],
    axis: usize,
    parts: &[Part<'_>],
) -> Result<Option<Dispatch>> {
    let bytes = src.dtype.size_in_bytes();
    debug_assert!(fits(shape.len(), bytes, parts.len()));
    let epw = 4 / bytes;
    let other: usize = shape
        .iter()
        .enumerate()
        .filter(|&(d, _)| d != axis)
        .map(|(_, &s)| s)
        .product();
    let mut p = Params::new("split");
    let mut words = 0usize;
    for (j, part) in parts.iter().enumerate() {
        let elements = other * part.len;
        // Only ever added to in-range terms: wrap it to u32 (mod 2^32).
        let base = src.offset as i64 + part.start as i64 * src.strides[axis] as i64;
        p.put(
            20 + 4 * j,
            [
                base.rem_euclid(1 << 32) as u32 as i32 as i64,
                part.len as i64,
                words as i64,
                elements as i64,
            ],
        )?;
        words += elements.div_ceil(epw);
    }
    if words == 0 {
        return Ok(None);
    }
    p.put(0, [words as i64, shape.len() as i64, axis as i64, 0])?;
    p.put(4, shape.iter().map(|&s| s as i64))?;
    p.put(12, src.strides.iter().map(|&s| s as i64))?;
    let (spec, kernel) = spec(parts.len(), bytes);
    let mut buffers = vec![src.buffer.clone()];
    buffers.extend(parts.iter().map(|part| part.out.clone()));
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline: cx.cache.get(kernel, &spec)?,
        params: p.words(),
        buffers,
        workgroups: cx.grid(words as u64)?,
    }))
}
