//! The scan kernel (wgsl/scan.wgsl): cumsum, cumprod, cummax and cummin
//! along an axis, reduce-then-scan in blocks of 1024 elements.

use super::bits::store_element;
use super::elementwise::{compute_type, decode, element_bits, encode};
use super::{CONVERT, Context, Dispatch, Kernel, Operand, Params, Spec, UNRAVEL, WORKGROUP};
use crate::graph::primitive::ReduceOp;
use crate::{DType, Result};

/// Every scan; accumulator, loads and stores generated per specialisation.
pub(crate) static SCAN: Kernel = Kernel::new("scan", &[CONVERT, UNRAVEL], wgsl!("scan"), 1, 2);

/// Elements per block of the block passes (wgsl/scan.wgsl `BLOCK`).
const BLOCK: usize = 1024;

/// Rows up to this long are scanned by one thread each (pass 0).
const SERIAL_MAX: usize = 64;

/// The scan ops: the reductions a scan can fold with.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const OPS: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];

/// Which pass of wgsl/scan.wgsl.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    /// A thread per row.
    Serial = 0,
    /// Block totals.
    Reduce = 1,
    /// Exclusive scan of each row's block totals.
    Totals = 2,
    /// Scan each block from its prefix.
    Blocks = 3,
}

/// The specialisation for `op` reading `input` and writing `out` (every
/// pass: the pass is a parameter).
fn spec(op: ReduceOp, input: DType, out: DType) -> (Spec, &'static Kernel) {
    let ct = compute_type(out);
    let [acc, init, lift, comb, _] = op.parts(ct);
    let mut value = decode(input, "b");
    if compute_type(input) != ct {
        value = format!("{ct}({value})");
    }
    let load = format!(
        "    let b = {};\n    return {value};",
        element_bits(input, "x", "i")
    );
    let (out_type, store) = store_element(out, "out");
    let store = format!("    let v = {};\n{store}", encode(out, "a.v", ct));
    SCAN.spec(&[
        ("ACC", &acc),
        ("INIT", &init),
        ("LIFT", &lift),
        ("COMBINE", &comb),
        ("CT", ct),
        ("LOAD", &load),
        ("OUT_TYPE", out_type),
        ("STORE", &store),
    ])
}

/// Every specialisation [`scan`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for op in OPS {
        for d in crate::ops::WORD_DTYPES {
            out.push(spec(op, d, op.scan_dtype(d)));
        }
    }
    out
}

/// Encode a scan with `op` of `x` (an array of `shape`) along `axis` into
/// `out` (dense, `out_dtype`: `ReduceOp::scan_dtype`, x's shape). `totals` holds one word per
/// block of every row (see [`totals_words`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan(
    cx: &Context,
    op: ReduceOp,
    x: &Operand<'_>,
    shape: &[usize],
    axis: usize,
    reverse: bool,
    inclusive: bool,
    out: &wgpu::Buffer,
    out_dtype: DType,
    totals: &wgpu::Buffer,
) -> Result<Vec<Dispatch>> {
    let (outer, rows) = crate::shape::rows_along(shape, axis);
    let len = shape[axis];
    if rows == 0 || len == 0 {
        return Ok(Vec::new());
    }
    let out_strides = crate::shape::contiguous_strides(shape);
    let blocks = len.div_ceil(BLOCK);
    let mut p = Params::new("scan");
    p.put(
        0,
        [rows as i64, len as i64, outer.len() as i64, blocks as i64],
    )?;
    let flags = reverse as i64 | (!inclusive as i64) << 1;
    p.put(
        4,
        [
            x.offset as i64,
            x.strides[axis] as i64,
            out_strides[axis] as i64,
            flags,
        ],
    )?;
    p.put(8, outer.iter().map(|&d| shape[d] as i64))?;
    p.put(16, outer.iter().map(|&d| x.strides[d] as i64))?;
    p.put(24, outer.iter().map(|&d| out_strides[d] as i64))?;
    let buffers = vec![x.buffer.clone(), totals.clone(), out.clone()];
    let (spec, kernel) = spec(op, x.dtype, out_dtype);
    let pipeline = cx.cache.get(kernel, &spec)?;
    let dispatch = |pass: Pass, threads: usize| -> Result<Dispatch> {
        let mut p = p.clone();
        p.put(32, [pass as i64])?;
        Ok(Dispatch::new(
            pipeline.clone(),
            p.words(),
            buffers.clone(),
            cx.grid(threads as u64)?,
        ))
    };
    let wg = WORKGROUP as usize;
    if len <= SERIAL_MAX {
        return Ok(vec![dispatch(Pass::Serial, rows)?]);
    }
    let per_block = rows.saturating_mul(blocks).saturating_mul(wg);
    if blocks == 1 {
        return Ok(vec![dispatch(Pass::Blocks, per_block)?]);
    }
    Ok(vec![
        dispatch(Pass::Reduce, per_block)?,
        dispatch(Pass::Totals, rows.saturating_mul(wg))?,
        dispatch(Pass::Blocks, per_block)?,
    ])
}

/// Words of the `totals` buffer [`scan`] needs for `rows` rows of `len`
/// (at least 1: every pass binds it).
pub(crate) fn totals_words(rows: usize, len: usize) -> usize {
    let blocks = len.div_ceil(BLOCK);
    if len <= SERIAL_MAX || blocks <= 1 {
        1
    } else {
        rows.saturating_mul(blocks)
    }
}
