//! Counter-based random numbers from an explicit key, the same on every
//! backend.
//!
//! The generator is Philox 4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel
//! random numbers: as easy as 1, 2, 3", SC'11) with the constants of
//! Random123 (and of JAX's `philox` implementation): multipliers
//! `0xD2511F53`, `0xCD9E8D57`, key increments `0x9E3779B9`, `0xBB67AE85`,
//! ten rounds. It is a pure function of a 128-bit counter and a 64-bit key,
//! so there is no state: a key is a u32 array of shape `[2]` (like JAX's
//! `PRNGKey`), and the same key always gives the same numbers.
//!
//! # The stream
//!
//! For `n` values under key `(k0, k1)`, block `b` (for `b < ceil(n / 4)`) is
//! `philox4x32_10(counter = (b, stream, 0, 0), key = (k0, k1))`, and element
//! `4b + j` (row-major) is built from word `j` of block `b`. `stream` is 0
//! for [`bits`], [`uniform`] and [`normal`], and 1 for [`split`], so derived
//! keys never repeat sampled bits.
//!
//! - [`bits`]: the words themselves (u32). Identical on every backend, bit
//!   for bit (integer arithmetic only).
//! - [`uniform`]: `low + (high - low) * u` with `u = (word >> 8) * 2^-24` in
//!   [0, 1) from the top 24 bits, computed in f32 and rounded to the dtype.
//! - [`normal`]: Box-Muller on words `(0, 1)` and `(2, 3)` of each block:
//!   `u1 = (word0 >> 8) * 2^-24 + 2^-24` in (0, 1], `u2` as above, then
//!   `r = sqrt(-2 ln u1)` and the pair `(r cos 2 pi u2, r sin 2 pi u2)`,
//!   times `std` plus `mean`.
//!
//! Floats depend on the backend's f32 arithmetic: `uniform` can differ in
//! the last bit where a backend fuses the multiply-add, and `normal` uses
//! `log`, `sqrt`, `sin` and `cos`, whose accuracy WGSL bounds but does not
//! fix. The underlying bits never differ.
//!
//! - [`randint`]: 64 bits per element (words of block `b` under counter
//!   `(b, stream, 0, 0)` and `(b, stream, 1, 0)`) scaled to the range by a
//!   widened multiply-shift (Lemire 2019): `low + floor(w * (high - low) /
//!   2^64)`, exact integer arithmetic, identical on every backend.
//! - [`laplace`], [`gumbel`], [`truncated_normal`]: inversion of the CDF
//!   at `u = (2 (word >> 9) + 1) 2^-24`, a float in (0, 1) that is never 0
//!   or 1 and symmetric about 1/2, with wgarray's accurate `log`, `log1p`
//!   and `erfinv` (wgsl/math.wgsl).
//! - [`bernoulli`] and [`categorical`] are composed: `uniform < p`, and
//!   `argmax(logits + gumbel)` (the Gumbel-max trick).
//!
//! Every sampler is one node and one dispatch (the composed ones a few);
//! the key may itself be lazy (the result of [`split`] and a slice of it,
//! for example).
//!
//! ```
//! use wgarray::{DType, Device, Slice, random};
//!
//! let device = Device::new_default()?;
//! let key = random::key(42, &device)?;
//! let keys = random::split(&key, 2)?; // [2, 2]
//! let k1 = keys.slice(&[Slice::range(1, 2), Slice::FULL])?.reshape(&[2])?;
//! let x = random::uniform(&k1, &[3, 4], 0.0, 1.0, DType::F32)?;
//! let v = x.to_vec::<f32>()?;
//! assert!(v.iter().all(|&u| (0.0..1.0).contains(&u)));
//! assert_eq!(v, random::uniform(&k1, &[3, 4], 0.0, 1.0, DType::F32)?.to_vec::<f32>()?);
//! # Ok::<(), wgarray::Error>(())
//! ```

use crate::axis::Axis;
use crate::graph::Primitive;
use crate::graph::primitive::Distribution;
use crate::shape::normalize_axis;
use crate::{Array, DType, Device, Error, Result};

