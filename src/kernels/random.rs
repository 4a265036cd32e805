//! The random-number kernel (wgsl/random.wgsl): Philox 4x32-10 blocks under
//! a key read from a device array, written as raw bits, uniform or normal
//! floats.

use super::{CONVERT, Dispatch, Kernel, PARAMS_WORDS, Spec, grid};
use crate::device::DeviceInner;
use crate::{DType, Result};

/// Philox 4x32-10 under a key; output dtype chosen by the specialisation.
pub(crate) static RANDOM: Kernel = Kernel {
    name: "random",
    prelude: &[CONVERT],
    source: include_str!("../../wgsl/random.wgsl"),
    reads: 1,
    writes: 1,
};

/// What the random kernel writes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Distribution {
    /// Raw u32 words.
    Bits,
    /// `low + (high - low) * u`, `u` in [0, 1) from the top 24 bits, clamped
    /// into [`low`, `max`], where `max` is the output dtype's largest value
    /// below `high`.
    Uniform { low: f32, scale: f32, max: f32 },
    /// `mean + std * z`, `z` standard normal by Box-Muller.
    Normal { mean: f32, std: f32 },
}

impl Distribution {
    fn code(self) -> &'static str {
        match self {
            Distribution::Bits => "0",
            Distribution::Uniform { .. } => "1",
            Distribution::Normal { .. } => "2",
        }
    }
}

/// The specialisation for `dist` writing `dtype` (u32 for bits, a float
/// dtype otherwise).
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
    for d in [DType::F32, DType::F16, DType::BF16] {
        out.push(spec(
            Distribution::Uniform {
                low: 0.0,
                scale: 1.0,
                max: 1.0,
            },
            d,
        ));
        out.push(spec(
            Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
            d,
        ));
    }
    out
}

/// The key operand: two u32 words at `offset` and `offset + stride`.
pub(crate) struct Key<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub offset: usize,
    pub stride: isize,
}

/// Encode `n` values of `dist` as `dtype` into the dense `out`, from Philox
/// blocks `(b, stream, 0, 0)` under `key`.
pub(crate) fn random(
    dev: &DeviceInner,
    dist: Distribution,
    key: &Key<'_>,
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
            bytes: n as u64,
            max: u32::MAX as u64,
        });
    }
    let mut p = [0u32; PARAMS_WORDS];
    p[0] = n as u32;
    p[1] = key.offset as u32;
    p[2] = key.stride as u32; // a negative stride wraps on purpose
    p[3] = stream;
    let a: [f32; 3] = match dist {
        Distribution::Bits => [0.0; 3],
        Distribution::Uniform { low, scale, max } => [low, scale, max],
        Distribution::Normal { mean, std } => [mean, std, 0.0],
    };
    for (w, v) in p[4..7].iter_mut().zip(a) {
        *w = v.to_bits();
    }
    let (spec, kernel) = spec(dist, dtype);
    Ok(Some(Dispatch {
        pipeline: dev.kernels.get(kernel, &spec)?,
        params: p,
        buffers: vec![key.buffer.clone(), out.clone()],
        workgroups: grid(
            n.div_ceil(4) as u64,
            dev.limits.max_compute_workgroups_per_dimension,
        )?,
    }))
}
