//! The top-k kernel (wgsl/topk.wgsl): values and indices of the k largest
//! elements along an axis, both written by one dispatch.

use super::{Dispatch, Kernel, PARAMS_WORDS, Spec, WORKGROUP, grid};
use crate::device::DeviceInner;
use crate::{DType, Error, Result};

/// Top-k along an axis; two outputs (values, u32 indices).
pub(crate) static TOPK: Kernel = Kernel {
    name: "topk",
    prelude: &[super::UNRAVEL],
    source: include_str!("../../wgsl/topk.wgsl"),
    reads: 1,
    writes: 2,
};

/// The largest `k` the kernel takes: each thread keeps `k` candidates in
/// private arrays.
pub(crate) const MAX_K: usize = 64;

/// The private list length for `k`: the next power of two.
fn kmax(k: usize) -> usize {
    k.max(1).next_power_of_two()
}

/// Whether one workgroup per row (else one thread per row) is used for rows
/// of `len` elements.
fn row_mode(len: usize) -> bool {
    len > WORKGROUP as usize
}

/// The specialisation for rows of `dtype`, lists of `kmax` and `row` mode.
pub(crate) fn spec(dtype: DType, kmax: usize, row: bool) -> (Spec, &'static Kernel) {
    let two = dtype.size_in_bytes() == 2;
    let raw = if two {
        "half_word(x[i >> 1u], i)"
    } else {
        "x[i]"
    };
    let key = match dtype {
        DType::F32 => "float_key(b, 0x80000000u, 0x7f800000u)",
        DType::F16 => "float_key(b, 0x8000u, 0x7c00u)",
        DType::BF16 => "float_key(b, 0x8000u, 0x7f80u)",
        DType::I32 => "b ^ 0x80000000u",
        DType::U32 | DType::Bool => "b",
    };
    let key = format!("    let b = {raw};\n    return {key};");
    let bits = format!("    return {raw};");
    let (vals_type, store) = if two {
        (
            "atomic<u32>",
            "    let w = q >> 1u;\n    let sh = (q & 1u) * 16u;\n    \
             atomicAnd(&vals[w], ~(0xffffu << sh));\n    atomicOr(&vals[w], v << sh);",
        )
    } else {
        ("u32", "    vals[q] = v;")
    };
    let mut insert = String::new();
    for j in 0..kmax {
        insert.push_str(&format!(
            "    if better(k, i, tk[{j}], ti[{j}]) {{\n        \
             let sk_ = tk[{j}];\n        let si_ = ti[{j}];\n        \
             tk[{j}] = k;\n        ti[{j}] = i;\n        k = sk_;\n        i = si_;\n    }}\n"
        ));
    }
    TOPK.spec(&[
        ("ROW", if row { "true" } else { "false" }),
        ("KMAX", &kmax.to_string()),
        ("KEY", &key),
        ("BITS", &bits),
        ("VALS_TYPE", vals_type),
        ("STORE", store),
        ("INSERT", &insert),
    ])
}

/// Every specialisation [`topk`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for d in DType::ALL {
        let mut k = 1;
        while k <= MAX_K {
            for row in [false, true] {
                out.push(spec(d, k, row));
            }
            k *= 2;
        }
    }
    out
}

/// The input of a top-k: rows over the kept axes (`outer`), `len` elements
/// each `stride` apart along the axis, from element `offset`.
pub(crate) struct TopkInput<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub dtype: DType,
    pub offset: usize,
    pub outer_shape: Vec<usize>,
    pub outer_strides: Vec<isize>,
    pub len: usize,
    pub stride: isize,
}

/// Encode top-`k` of every row of `x` into dense `[rows, k]` outputs `vals`
/// (x's dtype) and `idx` (u32).
pub(crate) fn topk(
    dev: &DeviceInner,
    x: &TopkInput<'_>,
    k: usize,
    vals: &wgpu::Buffer,
    idx: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let rows: usize = x.outer_shape.iter().product();
    if rows == 0 || k == 0 {
        return Ok(None);
    }
    if k > MAX_K || k > x.len {
        return Err(Error::Internal(format!("topk with k = {k}")));
    }
    if x.outer_shape.len() > 8 {
        return Err(Error::InvalidArgument(
            "topk takes at most 9 dimensions".into(),
        ));
    }
    let mut words: Vec<i64> = vec![
        rows as i64,
        x.len as i64,
        k as i64,
        x.outer_shape.len() as i64,
        x.offset as i64,
        x.stride as i64,
        0,
        0,
    ];
    let mut shape = [0i64; 8];
    let mut strides = [0i64; 8];
    for (d, (&s, &t)) in x.outer_shape.iter().zip(&x.outer_strides).enumerate() {
        shape[d] = s as i64;
        strides[d] = t as i64;
    }
    words.extend(shape);
    words.extend(strides);
    let mut p = [0u32; PARAMS_WORDS];
    for (slot, w) in p.iter_mut().zip(words) {
        if !(i32::MIN as i64..=u32::MAX as i64).contains(&w) {
            return Err(Error::TooLarge {
                op: "topk",
                bytes: w.unsigned_abs(),
                max: u32::MAX as u64,
            });
        }
        *slot = w as u32; // negative strides wrap on purpose
    }
    let row = row_mode(x.len);
    let (spec, kernel) = spec(x.dtype, kmax(k), row);
    let max = dev.limits.max_compute_workgroups_per_dimension;
    let workgroups = if row {
        grid(rows as u64 * WORKGROUP as u64, max)?
    } else {
        grid(rows as u64, max)?
    };
    Ok(Some(Dispatch {
        pipeline: dev.kernels.get(kernel, &spec)?,
        params: p,
        buffers: vec![x.buffer.clone(), vals.clone(), idx.clone()],
        workgroups,
    }))
}
