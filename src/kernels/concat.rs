//! The concatenation kernel (wgsl/concat.wgsl): one dispatch per group of
//! up to [`MAX_GROUP`] inputs, each read through its own strides.

use super::{Dispatch, Kernel, PARAMS_WORDS, Spec, grid};
use crate::device::DeviceInner;
use crate::{Error, Result};

/// Concatenation of same-dtype inputs along an axis.
pub(crate) static CONCAT: Kernel = Kernel {
    name: "concat",
    prelude: &[],
    source: include_str!("../../wgsl/concat.wgsl"),
    reads: 1,
    writes: 1,
};

/// Inputs one dispatch reads at most: WebGPU guarantees 8 storage buffers
/// per shader stage, and the output takes one.
pub(crate) const MAX_GROUP: usize = 7;

/// Inputs of rank `ndim` whose parameters fit one dispatch's 64 words.
pub(crate) fn group_size(ndim: usize) -> usize {
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
        for bytes in [2, 4] {
            out.push(spec(nin, bytes));
        }
    }
    out
}

/// One input of a group: its buffer, element offset and strides (of the
/// output's rank), and where it starts along the axis.
pub(crate) struct Part<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: usize,
    pub strides: &'a [isize],
    pub start: usize,
    pub len: usize,
}

fn word(x: i64) -> Result<u32> {
    if !(i32::MIN as i64..=u32::MAX as i64).contains(&x) {
        return Err(Error::TooLarge {
            op: "concatenate",
            bytes: x.unsigned_abs(),
            max: u32::MAX as u64,
        });
    }
    Ok(x as u32) // negative values wrap on purpose
}

/// Encode the output elements of `parts` (consecutive along `axis`) into
/// the dense `out` of `shape` and a dtype of `bytes` bytes.
pub(crate) fn concat_group(
    dev: &DeviceInner,
    shape: &[usize],
    axis: usize,
    bytes: usize,
    parts: &[Part<'_>],
    out: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let n: usize = shape.iter().product();
    let nd = shape.len();
    if n == 0 || parts.is_empty() {
        return Ok(None);
    }
    if parts.len() > group_size(nd) {
        return Err(Error::Internal(format!(
            "a concatenate group of {} inputs of rank {nd}",
            parts.len()
        )));
    }
    let mut p = [0u32; PARAMS_WORDS];
    let inner: usize = shape[axis + 1..].iter().product();
    let first = parts[0].start;
    let last = &parts[parts.len() - 1];
    let head = [
        n as i64,
        nd as i64,
        inner as i64,
        shape[axis] as i64,
        first as i64,
        (last.start + last.len) as i64,
    ];
    let mut words: Vec<i64> = head.to_vec();
    words.extend(shape.iter().map(|&d| d as i64));
    for part in parts {
        // Only ever added to in-range terms: wrap it to u32 (mod 2^32).
        let base = part.offset as i64 - part.start as i64 * part.strides[axis] as i64;
        words.push(base.rem_euclid(1 << 32) as u32 as i32 as i64);
        words.push(part.start as i64);
        words.extend(part.strides.iter().map(|&s| s as i64));
    }
    for (slot, x) in p.iter_mut().zip(words) {
        *slot = word(x)?;
    }
    let (spec, kernel) = spec(parts.len(), bytes);
    let threads = if bytes == 2 { n.div_ceil(2) } else { n };
    let mut buffers: Vec<wgpu::Buffer> = parts.iter().map(|q| q.buffer.clone()).collect();
    buffers.push(out.clone());
    Ok(Some(Dispatch {
        pipeline: dev.kernels.get(kernel, &spec)?,
        params: p,
        buffers,
        workgroups: grid(
            threads as u64,
            dev.limits.max_compute_workgroups_per_dimension,
        )?,
    }))
}