/// A key from a seed (JAX `PRNGKey`): the u32 array `[seed >> 32, seed &
/// 0xffffffff]` of shape `[2]`, evaluated (uploaded) at once.
///
/// # Errors
/// [`Error::OutOfMemory`].
#[track_caller]
pub fn key(seed: u64, device: &Device) -> Result<Array> {
    Array::from_slice(&[(seed >> 32) as u32, seed as u32], &[2], device)
}

/// Check that `key` is a u32 array of shape `[2]`.
fn check_key(op: &'static str, key: &Array) -> Result<()> {
    if key.shape() != [2] {
        return Err(Error::ShapeMismatch {
            op,
            lhs: key.shape().to_vec(),
            rhs: vec![2],
        });
    }
    if key.dtype() != DType::U32 {
        return Err(Error::DType {
            op,
            dtype: key.dtype(),
            other: None,
        });
    }
    Ok(())
}

#[track_caller]
fn sample(key: &Array, shape: &[usize], dtype: DType, dist: Distribution, stream: u32) -> Array {
    Array::from_node(
        key.device(),
        Primitive::Random { dist, stream },
        vec![key.clone()],
        vec![(shape.to_vec(), dtype)],
    )
    .pop()
    .expect("one output")
}

/// `num` new keys from `key`, as a u32 array of shape `[num, 2]` (JAX
/// `random.split`): the Philox stream of `key` with stream tag 1 (see the
/// module docs), so the new keys differ from each other, from `key`, and
/// from anything sampled with `key`. Take key `i` with
/// `keys.slice(&[Slice::range(i, i + 1), Slice::FULL])?.reshape(&[2])?`.
///
/// One dispatch on eval.
///
/// # Errors
/// [`Error::TooLarge`] for an output of more than
/// [`crate::shape::MAX_DIMS`] dimensions or past `usize` elements;
/// [`Error::ShapeMismatch`] unless `key`'s shape is `[2]`; [`Error::DType`]
/// unless it is u32.
#[track_caller]
pub fn split(key: &Array, num: usize) -> Result<Array> {
    key.device()
        .check_array("random::split", &[num, 2], DType::U32)?;
    check_key("random::split", key)?;
    Ok(sample(key, &[num, 2], DType::U32, Distribution::Bits, 1))
}

/// Raw Philox 4x32-10 words (u32) of `shape` under `key` (JAX
/// `random.bits`): element `4b + j` is word `j` of Philox block `b`,
/// counter `(b, 0, 0, 0)`. The same on every backend, bit for bit.
///
/// One dispatch on eval.
///
/// # Errors
/// As [`split`].
#[track_caller]
pub fn bits(key: &Array, shape: &[usize]) -> Result<Array> {
    key.device()
        .check_array("random::bits", shape, DType::U32)?;
    check_key("random::bits", key)?;
    Ok(sample(key, shape, DType::U32, Distribution::Bits, 0))
}

/// The checks of every float sampler, in order: `shape` and `dtype` on
/// the key's device, the key, then a dtype the sampler makes.
fn check_float_sample(op: &'static str, key: &Array, shape: &[usize], dtype: DType) -> Result<()> {
    key.device().check_array(op, shape, dtype)?;
    check_key(op, key)?;
    check_float(op, dtype)
}

fn check_float(op: &'static str, dtype: DType) -> Result<()> {
    if dtype == DType::F64 {
        return Err(Error::OpDType {
            op,
            dtype,
            takes: "float32, float16 and bfloat16 (the sampler makes 24-bit uniforms; \
                    cast with astype for float64)",
        });
    }
    if !dtype.is_float() {
        return Err(Error::DType {
            op,
            dtype,
            other: None,
        });
    }
    Ok(())
}

/// `x` as the nearest value of `dtype` (f32, f16 or bf16), as its bits.
fn to_bits(x: f64, dtype: DType) -> u32 {
    match dtype {
        DType::F16 => half::f16::from_f64(x).to_bits() as u32,
        DType::BF16 => half::bf16::from_f64(x).to_bits() as u32,
        _ => (x as f32).to_bits(),
    }
}

fn from_bits(b: u32, dtype: DType) -> f64 {
    match dtype {
        DType::F16 => half::f16::from_bits(b as u16).to_f64(),
        DType::BF16 => half::bf16::from_bits(b as u16).to_f64(),
        _ => f32::from_bits(b) as f64,
    }
}

