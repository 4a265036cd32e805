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
//! Every sampler is one node and one dispatch; the key may itself be lazy
//! (the result of [`split`] and a slice of it, for example).
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

use crate::graph::Primitive;
use crate::graph::primitive::Distribution;
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
    crate::shape::check_shape("random::split", &[num, 2])?;
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
    crate::shape::check_shape("random::bits", shape)?;
    check_key("random::bits", key)?;
    Ok(sample(key, shape, DType::U32, Distribution::Bits, 0))
}

fn check_float(op: &'static str, dtype: DType) -> Result<()> {
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
    crate::shape::check_shape("random::uniform", shape)?;
    check_key("random::uniform", key)?;
    check_float("random::uniform", dtype)?;
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
    crate::shape::check_shape("random::normal", shape)?;
    check_key("random::normal", key)?;
    check_float("random::normal", dtype)?;
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
