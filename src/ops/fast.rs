//! Fused ops for transformer blocks, after MLX's `mx.fast`: one kernel
//! where MLX has one, the same names, arguments and results
//! (`wgarray::fast::scaled_dot_product_attention` is
//! `mx.fast.scaled_dot_product_attention`). Where the fused kernel does
//! not apply the op records its composition of existing ops instead, as
//! MLX falls back to its unfused path: the result is the same to
//! rounding.

use super::same_device;
use crate::graph::primitive::{Primitive, sdpa_vector_fits};
use crate::{Array, DType, Error, Result};

/// The mask of [`scaled_dot_product_attention`] (MLX's `mask` argument:
/// `None`, `"causal"` or an array), plus a key count read at run time.
#[derive(Clone, Copy, Debug)]
pub enum AttentionMask<'a> {
    /// Every query attends every key.
    None,
    /// MLX's `"causal"`, aligned to the end of the keys: query `i` of
    /// `t_q` attends key `j` when `j <= i + t_k - t_q` (a query block that
    /// follows `t_k - t_q` cached keys).
    Causal,
    /// An array broadcastable to `[batch, heads, t_q, t_k]`: bool (`true`
    /// where a query attends a key) or of a float dtype (added to the
    /// scaled scores, `-inf` where it does not).
    Array(&'a Array),
    /// [`AttentionMask::Causal`] over the first `len` keys only, `len`
    /// the one element (shape `[]` or `[1]`, i32 or u32) of this array,
    /// read at run time (clamped to `0..=t_k`): query `i` attends key `j`
    /// when `j < len - t_q + i + 1`. For decoding against a KV cache
    /// allocated for the whole context (`t_k`) and filled up to `len`:
    /// with one query row the keys from `len` on are never read, so the
    /// step costs what the filled part does and one compiled step serves
    /// every length. Not in MLX (whose caches are sliced to their length).
    KeyLength(&'a Array),
}

/// Scaled dot-product attention (Vaswani et al. 2017; MLX
/// `mx.fast.scaled_dot_product_attention`):
/// `softmax(scale * q @ k^T + mask) @ v` over the last axis, with
/// grouped-query attention (Ainslie et al. 2023): query head `h` reads KV
/// head `h / (heads / kv_heads)`, and K and V are never repeated.
///
/// `q` is `[batch, heads, t_q, d]`, `k` and `v` are `[batch, kv_heads,
/// t_k, d]`, one float dtype (f32, f16, bf16), any strides; `heads` a
/// multiple of `kv_heads`. Returns `[batch, heads, t_q, d]` in q's dtype;
/// the arithmetic is f32. A query row with no key to attend gives NaN
/// (a softmax over nothing), as MLX.
///
/// With one query row (`t_q = 1`, decoding) and a mask of
/// [`AttentionMask::None`], [`AttentionMask::Causal`] or
/// [`AttentionMask::KeyLength`], this is ONE kernel (MLX's
/// `sdpa_vector`): a workgroup per batch and KV head scores each key
/// against that head's query heads, keeps the softmax online (running
/// maximum and sum, Milakov & Gimelshein 2018) and sums the weighted
/// values, so neither the scores nor repeated K/V are written to memory.
/// It takes `d` a multiple of 4 up to 2048 / group (group: `heads /
/// kv_heads`, at most 16), and up to some thousands of keys (llvmpipe's
/// 65535 loop iterations per invocation: about 19,000 keys for `d = 64`
/// and a group of 3). Anything else (more query rows, an array mask,
/// other sizes) is the composition MLX falls back to: a batched matmul
/// for the scores (K read through a broadcast, not repeated), the mask,
/// `softmax`, a matmul with V.
///
/// # Errors
/// [`Error::DeviceMismatch`]; [`Error::InvalidArgument`] when q, k or v
/// is not 4-D, `heads` is not a multiple of `kv_heads` (or `kv_heads` is
/// 0), `scale` is not finite, or a `KeyLength` array is not one element;
/// [`Error::ShapeMismatch`] when k and v differ, q's batch or `d` differ
/// from k's, or an array mask does not broadcast to the scores;
/// [`Error::OpDType`] for q, k or v not of one float dtype, an array mask
/// not bool or float, a `KeyLength` array not i32 or u32. Nothing is
/// recorded on an error.
#[track_caller]
pub fn scaled_dot_product_attention(
    q: &Array,
    k: &Array,
    v: &Array,
    scale: f64,
    mask: AttentionMask<'_>,
) -> Result<Array> {
    const OP: &str = "scaled_dot_product_attention";
    same_device(OP, q, k)?;
    same_device(OP, q, v)?;
    let mask_array = match mask {
        AttentionMask::Array(m) | AttentionMask::KeyLength(m) => Some(m),
        _ => None,
    };
    if let Some(m) = mask_array {
        same_device(OP, q, m)?;
    }
    let bad = |why: String| Err(Error::InvalidArgument(format!("{OP}: {why}")));
    for (name, a) in [("q", q), ("k", k), ("v", v)] {
        if a.ndim() != 4 {
            return bad(format!(
                "`{name}` must be 4-D [batch, heads, length, head_dim], got shape {:?}",
                a.shape()
            ));
        }
    }
    let (qs, ks) = (q.shape(), k.shape());
    if k.shape() != v.shape() {
        return Err(Error::ShapeMismatch {
            op: OP,
            lhs: ks.to_vec(),
            rhs: v.shape().to_vec(),
        });
    }
    if qs[0] != ks[0] || qs[3] != ks[3] {
        return Err(Error::ShapeMismatch {
            op: OP,
            lhs: qs.to_vec(),
            rhs: ks.to_vec(),
        });
    }
    let (batch, heads, t_q, d) = (qs[0], qs[1], qs[2], qs[3]);
    let (kv_heads, t_k) = (ks[1], ks[2]);
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return bad(format!(
            "the query heads ({heads}) must be a multiple of the key/value heads ({kv_heads})"
        ));
    }
    if !scale.is_finite() {
        return bad(format!("`scale` must be finite, got {scale}"));
    }
    let dtype = q.dtype();
    for a in [q, k, v] {
        if !matches!(a.dtype(), DType::F32 | DType::F16 | DType::BF16) || a.dtype() != dtype {
            return Err(Error::OpDType {
                op: OP,
                dtype: a.dtype(),
                takes: "q, k and v of one float dtype (float32, float16 or bfloat16)",
            });
        }
    }
    let scores = [batch, heads, t_q, t_k];
    match mask {
        AttentionMask::Array(m) => {
            if crate::shape::broadcast_shapes(OP, m.shape(), &scores)
                .ok()
                .as_deref()
                != Some(&scores[..])
            {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: m.shape().to_vec(),
                    rhs: scores.to_vec(),
                });
            }
            if !matches!(
                m.dtype(),
                DType::Bool | DType::F32 | DType::F16 | DType::BF16
            ) {
                return Err(Error::OpDType {
                    op: OP,
                    dtype: m.dtype(),
                    takes: "a bool or float (float32, float16, bfloat16) mask",
                });
            }
        }
        AttentionMask::KeyLength(len) => {
            run_time_index(OP, len, "a key length", "an int32 or uint32 key length")?
        }
        AttentionMask::None | AttentionMask::Causal => {}
    }
    let group = heads / kv_heads;
    let vector = t_q == 1
        && batch * kv_heads > 0
        && !matches!(mask, AttentionMask::Array(_))
        && sdpa_vector_fits(group, d, t_k);
    if vector {
        let length = matches!(mask, AttentionMask::KeyLength(_));
        let mut inputs = vec![q.clone(), k.clone(), v.clone()];
        if let AttentionMask::KeyLength(len) = mask {
            inputs.push(len.reshape(&[1])?);
        }
        q.device().check_array(OP, qs, dtype)?;
        return Ok(Array::from_node1(
            q.device(),
            Primitive::SdpaVector {
                scale: scale as f32,
                length,
            },
            inputs,
            qs.to_vec(),
            dtype,
        ));
    }
    composite(q, k, v, scale, mask)
}