/// The neighbour of finite (or infinite) float bits `b` of `dtype`, upward
/// (`up`) or downward.
fn step(b: u32, dtype: DType, up: bool) -> u32 {
    let sign = if dtype.size_in_bytes() == 2 {
        0x8000
    } else {
        0x8000_0000
    };
    let mag = b & (sign - 1);
    match (mag == 0, b & sign != 0, up) {
        (true, _, true) => 1,
        (true, _, false) => sign | 1,
        (false, false, true) | (false, true, false) => b + 1,
        (false, false, false) | (false, true, true) => b - 1,
    }
}

/// Uniform floats of `shape` in `[low, high)` under `key` (JAX
/// `random.uniform`), as `dtype` (f32, f16 or bf16).
///
/// Each value is `low + (high - low) * u` in f32, `u = (word >> 8) * 2^-24`
/// from the top 24 bits of a Philox word (see the module docs), rounded to
/// nearest (even) in `dtype`, and clamped to `[lo, hi]`, the smallest and
/// largest values of `dtype` with `low <= lo` and `hi < high`: rounding
/// never yields `high` itself. One dispatch on eval.
///
/// # Errors
/// As [`split`]; [`Error::DType`] for a non-float `dtype`;
/// [`Error::InvalidArgument`] unless `low < high`, both finite, `high - low`
/// finite in f32 and some value of `dtype` lies in `[low, high)`.
#[track_caller]
pub fn uniform(key: &Array, shape: &[usize], low: f64, high: f64, dtype: DType) -> Result<Array> {
    check_float_sample("random::uniform", key, shape, dtype)?;
    let bad = |why: &str| {
        Error::InvalidArgument(format!(
            "random::uniform over [{low}, {high}) as {dtype}: {why}"
        ))
    };
    let scale = (high - low) as f32;
    if !(low.is_finite() && high.is_finite() && low < high && scale.is_finite()) {
        return Err(bad("needs finite low < high"));
    }
    let mut lo = to_bits(low, dtype);
    if from_bits(lo, dtype) < low {
        lo = step(lo, dtype, true);
    }
    let mut hi = to_bits(high, dtype);
    if from_bits(hi, dtype) >= high {
        hi = step(hi, dtype, false);
    }
    let (lo, hi) = (from_bits(lo, dtype), from_bits(hi, dtype));
    if !(lo <= hi && lo.is_finite() && hi.is_finite()) {
        return Err(bad("the dtype has no value in the interval"));
    }
    let dist = Distribution::Uniform {
        low: lo as f32,
        scale,
        max: hi as f32,
    };
    Ok(sample(key, shape, dtype, dist, 0))
}

/// Normal floats of `shape` with `mean` and standard deviation `std` under
/// `key` (JAX `random.normal`, scaled), as `dtype` (f32, f16 or bf16): the
/// Box-Muller transform of pairs of Philox words, in f32, rounded to nearest
/// (even) in `dtype` (see the module docs). One dispatch on eval.
///
/// # Errors
/// As [`split`]; [`Error::DType`] for a non-float `dtype`;
/// [`Error::InvalidArgument`] unless `mean` and `std` are finite.
#[track_caller]
pub fn normal(key: &Array, shape: &[usize], mean: f64, std: f64, dtype: DType) -> Result<Array> {
    check_float_sample("random::normal", key, shape, dtype)?;
    if !(mean.is_finite() && std.is_finite()) {
        return Err(Error::InvalidArgument(format!(
            "random::normal needs a finite mean and std, got {mean} and {std}"
        )));
    }
    let dist = Distribution::Normal {
        mean: mean as f32,
        std: std as f32,
    };
    Ok(sample(key, shape, dtype, dist, 0))
}

