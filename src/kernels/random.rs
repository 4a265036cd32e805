//! The random-number kernel (wgsl/random.wgsl): Philox 4x32-10 blocks under
//! a key read from a device array, written as raw bits, integers in a
//! range, or floats of a distribution (uniform, normal, Laplace, Gumbel,
//! truncated normal).

use super::{CONVERT, Context, Dispatch, Kernel, MATH, Operand, Params, Spec};
use crate::graph::primitive::Distribution;
use crate::{DType, Result};

/// Philox 4x32-10 under a key; output dtype chosen by the specialisation.
pub(crate) static RANDOM: Kernel = Kernel::new("random", &[CONVERT, MATH], wgsl!("random"), 1, 1);

impl Distribution {
    fn code(self) -> &'static str {
        match self {
            Distribution::Bits => "0",
            Distribution::Uniform { .. } => "1",
            Distribution::Normal { .. } => "2",
            Distribution::Integer { .. } => "3",
            Distribution::Laplace { .. } => "4",
            Distribution::Gumbel => "5",
            Distribution::TruncatedNormal { .. } => "6",
        }
    }
}

/// The specialisation for `dist` writing `dtype` (u32 for bits, i32 or
/// u32 for integers, a float dtype otherwise).
pub(crate) fn spec(dist: Distribution, dtype: DType) -> (Spec, &'static Kernel) {
    let encode = match dtype {
        DType::F16 => "    return f32_to_f16_bits(bitcast<u32>(v));",
        DType::BF16 => "    return f32_to_bf16_bits(bitcast<u32>(v));",
        _ => "    return bitcast<u32>(v);",
    };
    RANDOM.spec(&[
        ("DIST", dist.code()),
        ("OUT_BYTES", &dtype.size_in_bytes().to_string()),
        ("ENCODE", encode),
    ])
}

/// Every specialisation [`random`] can ask for.
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = vec![spec(Distribution::Bits, DType::U32)];
    for d in [DType::I32, DType::U32] {
        out.push(spec(Distribution::Integer { low: 0, range: 2 }, d));
    }
    for d in [DType::F32, DType::F16, DType::BF16] {
        for dist in [
            Distribution::Uniform {
                low: 0.0,
                scale: 1.0,
                max: 1.0,
            },
            Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
            Distribution::Laplace {
                loc: 0.0,
                scale: 1.0,
            },
            Distribution::Gumbel,
            Distribution::TruncatedNormal {
                u0: -0.5,
                du: 1.0,
                lo: -1.0,
                hi: 1.0,
                tail: 0,
            },
        ] {
            out.push(spec(dist, d));
        }
    }
    out
}

/// Encode `n` values of `dist` as `dtype` into the dense `out`, from Philox
/// blocks `(b, stream, 0, 0)` under `key` (u32, shape `[2]`).
pub(crate) fn random(
    cx: &Context,
    dist: Distribution,
    key: &Operand<'_>,
    stream: u32,
    n: usize,
    dtype: DType,
    out: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    if n == 0 {
        return Ok(None);
    }
    if n > u32::MAX as usize {
        return Err(crate::Error::TooLarge {
            op: "random",
            limit: crate::Limit::KernelIndex,
            value: n as u64,
            max: u32::MAX as u64,
        });
    }
    let mut p = Params::new("random");
    p.put(0, [n as i64, key.offset as i64, key.strides[0] as i64])?;
    let a: [u32; 4] = match dist {
        Distribution::Bits | Distribution::Gumbel => [0; 4],
        Distribution::Uniform { low, scale, max } => [low, scale, max, 0.0].map(f32::to_bits),
        Distribution::Normal { mean, std } => [mean, std, 0.0, 0.0].map(f32::to_bits),
        Distribution::Integer { low, range } => [low, range, 0, 0],
        Distribution::Laplace { loc, scale } => [loc, scale, 0.0, 0.0].map(f32::to_bits),
        Distribution::TruncatedNormal { u0, du, lo, hi, .. } => [u0, du, lo, hi].map(f32::to_bits),
    };
    let tail = match dist {
        Distribution::TruncatedNormal { tail, .. } => tail,
        _ => 0,
    };
    p.put_bits(3, [stream]);
    p.put_bits(4, a);
    p.put_bits(8, [tail]);
    let (spec, kernel) = spec(dist, dtype);
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline: cx.cache.get(kernel, &spec)?,
        params: p.words(),
        buffers: vec![key.buffer.clone(), out.clone()],
        workgroups: cx.grid(n.div_ceil(4) as u64)?,
    }))
}