/// [`Error::InvalidArgument`] unless `a` (`what`) is one element (shape
/// `[]` or `[1]`), [`Error::OpDType`] (`takes`) unless it is i32 or u32:
/// a number the kernel reads at run time.
fn run_time_index(op: &'static str, a: &Array, what: &str, takes: &'static str) -> Result<()> {
    if a.size() != 1 || a.ndim() > 1 {
        return Err(Error::InvalidArgument(format!(
            "{op}: {what} must be one element (shape [] or [1]), got shape {:?}",
            a.shape()
        )));
    }
    if !matches!(a.dtype(), DType::I32 | DType::U32) {
        return Err(Error::OpDType {
            op,
            dtype: a.dtype(),
            takes,
        });
    }
    Ok(())
}

/// The unfused attention (MLX's fallback): scores by a batched matmul
/// over `[batch, kv_heads, group, t_q, d]` (K and V broadcast over the
/// group), the mask, softmax, the product with V; f32 inside.
#[track_caller]
fn composite(
    q: &Array,
    k: &Array,
    v: &Array,
    scale: f64,
    mask: AttentionMask<'_>,
) -> Result<Array> {
    let (qs, ks) = (q.shape(), k.shape());
    let (batch, heads, t_q, d) = (qs[0], qs[1], qs[2], qs[3]);
    let (kv_heads, t_k) = (ks[1], ks[2]);
    let group = heads / kv_heads;
    let q5 = (&q.astype(DType::F32)? * scale)?.reshape(&[batch, kv_heads, group, t_q, d])?;
    let kv5 = |a: &Array| a.astype(DType::F32)?.reshape(&[batch, kv_heads, 1, t_k, d]);
    let (k5, v5) = (kv5(k)?, kv5(v)?);
    let mut s = q5.matmul(&k5.swapaxes(-1, -2)?)?; // [b, kv, g, t_q, t_k]
    let s5 = [batch, kv_heads, group, t_q, t_k];
    let device = q.device();
    // Causal: key j visible to query i when j - i <= limit.
    let causal = |limit: &Array| -> Result<Array> {
        let i = Array::arange(0.0, t_q as f64, 1.0, DType::I32, device)?.reshape(&[t_q, 1])?;
        let j = Array::arange(0.0, t_k as f64, 1.0, DType::I32, device)?.reshape(&[1, t_k])?;
        (&j - &i)?.less_equal(limit)
    };
    let keep = match mask {
        AttentionMask::None => None,
        AttentionMask::Causal => {
            let limit = Array::from_slice(&[t_k as i32 - t_q as i32], &[1], device)?;
            Some(causal(&limit)?)
        }
        AttentionMask::KeyLength(len) => {
            let len = len.reshape(&[1])?.astype(DType::I32)?;
            let len = crate::where_(&len.less(0)?, 0, &len)?;
            let len = crate::where_(&len.greater(t_k as i32)?, t_k as i32, &len)?;
            Some(causal(&(&len - t_q as i32)?)?)
        }
        AttentionMask::Array(m) if m.dtype() == DType::Bool => {
            Some(m.broadcast_to(&[batch, heads, t_q, t_k])?.reshape(&s5)?)
        }
        AttentionMask::Array(m) => {
            let add = m
                .astype(DType::F32)?
                .broadcast_to(&[batch, heads, t_q, t_k])?
                .reshape(&s5)?;
            s = (&s + &add)?;
            None
        }
    };
    if let Some(keep) = keep {
        s = crate::where_(&keep, &s, f32::NEG_INFINITY)?;
    }
    let out = s.softmax(-1)?.matmul(&v5)?; // [b, kv, g, t_q, d]
    out.reshape(&[batch, heads, t_q, d])?.astype(q.dtype())
}

