//! The sort kernel (wgsl/sort.wgsl): a stable ascending bitonic sort of
//! each row, writing the sorted values and their original indices.

use super::bits::{order_key, store_element};
use super::elementwise::element_bits;
use super::{CONVERT, Context, Dispatch, Kernel, ORDER, Operand, Params, Spec, UNRAVEL, WORKGROUP};
use crate::graph::primitive::{SORT_BLOCK as BLOCK, sort_padded};
use crate::{DType, Result};

/// Every sort; keys, loads and stores generated per dtype.
pub(crate) static SORT: Kernel =
    Kernel::new("sort", &[CONVERT, UNRAVEL, ORDER], wgsl!("sort"), 1, 3);

/// Which pass of wgsl/sort.wgsl.
// Alike in shape to `scan.rs`'s `Pass`, but left apart: the passes of
// another kernel, numbered as its WGSL reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// Rows of up to one block: the whole sort in workgroup memory.
    Whole = 0,
    /// Longer rows: the stages up to one block, into the work buffer.
    Blocks = 1,
    /// One step with a stride of a block or more, a thread per pair.
    Global = 2,
    /// The steps of a stage with strides under a block.
    Merge = 3,
}

/// The specialisation for `dtype` (every pass: the pass is a parameter).
fn spec(dtype: DType) -> (Spec, &'static Kernel) {
    let key = order_key(dtype, "x");
    let bits = format!("    return {};", element_bits(dtype, "x", "i"));
    let (vals_type, store) = store_element(dtype, "vals");
    SORT.spec(&[
        ("KEY", &key),
        ("BITS", &bits),
        ("VALS_TYPE", vals_type),
        ("STORE", &store),
    ])
}

/// Every specialisation [`sort`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let packed = [DType::I8, DType::U8, DType::I16, DType::U16];
    crate::ops::WORD_DTYPES
        .iter()
        .chain(&packed)
        .map(|&d| spec(d))
        .collect()
}

/// Encode a stable ascending sort of every row of `x` (an array of
/// `shape`) along `axis` into dense `[rows, len]` outputs `vals` (x's
/// dtype) and `idx` (u32), rows in row-major order of the other axes.
/// `work` holds `sort_work_pairs` pairs (`graph::primitive`). One dispatch for rows of up to 1024
/// elements; for longer rows of padded length `P = 2^p`, `1 + sum over
/// stages s = 11..=p of (s - 9)` dispatches.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sort(
    cx: &Context,
    x: &Operand<'_>,
    shape: &[usize],
    axis: usize,
    vals: &wgpu::Buffer,
    idx: &wgpu::Buffer,
    work: &wgpu::Buffer,
) -> Result<Vec<Dispatch>> {
    let (outer, rows) = crate::shape::rows_along(shape, axis);
    let len = shape[axis];
    if rows == 0 || len == 0 {
        return Ok(Vec::new());
    }
    let big = sort_padded(len);
    // At most 2^31: checked when the sort was recorded (ops/sort.rs).
    let total = rows * big;
    let mut p = Params::new("sort");
    p.put(
        0,
        [
            rows as i64,
            len as i64,
            outer.len() as i64,
            big as i64,
            x.offset as i64,
            x.strides[axis] as i64,
        ],
    )?;
    p.put(8, outer.iter().map(|&d| shape[d] as i64))?;
    p.put(16, outer.iter().map(|&d| x.strides[d] as i64))?;
    let buffers = vec![x.buffer.clone(), work.clone(), vals.clone(), idx.clone()];
    let (spec, kernel) = spec(x.dtype);
    let pipeline = cx.cache.get(kernel, &spec)?;
    let wg = WORKGROUP as usize;
    let blocks = total.div_ceil(BLOCK);
    let dispatch = |pass: Pass, k: usize, j: usize, threads: usize| -> Result<Dispatch> {
        let mut p = p.clone();
        p.put(6, [pass as i64])?;
        p.put(24, [k as i64, j as i64])?;
        Ok(Dispatch::new(
            pipeline.clone(),
            p.words(),
            buffers.clone(),
            cx.grid(threads as u64)?,
        ))
    };
    if big <= BLOCK {
        return Ok(vec![dispatch(Pass::Whole, 0, 0, blocks * wg)?]);
    }
    let mut out = vec![dispatch(Pass::Blocks, 0, 0, blocks * wg)?];
    let mut k = 2 * BLOCK;
    while k <= big {
        let mut j = k / 2;
        while j >= BLOCK {
            out.push(dispatch(Pass::Global, k, j, total / 2)?);
            j /= 2;
        }
        out.push(dispatch(Pass::Merge, k, 0, blocks * wg)?);
        k *= 2;
    }
    Ok(out)
}
