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

    /// Softmax along `axis`: `exp(x - m) / s` with `m = max(x)` and
    /// `s = sum(exp(x - m))` (PyTorch/MLX `softmax`), in two dispatches:
    /// one pass computes `m` and `s` together with a running maximum
    /// (Milakov & Gimelshein 2018, "Online normalizer calculation for
    /// softmax"), and one fused elementwise kernel writes the result.
    /// Subtracting the maximum keeps `exp` from overflowing, and the row's
    /// largest element contributes exactly 1, so `n` equal values give
    /// exactly `1 / n` however large they are. Integer input gives f32; f16
    /// and bf16 compute in f32 and round once. A row with NaN, or with an
    /// infinity, is NaN; an empty array stays empty.
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    #[track_caller]
    pub fn softmax(&self, axis: isize) -> Result<Array> {
        let Some((shifted, sum)) = self.max_sum_exp(axis)? else {
            return self.narrow_like(self.as_float()?);
        };
        let y = (&shifted.exp()? / &sum)?;
        self.narrow_like(y)
    }

    /// `(x - m) - log(s)` along `axis`, `m` and `s` as in
    /// [`Array::softmax`] (PyTorch/MLX `log_softmax`), in two dispatches.
    /// The log is `log1p(s - 1)` (`s` is at least 1, and `s - 1` is exact
    /// in f32), which is within 2 ulp where WGSL's `log` may be 3 ulp off:
    /// `n` equal values give `-ln n` to 1 ulp. Dtypes as [`Array::softmax`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`].
    #[track_caller]
    pub fn log_softmax(&self, axis: isize) -> Result<Array> {
        let Some((shifted, sum)) = self.max_sum_exp(axis)? else {
            return self.narrow_like(self.as_float()?);
        };
        let y = (&shifted - &(&sum - 1.0)?.log1p()?)?;
        self.narrow_like(y)
    }

    /// This array in a float dtype (integers as f32; f16 and bf16 widened
    /// to f32).
    #[track_caller]
    fn as_float(&self) -> Result<Array> {
        if self.dtype().is_float() {
            self.widen()
        } else {
            self.astype(DType::F32)
        }
    }

    /// `(x - m, s)` along `axis` (keepdims; `m` the maximum, `s` the sum of
    /// `exp(x - m)`), from one reduction that reads `x` as it is (f16 and
    /// integers are widened in its loads, not in a kernel of their own);
    /// `None` for an empty array (nothing to compute).
    #[track_caller]
    fn max_sum_exp(&self, axis: isize) -> Result<Option<(Array, Array)>> {
        crate::shape::normalize_axis(axis, self.ndim())?;
        if self.size() == 0 {
            return Ok(None);
        }
        let mut ms = self.reduce(
            crate::graph::primitive::ReduceOp::MaxSumExp,
            Axes::from(axis),
            true,
            0,
        )?;
        let sum = ms.pop().expect("two outputs");
        let max = ms.pop().expect("two outputs");
        Ok(Some(((&self.as_float()? - &max)?, sum)))
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
        // The statistics read the input as it is (f16 widens in the loads).
        let x = &self.widen()?;
        let mut mv = self.reduce(
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
    /// `rms_norm`): `x / sqrt(mean(x^2) + eps) * weight`, in two
    /// dispatches (the mean of squares in one reduction, the rest fused).
    ///
    /// # Errors
    /// As [`Array::layer_norm`].
    #[track_caller]
    pub fn rms_norm(&self, weight: Option<&Array>, eps: f32) -> Result<Array> {
        let x = &self.widen()?;
        let ms = self
            .reduce(
                crate::graph::primitive::ReduceOp::MeanSquare,
                Axes::from(-1isize),
                true,
                0,
            )?
            .remove(0);
        let mut y = (x * &(&ms + eps as f64)?.rsqrt()?)?;
        if let Some(w) = weight {
            y = (&y * &w.astype(DType::F32)?)?;
        }
        self.narrow_like(y)
    }
}
