//! The top-k kernel (wgsl/topk.wgsl): values and indices of the k largest
//! elements along an axis, both written by one dispatch.

use super::bits::{order_key, store_element};
use super::elementwise::element_bits;
use super::{CONVERT, Context, Dispatch, Kernel, ORDER, Operand, Params, Spec, UNRAVEL, WORKGROUP};
use crate::graph::primitive::MAX_TOPK;
use crate::{DType, Error, Result};

/// Top-k along an axis; two outputs (values, u32 indices).
pub(crate) static TOPK: Kernel =
    Kernel::new("topk", &[CONVERT, UNRAVEL, ORDER], wgsl!("topk"), 1, 2);

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
    let key = order_key(dtype, "x");
    let bits = format!("    return {};", element_bits(dtype, "x", "i"));
    let (vals_type, store) = store_element(dtype, "vals");
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
        ("STORE", &store),
        ("INSERT", &insert),
    ])
}

/// Every specialisation [`topk`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for d in DType::ALL {
        if d == DType::F64 {
            continue;
        }
        let mut k = 1;
        while k <= MAX_TOPK {
            for row in [false, true] {
                out.push(spec(d, k, row));
            }
            k *= 2;
        }
    }
    out
}

/// Encode top-`k` of every row of `x` (an array of `shape`) along `axis`
/// into dense `[rows, k]` outputs `vals` (x's dtype) and `idx` (u32), rows
/// in row-major order of the other axes.
pub(crate) fn topk(
    cx: &Context,
    x: &Operand<'_>,
    shape: &[usize],
    axis: usize,
    k: usize,
    vals: &wgpu::Buffer,
    idx: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let outer: Vec<usize> = (0..shape.len()).filter(|&d| d != axis).collect();
    let rows: usize = outer.iter().map(|&d| shape[d]).product();
    let len = shape[axis];
    if rows == 0 || k == 0 {
        return Ok(None);
    }
    if k > MAX_TOPK || k > len {
        return Err(Error::Internal(format!("topk with k = {k}")));
    }
    if outer.len() > 8 {
        return Err(Error::InvalidArgument(
            "topk takes at most 9 dimensions".into(),
        ));
    }
    let mut p = Params::new("topk");
    p.put(
        0,
        [
            rows as i64,
            len as i64,
            k as i64,
            outer.len() as i64,
            x.offset as i64,
            x.strides[axis] as i64,
        ],
    )?;
    p.put(8, outer.iter().map(|&d| shape[d] as i64))?;
    p.put(16, outer.iter().map(|&d| x.strides[d] as i64))?;
    let row = row_mode(len);
    let (spec, kernel) = spec(x.dtype, kmax(k), row);
    let threads = if row {
        rows as u64 * WORKGROUP as u64
    } else {
        rows as u64
    };
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline: cx.cache.get(kernel, &spec)?,
        params: p.words(),
        buffers: vec![x.buffer.clone(), vals.clone(), idx.clone()],
        workgroups: cx.grid(threads)?,
    }))
}
