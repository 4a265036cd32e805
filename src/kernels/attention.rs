//! The attention kernel (wgsl/attention.wgsl): scaled dot-product
//! attention of one query row per head, grouped-query, softmax online
//! (MLX's `sdpa_vector`), one dispatch.

use super::elementwise::{decode, element_bits};
use super::{Context, Dispatch, Kernel, Operand, Params, Spec};
use crate::graph::primitive::{SDPA_BLOCK, SDPA_THREADS};
use crate::{DType, Error, Result};

/// Every decode attention; head sizes and dtypes per specialisation.
pub(crate) static ATTENTION: Kernel = Kernel {
    name: "attention",
    prelude: &[super::CONVERT],
    source: include_str!("../../wgsl/attention.wgsl"),
    reads: 4,
    writes: 1,
};

/// The specialisation for `group` query heads per KV head, head dimension
/// `d`, elements of `dtype` (f32, f16 or bf16; q, k, v and the output)
/// and the key count read from a `length` operand of that dtype (i32 or
/// u32), or the static one.
fn spec(group: usize, d: usize, dtype: DType, length: Option<DType>) -> (Spec, &'static Kernel) {
    let load = |name: &str| {
        format!(
            "    return {};",
            decode(dtype, &element_bits(dtype, name, "i"))
        )
    };
    let len = match length {
        Some(DType::I32) => "u32(clamp(bitcast<i32>(len[p.misc.z]), 0, i32(p.head.w)))",
        Some(_) => "min(len[p.misc.z], p.head.w)",
        None => "p.head.w",
    };
    let store = match dtype.size_in_bytes() {
        4 => "    for (var w = t; w < GD; w += WG) {\n        \
              out[base + w] = bitcast<u32>(o[w]);\n    }"
            .to_string(),
        _ => {
            let enc = match dtype {
                DType::F16 => "f32_to_f16_bits",
                _ => "f32_to_bf16_bits",
            };
            // D is a multiple of 4: whole words, no word shared by two
            // workgroups.
            format!(
                "    for (var w = t; w < GD / 2u; w += WG) {{\n        \
                 out[base / 2u + w] = {enc}(bitcast<u32>(o[2u * w])) \
                 | ({enc}(bitcast<u32>(o[2u * w + 1u])) << 16u);\n    }}"
            )
        }
    };
    ATTENTION.spec(&[
        ("GROUP", &group.to_string()),
        ("D", &d.to_string()),
        ("LOAD_Q", &load("q")),
        ("LOAD_K", &load("k")),
        ("LOAD_V", &load("v")),
        ("LEN", len),
        ("STORE", &store),
    ])
}

/// A sample of the specialisations [`sdpa_vector`] can ask for (every
/// dtype and length form; group and head sizes only change constants).
#[cfg(test)]
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for length in [None, Some(DType::I32), Some(DType::U32)] {
            out.push(spec(3, 64, dtype, length));
        }
    }
    out.push(spec(1, 4, DType::F32, None));
    out.push(spec(16, 128, DType::F32, None));
    out
}

/// Encode attention of `q` (`[batch, heads, 1, d]`, strides over those
/// axes) against `k` and `v` (`[batch, kv_heads, keys, d]`, strides over
/// those), keys up to the element of `length` when given (i32 or u32),
/// into the dense `out` (`[batch, heads, 1, d]`, q's dtype). One
/// dispatch, a workgroup per batch and KV head.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sdpa_vector(
    cx: &Context,
    q: &Operand<'_>,
    k: &Operand<'_>,
    v: &Operand<'_>,
    length: Option<&Operand<'_>>,
    shape: [usize; 5],
    scale: f32,
    out: &wgpu::Buffer,
) -> Result<Dispatch> {
    // batch, query heads, KV heads, keys, head dimension
    let [batch, heads, kv_heads, keys, d] = shape;
    let groups = batch * kv_heads;
    if groups > cx.limits.max_compute_workgroups_per_dimension as usize {
        return Err(Error::TooLarge {
            op: "scaled_dot_product_attention",
            limit: crate::Limit::DispatchThreads,
            value: (groups * SDPA_THREADS) as u64,
            max: cx.limits.max_compute_workgroups_per_dimension as u64 * SDPA_THREADS as u64,
        });
    }
    debug_assert_eq!(SDPA_BLOCK, 64, "wgsl/attention.wgsl BK");
    let mut p = Params::new("scaled_dot_product_attention");
    p.put(0, [batch, heads, kv_heads, keys].map(|x| x as i64))?;
    let s = |o: &Operand<'_>, i: usize| o.strides[i] as i64;
    p.put(4, [q.offset as i64, s(q, 0), s(q, 1), s(q, 3)])?;
    p.put(8, [k.offset as i64, s(k, 0), s(k, 1), s(k, 2)])?;
    p.put(12, [v.offset as i64, s(v, 0), s(v, 1), s(v, 2)])?;
    p.put(
        16,
        [s(k, 3), s(v, 3), length.map_or(0, |l| l.offset as i64), 0],
    )?;
    p.put_bits(20, [scale.to_bits()]);
    let (spec, kernel) = spec(heads / kv_heads, d, q.dtype, length.map(|l| l.dtype));
    let len_buffer = length.map_or(q.buffer, |l| l.buffer);
    Ok(Dispatch {
        windows: Vec::new(),
        pipeline: cx.cache.get(kernel, &spec)?,
        params: p.words(),
        buffers: vec![
            q.buffer.clone(),
            k.buffer.clone(),
            v.buffer.clone(),
            len_buffer.clone(),
            out.clone(),
        ],
        workgroups: [groups as u32, 1, 1],
    })
}