/// Uniform integers of `shape` in `[low, high)` under `key` (JAX
/// `random.randint(key, shape, minval, maxval, dtype)`, MLX `randint`), as
/// `dtype` (i32 or u32).
///
/// Each element takes 64 Philox bits `w` (see the module docs) and is
/// `low + floor(w * (high - low) / 2^64)`: every value of the range is
/// equally likely to within `(high - low) / 2^64` (MLX and JAX, from 32
/// bits or a float, are biased by up to `(high - low) / 2^32`). Integer
/// arithmetic only, so identical on every backend. One dispatch on eval.
///
/// # Errors
/// As [`split`]; [`Error::DType`] unless `dtype` is i32 or u32;
/// [`Error::InvalidArgument`] unless `low < high` and both lie in the
/// dtype's range (`high` may be one past its largest value).
#[track_caller]
pub fn randint(key: &Array, shape: &[usize], low: i64, high: i64, dtype: DType) -> Result<Array> {
    key.device().check_array("random::randint", shape, dtype)?;
    check_key("random::randint", key)?;
    let (min, max) = match dtype {
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U32 => (0, u32::MAX as i64),
        _ => {
            return Err(Error::DType {
                op: "random::randint",
                dtype,
                other: None,
            });
        }
    };
    if !(low < high && low >= min && high <= max + 1) {
        return Err(Error::InvalidArgument(format!(
            "random::randint: needs low < high within {dtype}'s range [{min}, {max}], \
             got low={low}, high={high}"
        )));
    }
    let dist = Distribution::Integer {
        low: low as u32,
        range: (high - low) as u64 as u32,
    };
    Ok(sample(key, shape, dtype, dist, 0))
}

/// Laplace (double exponential) floats of `shape` with location `loc` and
/// scale `scale` under `key` (NumPy `laplace(loc, scale)`, JAX
/// `random.laplace` scaled, MLX `laplace`), as `dtype` (f32, f16 or bf16):
/// `loc - scale * sign(w) * log(1 - |w|)` for `w = 2u - 1` uniform in
/// (-1, 1) (see the module docs), in f32, rounded to `dtype`. One dispatch.
///
/// # Errors
/// As [`split`]; [`Error::DType`] for a non-float `dtype`;
/// [`Error::InvalidArgument`] unless `loc` and `scale` are finite and
/// `scale` positive.
// Alike in steps to `normal`, but left apart: the parameters, their bounds
// and the words of the error are laplace's own.
#[track_caller]
pub fn laplace(key: &Array, shape: &[usize], loc: f64, scale: f64, dtype: DType) -> Result<Array> {
    check_float_sample("random::laplace", key, shape, dtype)?;
    if !(loc.is_finite() && scale.is_finite() && scale > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "random::laplace: needs a finite loc and a finite scale > 0, got loc={loc}, scale={scale}"
        )));
    }
    let dist = Distribution::Laplace {
        loc: loc as f32,
        scale: scale as f32,
    };
    Ok(sample(key, shape, dtype, dist, 0))
}

/// Standard Gumbel floats of `shape` under `key` (JAX `random.gumbel`, MLX
/// `gumbel`), as `dtype` (f32, f16 or bf16): `-log(-log(u))` with `u`
/// uniform in (0, 1) (see the module docs), so every value is finite
/// (within about [-2.8, 16.6]); `-log(u)` is `-log1p(u - 1)` for `u >= 1/2`,
/// accurate where `u` is near 1. One dispatch.
///
/// # Errors
/// As [`split`]; [`Error::DType`] for a non-float `dtype`.
#[track_caller]
pub fn gumbel(key: &Array, shape: &[usize], dtype: DType) -> Result<Array> {
    check_float_sample("random::gumbel", key, shape, dtype)?;
    Ok(sample(key, shape, dtype, Distribution::Gumbel, 0))
}

