//! The scatter kernel (wgsl/scatter.wgsl): updates added (duplicates
//! accumulating) or stored into a zeroed output at indices along an axis.

use super::{Context, Dispatch, Kernel, Operand, Params, Spec};
use crate::{DType, Error, Result};

/// Every scatter-add; index decoding and the atomic add per specialisation.
pub(crate) static SCATTER: Kernel = Kernel {
    name: "scatter",
    prelude: &[super::UNRAVEL],
    source: include_str!("../../wgsl/scatter.wgsl"),
    reads: 2,
    writes: 1,
};

/// The specialisation for `index` (i32 or u32) indices and `acc` updates,
/// added (`add`) or stored.
fn spec(index: DType, acc: DType, add: bool) -> (Spec, &'static Kernel) {
    let index = match index {
        DType::I32 => "    return bitcast<i32>(indices[i]);",
        _ => "    return i32(min(indices[i], 0x7fffffffu));",
    };
    let add = match acc {
        _ if !add => "    atomicStore(&out[q], updates[i]);",
        DType::F32 => {
            "    let v = bitcast<f32>(updates[i]);\n    \
             var old = atomicLoad(&out[q]);\n    \
             loop {\n        \
             let r = atomicCompareExchangeWeak(&out[q], old, bitcast<u32>(bitcast<f32>(old) + v));\n        \
             if r.exchanged {\n            break;\n        }\n        \
             old = r.old_value;\n    }"
        }
        _ => "    atomicAdd(&out[q], updates[i]);",
    };
    SCATTER.spec(&[("INDEX", index), ("ADD", add)])
}

/// Every specialisation [`scatter`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for index in [DType::I32, DType::U32] {
        for acc in [DType::F32, DType::I32, DType::U32] {
            for add in [true, false] {
                out.push(spec(index, acc, add));
            }
        }
    }
    out
}

/// Encode a scatter into `out` (dense, `out_shape`, the updates' dtype,
/// zeroed by the first dispatch): every element of `updates` (shape
/// `shape`, as `indices`) is added (`add`) or stored at its own
/// coordinates with the `axis` coordinate taken from `indices`. Two
/// dispatches.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter(
    cx: &Context,
    add: bool,
    indices: &Operand<'_>,
    updates: &Operand<'_>,
    shape: &[usize],
    axis: usize,
    out: &wgpu::Buffer,
    out_shape: &[usize],
) -> Result<Vec<Dispatch>> {
    let words: usize = out_shape.iter().product();
    if words == 0 {
        return Ok(Vec::new());
    }
    if shape.len() > 8 {
        return Err(Error::InvalidArgument(
            "scatter_add and put_along_axis take at most 8 dimensions".into(),
        ));
    }
    let n: usize = shape.iter().product();
    let mut out_strides = crate::shape::contiguous_strides(out_shape);
    let axis_stride = out_strides[axis];
    out_strides[axis] = 0;
    let mut p = Params::new("scatter");
    p.put(
        0,
        [
            n as i64,
            shape.len() as i64,
            out_shape[axis] as i64,
            axis_stride as i64,
            indices.offset as i64,
            updates.offset as i64,
            words as i64,
        ],
    )?;
    let slots = |v: &[isize]| -> Vec<i64> { v.iter().map(|&s| s as i64).collect() };
    let dims: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
    p.put(8, slots(&dims))?;
    p.put(16, slots(&indices.strides))?;
    p.put(24, slots(&updates.strides))?;
    p.put(32, slots(&out_strides))?;
    let (spec, kernel) = spec(indices.dtype, updates.dtype, add);
    let pipeline = cx.cache.get(kernel, &spec)?;
    let buffers = vec![indices.buffer.clone(), updates.buffer.clone(), out.clone()];
    let mut out = Vec::new();
    for (pass, threads) in [(0i64, words), (1, n)] {
        if threads == 0 {
            continue;
        }
        let mut p = p.clone();
        p.put(40, [pass])?;
        out.push(Dispatch {
            pipeline: pipeline.clone(),
            params: p.words(),
            buffers: buffers.clone(),
            workgroups: cx.grid(threads as u64)?,
        });
    }
    Ok(out)
}
