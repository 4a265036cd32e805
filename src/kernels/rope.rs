//! The rotary position embedding kernel (wgsl/rope.wgsl): MLX's
//! `fast.rope`, one dispatch, the position offset static or read at run
//! time.

use super::elementwise::{decode, element_bits};
use super::{Context, Dispatch, Kernel, Operand, Params, Spec};
use crate::{DType, Error, Result};

/// Every rope; pair layout, dtype and offset form per specialisation.
pub(crate) static ROPE: Kernel = Kernel {
    name: "rope",
    prelude: &[super::CONVERT, super::UNRAVEL],
    source: include_str!("../../wgsl/rope.wgsl"),
    reads: 2,
    writes: 1,
};

/// The specialisation for x of `dtype` (f32, f16, bf16), pairs
/// `traditional` (adjacent) or split in halves, and the offset static or
/// read from an array of `offset` dtype (i32 or u32).
fn spec(dtype: DType, traditional: bool, offset: Option<DType>) -> (Spec, &'static Kernel) {
    let load = format!(
        "    return {};",
        decode(dtype, &element_bits(dtype, "x", "i"))
    );
    let encode = match dtype {
        DType::F16 => "    return f32_to_f16_bits(bitcast<u32>(v));",
        DType::BF16 => "    return f32_to_bf16_bits(bitcast<u32>(v));",
        _ => "    return bitcast<u32>(v);",
    };
    let position = match offset {
        Some(DType::I32) => "f32(bitcast<i32>(p.misc.y) + bitcast<i32>(offset[p.misc.w]))",
        Some(_) => "f32(bitcast<i32>(p.misc.y) + i32(offset[p.misc.w]))",
        None => "f32(bitcast<i32>(p.misc.y))",
    };
    let epw = if dtype.size_in_bytes() == 2 { "2" } else { "1" };
    ROPE.spec(&[
        ("TRADITIONAL", if traditional { "true" } else { "false" }),
        ("EPW", epw),
        ("LOAD", &load),
        ("ENCODE", encode),
        ("POSITION", position),
    ])
}

/// Every specialisation [`rope`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for traditional in [false, true] {
            for offset in [None, Some(DType::I32), Some(DType::U32)] {
                out.push(spec(dtype, traditional, offset));
            }
        }
    }
    out
}

/// What [`rope`] computes: the rotated features, the pair layout, the
/// base and position scale, and the static part of the offset.
pub(crate) struct Rotation {
    pub dims: usize,
    pub traditional: bool,
    pub base: f32,
    pub scale: f32,
    pub offset: i32,
}

/// Encode the rotation of `x` (of `shape`, at least 2-D, strides over
/// its axes) into the dense `out` (x's dtype), positions `r.offset` plus
/// the element of `offset` when given, plus the row along axis -2. One
/// dispatch, none for an empty array.
pub(crate) fn rope(
    cx: &Context,
    x: &Operand<'_>,
    offset: Option<&Operand<'_>>,
    shape: &[usize],
    r: &Rotation,
    out: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(None);
    }
    let nd = shape.len();
    if nd > 8 {
        return Err(Error::InvalidArgument(
            "rope takes at most 8 dimensions".into(),
        ));
    }
    let words = if x.dtype.size_in_bytes() == 2 {
        n.div_ceil(2)
    } else {
        n
    };
    let mut p = Params::new("rope");
    p.put(
        0,
        [
            words as i64,
            nd as i64,
            shape[nd - 1] as i64,
            r.dims as i64,
            shape[nd - 2] as i64,
            r.offset as i64,
            x.offset as i64,
            offset.map_or(0, |o| o.offset as i64),
        ],
    )?;
    p.put_bits(
        8,
        [r.scale.to_bits(), ((r.base as f64).log2() as f32).to_bits()],
    );
    p.put(10, [n as i64, x.strides[nd - 1] as i64])?;
    p.put(12, shape.iter().map(|&s| s as i64))?;
    p.put(20, x.strides.iter().map(|&s| s as i64))?;
    let (spec, kernel) = spec(x.dtype, r.traditional, offset.map(|o| o.dtype));
    let offset_buffer = offset.map_or(x.buffer, |o| o.buffer);
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline: cx.cache.get(kernel, &spec)?,
        params: p.words(),
        buffers: vec![x.buffer.clone(), offset_buffer.clone(), out.clone()],
        workgroups: cx.grid(words as u64)?,
    }))
}