/// Standard normal floats of `shape` truncated to `(lower, upper)` under
/// `key` (JAX `random.truncated_normal(key, lower, upper, shape)`, MLX
/// `truncated_normal`; bounds in standard deviations, infinite bounds
/// allowed), as `dtype` (f32, f16 or bf16).
///
/// Inversion of the normal CDF, as JAX and MLX, but in the tails with the
/// complementary function: for `lower >= 0` the sample is
/// `sqrt(2) erfinv(1 - q)` with `q` uniform between `erfc(upper/sqrt 2)`
/// and `erfc(lower/sqrt 2)` and `erfinv`'s log taken of `q (2 - q)`, so a
/// tail interval such as `(3, 6)` keeps f32's relative precision instead
/// of the few values `erf` near 1 can tell apart; `upper <= 0` mirrors
/// that. The CDF values come from f64 `erf`/`erfc` on the host (the `libm`
/// crate). Results are clamped to the smallest and largest values of
/// `dtype` strictly inside the bounds. One dispatch.
///
/// # Errors
/// As [`split`]; [`Error::DType`] for a non-float `dtype`;
/// [`Error::InvalidArgument`] unless `lower < upper` (neither NaN), the
/// interval holds probability that f32 can resolve (roughly: within 13
/// standard deviations of 0), and a value of `dtype` lies strictly inside.
#[track_caller]
pub fn truncated_normal(
    key: &Array,
    shape: &[usize],
    lower: f64,
    upper: f64,
    dtype: DType,
) -> Result<Array> {
    key.device()
        .check_array("random::truncated_normal", shape, dtype)?;
    check_key("random::truncated_normal", key)?;
    check_float("random::truncated_normal", dtype)?;
    let bad = |why: &str| {
        Error::InvalidArgument(format!(
            "random::truncated_normal over ({lower}, {upper}) as {dtype}: {why}"
        ))
    };
    if lower.is_nan() || upper.is_nan() || lower >= upper {
        return Err(bad("needs lower < upper"));
    }
    // The dtype's values strictly inside (lower, upper).
    let inside = |x: f64, up: bool| -> f64 {
        if x.is_infinite() {
            let max = from_bits(step(to_bits(f64::INFINITY, dtype), dtype, false), dtype);
            return if up { -max } else { max };
        }
        let mut b = to_bits(x, dtype);
        let v = from_bits(b, dtype);
        if (up && v <= x) || (!up && v >= x) {
            b = step(b, dtype, up);
        }
        from_bits(b, dtype)
    };
    let (lo, hi) = (inside(lower, true), inside(upper, false));
    if lo.is_nan() || hi.is_nan() || lo > hi {
        return Err(bad("the dtype has no value strictly inside"));
    }
    let s = std::f64::consts::SQRT_2;
    // (u at lower, u at upper) and the branch: erf in the middle, erfc in
    // the tails, where 1 - erf keeps no precision.
    let (ua, ub, tail) = if lower >= 0.0 {
        (libm::erfc(lower / s), libm::erfc(upper / s), 1)
    } else if upper <= 0.0 {
        (libm::erfc(-upper / s), libm::erfc(-lower / s), 2)
    } else {
        (libm::erf(lower / s), libm::erf(upper / s), 0)
    };
    let (u0, du) = (ua as f32, (ub - ua) as f32);
    if du == 0.0 || !du.is_finite() || (tail != 0 && u0.max(u0 + du) <= 0.0) {
        return Err(bad("the interval holds no probability f32 can resolve"));
    }
    let dist = Distribution::TruncatedNormal {
        u0,
        du,
        lo: lo as f32,
        hi: hi as f32,
        tail,
    };
    Ok(sample(key, shape, dtype, dist, 0))
}

/// Bernoulli draws: bool of `shape`, true with probability `p` (JAX
/// `random.bernoulli(key, p, shape)`, MLX `bernoulli`; dropout's mask):
/// `uniform(key, shape, 0, 1) < p` with the 24-bit uniform of [`uniform`],
/// so `p` counts in steps of 2^-24 (`p = 0` is never, `p = 1` always).
/// Two dispatches (the uniform draw, the comparison). For a `p` per element see
/// [`bernoulli_with`].
///
/// # Errors
/// As [`split`]; [`Error::InvalidArgument`] unless `0 <= p <= 1`.
#[track_caller]
pub fn bernoulli(key: &Array, p: f64, shape: &[usize]) -> Result<Array> {
    key.device()
        .check_array("random::bernoulli", shape, DType::Bool)?;
    check_key("random::bernoulli", key)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::InvalidArgument(format!(
            "random::bernoulli: p must lie in [0, 1], got {p}"
        )));
    }
    let u = uniform(key, shape, 0.0, 1.0, DType::F32)?;
    u.less(p)
}