/// The position offset of [`rope`] (MLX's `offset`: an int or an array).
#[derive(Clone, Copy, Debug)]
pub enum RopeOffset<'a> {
    /// A fixed offset.
    Static(i32),
    /// The one element (shape `[]` or `[1]`, i32 or u32) of this array,
    /// read at run time: one compiled decode step serves every position.
    Array(&'a Array),
}

impl From<i32> for RopeOffset<'_> {
    fn from(v: i32) -> Self {
        RopeOffset::Static(v)
    }
}

impl<'a> From<&'a Array> for RopeOffset<'a> {
    fn from(a: &'a Array) -> Self {
        RopeOffset::Array(a)
    }
}

/// Rotary position embedding (Su et al. 2021, RoFormer; MLX
/// `mx.fast.rope(x, dims, traditional=, base=, scale=, offset=)`), one
/// kernel. `x` is `[..., L, D]` (at least 2-D, f32, f16 or bf16, any
/// strides); row `l` of axis -2 is at position `offset + l`. The first
/// `dims` features of each row (`dims` even, at most `D`) rotate in
/// pairs: `traditional` pairs adjacent features `(x[2i], x[2i + 1])` (the
/// original RoPE, GGUF llama weights), otherwise the two halves `(x[i],
/// x[i + dims / 2])` (Hugging Face's layout); pair `i` turns by `theta =
/// scale * position * base^(-2i / dims)`: `(a, b) -> (a cos theta - b
/// sin theta, a sin theta + b cos theta)`. The remaining features are
/// copied. Returns x's shape and dtype, dense; the angles and arithmetic
/// are f32, as MLX and llama.cpp compute them.
///
/// # Errors
/// [`Error::DeviceMismatch`]; [`Error::InvalidArgument`] for x of fewer
/// than 2 or more than 8 dimensions, `dims` odd, 0 or past `D`, `base`
/// not finite and positive, `scale` not finite, an offset array that is
/// not one element; [`Error::OpDType`] for x not f32, f16 or bf16, an
/// offset array not i32 or u32. Nothing is recorded on an error.
#[track_caller]
pub fn rope<'a>(
    x: &Array,
    dims: usize,
    traditional: bool,
    base: f64,
    scale: f64,
    offset: impl Into<RopeOffset<'a>>,
) -> Result<Array> {
    const OP: &str = "rope";
    let offset = offset.into();
    if let RopeOffset::Array(o) = offset {
        same_device(OP, x, o)?;
    }
    let bad = |why: String| Err(Error::InvalidArgument(format!("{OP}: {why}")));
    let nd = x.ndim();
    if !(2..=8).contains(&nd) {
        return bad(format!(
            "`x` must be [..., L, D] with 2 to 8 dimensions, got shape {:?}",
            x.shape()
        ));
    }
    let d = x.shape()[nd - 1];
    if dims == 0 || !dims.is_multiple_of(2) || dims > d {
        return bad(format!(
            "`dims` must be even, positive and at most the last axis ({d}), got {dims}"
        ));
    }
    if !(base.is_finite() && base > 0.0) {
        return bad(format!("`base` must be finite and positive, got {base}"));
    }
    if !scale.is_finite() {
        return bad(format!("`scale` must be finite, got {scale}"));
    }
    if let RopeOffset::Array(o) = offset {
        run_time_index(OP, o, "an offset array", "an int32 or uint32 offset")?;
    }
    if !matches!(x.dtype(), DType::F32 | DType::F16 | DType::BF16) {
        return Err(Error::OpDType {
            op: OP,
            dtype: x.dtype(),
            takes: "float32, float16 and bfloat16 arrays",
        });
    }
    x.device().check_array(OP, x.shape(), x.dtype())?;
    let (fixed, inputs) = match offset {
        RopeOffset::Static(v) => (v, vec![x.clone()]),
        RopeOffset::Array(o) => (0, vec![x.clone(), o.reshape(&[1])?]),
    };
    Ok(Array::from_node1(
        x.device(),
        Primitive::Rope {
            dims,
            traditional,
            base: base as f32,
            scale: scale as f32,
            offset: fixed,
            dynamic: inputs.len() == 2,
        },
        inputs,
        x.shape().to_vec(),
        x.dtype(),
    ))
}
