//! Neural-network building blocks composed from the other ops: softmax,
//! log_softmax, layer_norm, rms_norm. Each computes in f32 for f16/bf16 input
//! and rounds the result back.

use crate::ops::reduce::Axes;
use crate::{Array, DType, Result};

impl Array {
    // The ops compute between `widen` and `narrow_like` in straight-line
    // code, not in closures, so that every op they record gets the
    // caller's location (`#[track_caller]` does not pass into closures).

    /// This array in f32 if it is f16 or bf16, else as it is.
    #[track_caller]
    pub(crate) fn widen(&self) -> Result<Array> {
        match self.dtype() {
            DType::F16 | DType::BF16 => self.astype(DType::F32),
            _ => Ok(self.clone()),
        }
    }

    /// `y`, computed from [`Array::widen`] of this array, rounded back to
    /// this array's dtype if that is f16 or bf16.
    #[track_caller]
    pub(crate) fn narrow_like(&self, y: Array) -> Result<Array> {
        match self.dtype() {
            DType::F16 | DType::BF16 => y.astype(self.dtype()),
            _ => Ok(y),
        }
    }

    /// Softmax over `axes` (one axis, several, or [`Axes::All`]):
    /// `e / sum(e)` with `e = exp(x - max(x))` (PyTorch/MLX `softmax`;
    /// `x.softmax(-1)`, `x.softmax([0, 2])`). Subtracting the maximum keeps
    /// `exp` from overflowing, and the largest element contributes exactly
    /// 1, so `n` equal values give exactly `1 / n` however large they are
    /// (`exp(x - logsumexp(x))` lost the low bits of `x`). Integer input
    /// gives f32; f16 and bf16 compute in f32 and round once. A group with
    /// NaN, or with `+inf`, is NaN; an empty array stays empty.
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    #[track_caller]
    pub fn softmax(&self, axes: impl Into<Axes>) -> Result<Array> {
        let axes = axes.into();
        let (shifted, _) = self.widen()?.shift_by_max(&axes)?;
        let e = shifted.exp()?;
        let y = (&e / &e.sum(axes, true)?)?;
        self.narrow_like(y)
    }

    /// `(x - max) - log(sum(exp(x - max)))` over `axes` (PyTorch/MLX
    /// `log_softmax`; one axis, several, or [`Axes::All`]). The log is
    /// `log1p(sum - 1)` (the sum is at least 1, and `sum - 1` is exact in
    /// f32), which is within 2 ulp where WGSL's `log` may be 3 ulp off: `n`
    /// equal values give `-ln n` to 1 ulp. Dtypes as [`Array::softmax`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    #[track_caller]
    pub fn log_softmax(&self, axes: impl Into<Axes>) -> Result<Array> {
        let axes = axes.into();
        let (shifted, empty) = self.widen()?.shift_by_max(&axes)?;
        if empty {
            return self.narrow_like(shifted);
        }
        let sum = shifted.exp()?.sum(axes, true)?;
        let y = (&shifted - &(&sum - 1.0)?.log1p()?)?;
        self.narrow_like(y)
    }

    /// `x - max(x)` over `axes` (keepdims), in a float dtype (integers as
    /// f32), and whether `x` is empty (then `x` itself: there is no
    /// maximum to subtract, and nothing to compute).
    #[track_caller]
    fn shift_by_max(&self, axes: &Axes) -> Result<(Array, bool)> {
        axes.resolve(self.ndim())?;
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.astype(DType::F32)?
        };
        if x.size() == 0 {
            return Ok((x, true));
        }
        let max = x.max(axes.clone(), true)?;
        Ok(((&x - &max)?, false))
    }

    /// Layer normalisation over the last axis (Ba, Kiros & Hinton 2016;
    /// PyTorch `layer_norm` with `normalized_shape = x.shape[-1:]`):
    /// `(x - mean) / sqrt(var + eps) * weight + bias`, with the biased
    /// variance. `weight` and `bias` have shape `[x.shape[-1]]` (or
    /// broadcast to it); either may be absent.
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`] for a 0-d input,
    /// [`crate::Error::ShapeMismatch`] for a weight or bias that does not
    /// broadcast.
    #[track_caller]
    pub fn layer_norm(
        &self,
        weight: Option<&Array>,
        bias: Option<&Array>,
        eps: f32,
    ) -> Result<Array> {
        let x = &self.widen()?;
        let mut mv = x.reduce(
            crate::graph::primitive::ReduceOp::Moments,
            Axes::from(-1isize),
            true,
            0,
        )?;
        let var = mv.pop().expect("two outputs");
        let mean = mv.pop().expect("two outputs");
        let mut y = (&(x - &mean)? * &(&var + eps as f64)?.rsqrt()?)?;
        if let Some(w) = weight {
            y = (&y * &w.astype(DType::F32)?)?;
        }
        if let Some(b) = bias {
            y = (&y + &b.astype(DType::F32)?)?;
        }
        self.narrow_like(y)
    }

    /// RMS normalisation over the last axis (Zhang & Sennrich 2019; MLX
    /// `rms_norm`): `x / sqrt(mean(x^2) + eps) * weight`.
    ///
    /// # Errors
    /// As [`Array::layer_norm`].
    #[track_caller]
    pub fn rms_norm(&self, weight: Option<&Array>, eps: f32) -> Result<Array> {
        let x = &self.widen()?;
        let ms = x.square()?.mean(Axes::from(-1isize), true)?;
        let mut y = (x * &(&ms + eps as f64)?.rsqrt()?)?;
        if let Some(w) = weight {
            y = (&y * &w.astype(DType::F32)?)?;
        }
        self.narrow_like(y)
    }
}