/// Bernoulli draws with a probability per element: `p` (any float or
/// integer dtype, taken to f32) broadcast to `shape`, or `p`'s own shape
/// for `None` (MLX `bernoulli(p, shape)`). As [`bernoulli`]; a `p` below 0
/// (or NaN) never draws true and above 1 always does (the values are not
/// checked: they are on the device).
///
/// # Errors
/// [`Error::DeviceMismatch`]; as [`split`]; [`Error::ShapeMismatch`] when
/// `p` does not broadcast to `shape`; [`Error::DType`] for a bool `p`.
#[track_caller]
pub fn bernoulli_with(key: &Array, p: &Array, shape: Option<&[usize]>) -> Result<Array> {
    crate::ops::same_device("random::bernoulli", key, p)?;
    let shape = shape.unwrap_or(p.shape()).to_vec();
    key.device()
        .check_array("random::bernoulli", &shape, DType::Bool)?;
    check_key("random::bernoulli", key)?;
    let pb = p.broadcast_to(&shape).map_err(|_| Error::ShapeMismatch {
        op: "random::bernoulli",
        lhs: p.shape().to_vec(),
        rhs: shape.clone(),
    })?;
    if p.dtype() == DType::Bool {
        return Err(Error::DType {
            op: "random::bernoulli",
            dtype: p.dtype(),
            other: None,
        });
    }
    let u = uniform(key, &shape, 0.0, 1.0, DType::F32)?;
    u.less(&pb.astype(DType::F32)?)
}

/// Indices drawn from the categorical distributions `softmax(logits)`
/// along `axis` (JAX `random.categorical`, MLX `categorical(logits, axis,
/// num_samples)`): the token sampler of every text-generation loop. The
/// result (u32) drops `axis`; with `num_samples`, it gains a last axis of
/// that many independent draws per distribution.
///
/// The Gumbel-max trick (Gumbel 1954; as JAX and MLX): `argmax(logits +
/// g)` with `g` standard [`gumbel`] noise in f32, so the logits need no
/// normalisation and `-inf` marks an impossible category. Logits of any
/// float dtype (added in f32). Three dispatches: the noise, the sum, the
/// argmax. Zero samples, or an empty batch, give an empty result.
///
/// # Errors
/// [`Error::DeviceMismatch`]; as [`split`]; [`Error::InvalidAxis`];
/// [`Error::InvalidArgument`] when the axis is empty (no category to
/// draw); [`Error::TooLarge`] for a result past `usize` elements;
/// [`Error::DType`] for non-float logits.
#[track_caller]
pub fn categorical(
    key: &Array,
    logits: &Array,
    axis: impl Into<Axis>,
    num_samples: Option<usize>,
) -> Result<Array> {
    let axis = axis.into().get();
    crate::ops::same_device("random::categorical", key, logits)?;
    check_key("random::categorical", key)?;
    let a = normalize_axis("random::categorical", axis, logits.ndim())?;
    if logits.shape()[a] == 0 {
        return Err(Error::InvalidArgument(format!(
            "random::categorical: axis {axis} of `logits` (shape {:?}) is empty: no category to draw",
            logits.shape()
        )));
    }
    if let Some(s) = num_samples {
        let mut shape = logits.shape().to_vec();
        shape.push(s);
        key.device()
            .check_array("random::categorical", &shape, DType::U32)?;
    }
    if !logits.dtype().is_float() {
        return Err(Error::DType {
            op: "random::categorical",
            dtype: logits.dtype(),
            other: None,
        });
    }
    let mut x = logits.moveaxis(a as isize, -1)?;
    if let Some(s) = num_samples {
        let mut shape = x.shape().to_vec();
        shape.insert(shape.len() - 1, s);
        x = x.expand_dims(-2isize)?.broadcast_to(&shape)?;
    }
    let g = gumbel(key, x.shape(), DType::F32)?;
    let y = (&x.astype(DType::F32)? + &g)?;
    if y.size() == 0 {
        // No draw to make (a zero-length batch axis or zero samples).
        let mut shape = y.shape().to_vec();
        shape.pop();
        return Array::zeros(&shape, DType::U32, key.device());
    }
    y.argmax(-1, false)
}
