//! Value checks and cleanups composed from elementwise ops and reductions:
//! `nan_to_num`, `isclose`, `allclose`, `array_equal`, and `round` with a
//! number of decimals (`round_decimals`).
//!
//! Each records a few elementwise nodes (and, for `allclose` and
//! `array_equal`, one `all` reduction); constants are lazy 0-d arrays, so
//! the fusion pass folds a whole check into one kernel (plus the
//! reduction). The per-element predicates themselves (`isnan`, `isinf`,
//! `isfinite`, `isposinf`, `isneginf`) are unary ops in
//! `ops/elementwise.rs`.

use crate::ops::elementwise::where_;
use crate::{Array, DType, Operand, Result};

/// The largest finite value of a float dtype.
fn finite_max(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => half::f16::MAX.to_f64(),
        DType::BF16 => half::bf16::MAX.to_f64(),
        _ => f32::MAX as f64,
    }
}

impl Array {
    /// NaN replaced by `nan`, +inf by `posinf` and -inf by `neginf` (NumPy
    /// `nan_to_num(x, nan=0.0, posinf=None, neginf=None)`, MLX
    /// `nan_to_num`): `None` means the dtype's largest (most negative)
    /// finite value. The replacements are converted to the array's dtype
    /// (a value too large for f16 becomes inf there). Integer and bool
    /// arrays hold no NaN or infinity and come back as they are. Shape and
    /// dtype unchanged; elementwise (one kernel once fused: tests on the
    /// bits and selects).
    ///
    /// # Errors
    /// None today; `Result` so that every op composes with `?`.
    #[track_caller]
    pub fn nan_to_num(&self, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Result<Array> {
        super::refuse_blocks("nan_to_num", &[self])?;
        let d = self.dtype();
        if !d.is_float() {
            return Ok(self.clone());
        }
        let max = finite_max(d);
        // The replacements are weak scalars: they take the array's dtype.
        let r = where_(&self.isnan()?, nan, self)?;
        let r = where_(&self.isposinf()?, posinf.unwrap_or(max), &r)?;
        where_(&self.isneginf()?, neginf.unwrap_or(-max), &r)
    }

    /// Whether `self` and `other` are equal within a tolerance, elementwise,
    /// as bool (NumPy `isclose(a, b, rtol, atol, equal_nan)`; NumPy's
    /// defaults are `rtol = 1e-5`, `atol = 1e-8`):
    /// `|a - b| <= atol + rtol * |b|` with `b` finite, or `a == b` (so equal
    /// infinities are close and opposite ones are not), or, with
    /// `equal_nan`, both NaN. Not symmetric in `a` and `b`, as in NumPy.
    ///
    /// `other` is an array or a weak scalar ([`crate::Operand`]). Shapes
    /// broadcast; dtypes promote ([`crate::promote_types`]); the
    /// tolerance test computes in f32 (f16 and bf16 exactly widened, so a
    /// small `atol` does not underflow; integers converted), the equality
    /// test in the promoted dtype. Elementwise: one kernel once fused.
    ///
    /// # Errors
    /// [`crate::Error::DeviceMismatch`]; [`crate::Error::ShapeMismatch`]
    /// when the shapes do not broadcast; [`crate::Error::InvalidArgument`]
    /// for a negative or NaN `rtol` or `atol`, or an integer scalar the
    /// array's integer dtype cannot hold.
    #[track_caller]
    pub fn isclose(
        &self,
        other: impl Operand,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Result<Array> {
        self.isclose_named("isclose", other, rtol, atol, equal_nan)
    }

    /// [`Array::isclose`], its errors naming `op`.
    #[track_caller]
    fn isclose_named(
        &self,
        op: &'static str,
        other: impl Operand,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Result<Array> {
        let (_, other) = self.pair_with(op, other)?;
        super::same_device(op, self, &other)?;
        crate::shape::broadcast_shapes(op, self.shape(), other.shape())?;
        super::refuse_blocks(op, &[self, &other])?;
        if !(rtol >= 0.0 && atol >= 0.0) {
            return Err(crate::Error::InvalidArgument(format!(
                "{op}: `rtol` and `atol` must be non-negative, got rtol={rtol}, atol={atol}"
            )));
        }
        let other = &other;
        let (a, b) = (self.astype(DType::F32)?, other.astype(DType::F32)?);
        let diff = (&a - &b)?.abs()?;
        let bound = (&(&b.abs()? * rtol)? + atol)?;
        let close = diff
            .less_equal(&bound)?
            .logical_and(&b.isfinite()?)?
            .logical_or(&self.equal(other)?)?;
        if !equal_nan {
            return Ok(close);
        }
        close.logical_or(&self.isnan()?.logical_and(&other.isnan()?)?)
    }

    // `allclose` repeats `isclose`'s signature because both are public
    // methods; the work is in `isclose_named`.

    /// Whether every element of [`Array::isclose`] holds (NumPy
    /// `allclose`, MLX `allclose`), as a lazy 0-d bool array (read it
    /// with `.item::<bool>()`); true for empty arrays. The elementwise test
    /// and one `all` reduction: two dispatches once fused.
    ///
    /// # Errors
    /// As [`Array::isclose`].
    #[track_caller]
    pub fn allclose(
        &self,
        other: impl Operand,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Result<Array> {
        self.isclose_named("allclose", other, rtol, atol, equal_nan)?
            .all(None, false)
    }

    /// Whether `self` and `other` have the same shape and equal elements
    /// (NumPy `array_equal(a1, a2, equal_nan)`, MLX `array_equal`), as a
    /// lazy 0-d bool array. Values compare after promotion to a common
    /// dtype (1 equals 1.0); with `equal_nan`, NaN equals NaN. Different
    /// shapes give false without a kernel (no broadcasting, as NumPy).
    /// Empty arrays of one shape are equal.
    ///
    /// # Errors
    /// [`crate::Error::DeviceMismatch`].
    #[track_caller]
    pub fn array_equal(&self, other: &Array, equal_nan: bool) -> Result<Array> {
        super::same_device("array_equal", self, other)?;
        super::refuse_blocks("array_equal", &[self, other])?;
        if self.shape() != other.shape() {
            return Array::full(&[], false, DType::Bool, self.device());
        }
        let mut eq = self.equal(other)?;
        if equal_nan {
            eq = eq.logical_or(&self.isnan()?.logical_and(&other.isnan()?)?)?;
        }
        eq.all(None, false)
    }

    /// Round to `decimals` decimal places, half to even (NumPy
    /// `round(a, decimals)`, MLX `round(a, decimals)`); negative `decimals`
    /// round to tens, hundreds, ...
    ///
    /// Floats as NumPy: `rint(x * 10^d) / 10^d` (for `d < 0`,
    /// `rint(x / 10^-d) * 10^-d`) in f32 (f16 and bf16 widened, then
    /// rounded back once), so results carry the binary representation's
    /// error as NumPy's do (2.675 rounds to 2.67). Unlike NumPy, `|x| >=
    /// 2^23` (already an integer) and `10^d` beyond f32 leave `x` as it
    /// is instead of overflowing to inf or NaN. Integers: unchanged for
    /// `d >= 0`; for `d < 0`, rounded half to even to a multiple of `10^-d`
    /// in integer arithmetic (exact; a multiple beyond the dtype wraps, as
    /// NumPy's int32 does). Bool is returned as it is.
    ///
    /// # Errors
    /// None today; `Result` so that every op composes with `?`.
    #[track_caller]
    pub fn round_decimals(&self, decimals: i32) -> Result<Array> {
        super::refuse_blocks("round", &[self])?;
        let d = self.dtype();
        if decimals == 0 || d == DType::Bool {
            return self.round();
        }
        if !d.is_float() {
            if decimals > 0 {
                return Ok(self.clone());
            }
            return self.round_integer_to(10f64.powi(-decimals));
        }
        let p = 10f64.powi(decimals.abs());
        if !(p as f32).is_finite() || (decimals < 0 && p > 2f64.powi(130)) {
            // 10^d beyond f32: every f32 is already a multiple of 10^-d
            // (d > 38); for d < -38 every finite f32 rounds to 0.
            return if decimals > 0 {
                Ok(self.clone())
            } else {
                (self * 0.0)?.astype(d)
            };
        }
        let x = self.widen()?;
        let scaled = if decimals > 0 { (&x * p)? } else { (&x / p)? };
        let rounded = scaled.round()?;
        let back = if decimals > 0 {
            (&rounded / p)?
        } else {
            (&rounded * p)?
        };
        // |x| >= 2^23 is an integer already: for d > 0 keep it (x * 10^d
        // may overflow); for d < 0 the formula holds.
        let y = if decimals > 0 {
            let big = x.abs()?.greater_equal(8388608.0)?;
            where_(&big, &x, &back)?
        } else {
            back
        };
        self.narrow_like(y)
    }

    /// An integer array rounded half to even to a multiple of `step`
    /// (`step` >= 10), exactly: `q = floor(x / step)`, `r = x - q step`,
    /// up when `2r > step` or `2r == step` with `q` odd.
    #[track_caller]
    fn round_integer_to(&self, step: f64) -> Result<Array> {
        let d = self.dtype();
        let limit = if d == DType::I32 {
            i32::MAX as f64
        } else {
            u32::MAX as f64
        };
        if step > limit {
            // Every value is nearer 0 than the step (or half-way, and 0 is
            // even).
            return Array::zeros(self.shape(), d, self.device());
        }
        // `step` is a power of ten the dtype holds.
        let s = Array::full(&[], step as i64, d, self.device())?;
        let (q, r) = self.divmod(&s)?;
        let odd = q.remainder(2)?.not_equal(0)?;
        // 2r may wrap for a step above half the dtype's range; compare r
        // with step - r instead (both in range).
        let rest = (&s - &r)?;
        let up = r
            .greater(&rest)?
            .logical_or(&r.equal(&rest)?.logical_and(&odd)?)?;
        let q = (&q + &up.astype(d)?)?;
        &q * &s
    }
}
