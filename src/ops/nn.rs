//! Neural-network building blocks composed from the other ops: softmax,
//! log_softmax, layer_norm, rms_norm. Each computes in f32 for f16/bf16 input
//! and rounds the result back.

use crate::ops::reduce::Axes;
use crate::{Array, DType, Result, Scalar};

impl Array {
    // The ops compute between `widen` and `narrow_like` in straight-line
    // code, not in closures, so that every op they record gets the
    // caller's location (`#[track_caller]` does not pass into closures).

    /// This array in f32 if it is f16 or bf16, else as it is.
    #[track_caller]
    fn widen(&self) -> Result<Array> {
        match self.dtype() {
            DType::F16 | DType::BF16 => self.astype(DType::F32),
            _ => Ok(self.clone()),
        }
    }

    /// `y`, computed from [`Array::widen`] of this array, rounded back to
    /// this array's dtype if that is f16 or bf16.
    #[track_caller]
    fn narrow_like(&self, y: Array) -> Result<Array> {
        match self.dtype() {
            DType::F16 | DType::BF16 => y.astype(self.dtype()),
            _ => Ok(y),
        }
    }

    /// Softmax along `axis`: `e / sum(e)` with `e = exp(x - max(x))`
    /// (PyTorch/MLX `softmax`). Subtracting the maximum keeps `exp` from
    /// overflowing, and the row's largest element contributes exactly 1,
    /// so `n` equal values give exactly `1 / n` however large they are
    /// (`exp(x - logsumexp(x))` lost the low bits of `x`). Integer input
    /// gives f32; f16 and bf16 compute in f32 and round once. A row with
    /// NaN, or with `+inf`, is NaN; an empty array stays empty.
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    #[track_caller]
    pub fn softmax(&self, axis: isize) -> Result<Array> {
        let (shifted, _) = self.widen()?.shift_by_max("softmax", axis)?;
        let e = shifted.exp()?;
        let y = (&e / &e.sum(Axes::from(axis), true)?)?;
        self.narrow_like(y)
    }

    /// `(x - max) - log(sum(exp(x - max)))` along `axis` (PyTorch/MLX
    /// `log_softmax`). The log is `log1p(sum - 1)` (the sum is at least 1,
    /// and `sum - 1` is exact in f32), which is within 2 ulp where WGSL's
    /// `log` may be 3 ulp off: `n` equal values give `-ln n` to 1 ulp.
    /// Dtypes as [`Array::softmax`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    #[track_caller]
    pub fn log_softmax(&self, axis: isize) -> Result<Array> {
        let (shifted, empty) = self.widen()?.shift_by_max("log_softmax", axis)?;
        if empty {
            return self.narrow_like(shifted);
        }
        let sum = shifted.exp()?.sum(Axes::from(axis), true)?;
        let y = (&shifted - &(&sum - 1.0)?.log1p()?)?;
        self.narrow_like(y)
    }

    /// `x - max(x)` along `axis` (keepdims), in a float dtype (integers as
    /// f32), and whether `x` is empty (then `x` itself: there is no
    /// maximum to subtract, and nothing to compute).
    #[track_caller]
    fn shift_by_max(&self, op: &'static str, axis: isize) -> Result<(Array, bool)> {
        crate::shape::normalize_axis(op, axis, self.ndim())?;
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.astype(DType::F32)?
        };
        if x.size() == 0 {
            return Ok((x, true));
        }
        let max = x.max(Axes::from(axis), true)?;
        Ok(((&x - &max)?, false))
    }

    /// Layer normalisation over the last axis (Ba, Kiros & Hinton 2016;
    /// PyTorch `layer_norm` with `normalized_shape = x.shape[-1:]`):
    /// `(x - mean) / sqrt(var + eps) * weight + bias`, with the biased
    /// variance. `weight` and `bias` have shape `[x.shape[-1]]` (or
    /// broadcast to it: `[1]`, `[]`); either may be absent. `eps` is any
    /// scalar ([`crate::Scalar`]: `1e-5`, `1e-5f32`). Integer input gives
    /// f32; f16 and bf16 compute in f32 and round once.
    ///
    /// # Errors
    /// [`crate::Error::DeviceMismatch`]; [`crate::Error::InvalidAxis`] for a
    /// 0-d input; [`crate::Error::ShapeMismatch`] naming `layer_norm` for a
    /// weight or bias that does not broadcast to `[x.shape[-1]]`.
    #[track_caller]
    pub fn layer_norm(
        &self,
        weight: Option<&Array>,
        bias: Option<&Array>,
        eps: impl Scalar,
    ) -> Result<Array> {
        self.check_norm("layer_norm", &[weight, bias])?;
        let x = &self.widen()?;
        let mut mv = x.reduce(
            "layer_norm",
            crate::graph::primitive::ReduceOp::Moments,
            Axes::from(-1isize),
            true,
            0,
        )?;
        let var = mv.pop().expect("two outputs");
        let mean = mv.pop().expect("two outputs");
        let mut y = (&(x - &mean)? * &(&var + eps)?.rsqrt()?)?;
        if let Some(w) = weight {
            y = (&y * &w.astype(DType::F32)?)?;
        }
        if let Some(b) = bias {
            y = (&y + &b.astype(DType::F32)?)?;
        }
        self.narrow_like(y)
    }

    /// RMS normalisation over the last axis (Zhang & Sennrich 2019; MLX
    /// `rms_norm`): `x / sqrt(mean(x^2) + eps) * weight`. Shapes, dtypes
    /// and `eps` as [`Array::layer_norm`].
    ///
    /// # Errors
    /// As [`Array::layer_norm`], naming `rms_norm`.
    #[track_caller]
    pub fn rms_norm(&self, weight: Option<&Array>, eps: impl Scalar) -> Result<Array> {
        self.check_norm("rms_norm", &[weight])?;
        let x = &self.widen()?;
        let ms = x.square()?.mean(Axes::from(-1isize), true)?;
        let mut y = (x * &(&ms + eps)?.rsqrt()?)?;
        if let Some(w) = weight {
            y = (&y * &w.astype(DType::F32)?)?;
        }
        self.narrow_like(y)
    }

    /// The checks of a normalisation over the last axis, in the house
    /// order (devices, then shapes), so that a bad parameter is reported
    /// under the op's own name, not the name of a step inside it.
    fn check_norm(&self, op: &'static str, params: &[Option<&Array>]) -> Result<()> {
        for p in params.iter().flatten() {
            super::same_device(op, self, p)?;
        }
        let last = crate::shape::normalize_axis(op, -1, self.ndim())?;
        let want = [self.shape()[last]];
        for p in params.iter().flatten() {
            if crate::shape::broadcast_shapes(op, p.shape(), &want)
                .ok()
                .as_deref()
                != Some(&want)
            {
                return Err(crate::Error::ShapeMismatch {
                    op,
                    lhs: self.shape().to_vec(),
                    rhs: p.shape().to_vec(),
                });
            }
        }
        Ok(())
    }
}
