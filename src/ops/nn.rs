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

    /// `exp(x - logsumexp(x))` along `axis`: softmax, with the maximum
    /// subtracted inside the one-pass logsumexp so nothing overflows (MLX
    /// `softmax`). Integer input gives f32.
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    #[track_caller]
    pub fn softmax(&self, axis: isize) -> Result<Array> {
        let y = self.widen()?.log_softmax_f(axis)?.exp()?;
        self.narrow_like(y)
    }

    /// `x - logsumexp(x)` along `axis` (PyTorch/MLX `log_softmax`).
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    #[track_caller]
    pub fn log_softmax(&self, axis: isize) -> Result<Array> {
        let y = self.widen()?.log_softmax_f(axis)?;
        self.narrow_like(y)
    }

    #[track_caller]
    fn log_softmax_f(&self, axis: isize) -> Result<Array> {
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.astype(DType::F32)?
        };
        let lse = x.logsumexp(Axes::from(axis), true)?;
        &x - &lse
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
