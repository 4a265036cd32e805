//! Neural-network building blocks composed from the other ops: softmax,
//! log_softmax, layer_norm, rms_norm. Each computes in f32 for f16/bf16 input
//! and rounds the result back.

use crate::ops::reduce::Axes;
use crate::{Array, DType, Result};

impl Array {
    fn in_f32(&self, f: impl FnOnce(&Array) -> Result<Array>) -> Result<Array> {
        match self.dtype() {
            DType::F16 | DType::BF16 => f(&self.astype(DType::F32)?)?.astype(self.dtype()),
            _ => f(self),
        }
    }

    /// `exp(x - logsumexp(x))` along `axis`: softmax, with the maximum
    /// subtracted inside the one-pass logsumexp so nothing overflows (MLX
    /// `softmax`). Integer input gives f32.
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    pub fn softmax(&self, axis: isize) -> Result<Array> {
        self.in_f32(|x| x.log_softmax_f(axis)?.exp())
    }

    /// `x - logsumexp(x)` along `axis` (PyTorch/MLX `log_softmax`).
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    pub fn log_softmax(&self, axis: isize) -> Result<Array> {
        self.in_f32(|x| x.log_softmax_f(axis))
    }

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
    pub fn layer_norm(
        &self,
        weight: Option<&Array>,
        bias: Option<&Array>,
        eps: f32,
    ) -> Result<Array> {
        self.in_f32(|x| {
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
            Ok(y)
        })
    }

    /// RMS normalisation over the last axis (Zhang & Sennrich 2019; MLX
    /// `rms_norm`): `x / sqrt(mean(x^2) + eps) * weight`.
    ///
    /// # Errors
    /// As [`Array::layer_norm`].
    pub fn rms_norm(&self, weight: Option<&Array>, eps: f32) -> Result<Array> {
        self.in_f32(|x| {
            let ms = x.square()?.mean(Axes::from(-1isize), true)?;
            let y = (x * &(&ms + eps as f64)?.rsqrt()?)?;
            match weight {
                Some(w) => &y * &w.astype(DType::F32)?,
                None => Ok(y),
            }
        })
    }
}
