//! Neural-network building blocks composed from the other ops: softmax,
//! log_softmax, layer_norm, rms_norm. Each computes in f32 for f16/bf16 input
//! and rounds the result back.

use crate::graph::primitive::{
    MAX_ONE_PASS_ROW, MIN_ONE_PASS_ROWS, Norm, NormKind, Primitive, SHORT_ONE_PASS_ROW,
};
use crate::ops::reduce::Axes;
use crate::{Array, DType, Result, Scalar};

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

    /// Softmax over `axes` (one axis, several, or `None`:
    /// `x.softmax(-1)`, `x.softmax([0, 2])`): `exp(x - m) / s` with
    /// `m = max(x)` and `s = sum(exp(x - m))` over them (PyTorch/MLX
    /// `softmax`). `m` and `s` come from one pass with a running maximum
    /// (Milakov & Gimelshein 2018, "Online normalizer calculation for
    /// softmax"). Over the last axis of a float array with rows of at
    /// most 65536 elements that pass and the result are one kernel (the
    /// row is read twice, the second time from cache); otherwise two
    /// dispatches (the statistics, then a fused elementwise kernel).
    /// Subtracting the maximum keeps `exp` from overflowing, and the row's
    /// largest element contributes exactly 1, so `n` equal values give
    /// exactly `1 / n` however large they are. Integer input gives f32; f16
    /// and bf16 compute in f32 and round once. A row with NaN, or with an
    /// infinity, is NaN; an empty array stays empty. (A "row" is the group
    /// of elements the axes span.)
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`]; [`crate::Error::OpDType`] for f64.
    #[track_caller]
    pub fn softmax(&self, axes: impl Into<Axes>) -> Result<Array> {
        let axes = axes.into();
        if let Some(y) = self.one_pass(NormKind::Softmax, Some(&axes), &[], 0.0)? {
            return Ok(y);
        }
        let Some((shifted, sum)) = self.max_sum_exp("softmax", axes)? else {
            return self.narrow_like(self.as_float()?);
        };
        let y = (&shifted.exp()? / &sum)?;
        self.narrow_like(y)
    }

    /// `(x - m) - log(s)` over `axes` (one axis, several, or
    /// `None`), `m` and `s` as in [`Array::softmax`] (PyTorch/MLX
    /// `log_softmax`), in one kernel or two as [`Array::softmax`].
    /// The log is `log1p(s - 1)` (`s` is at least 1, and `s - 1` is exact
    /// in f32), which is within 2 ulp where WGSL's `log` may be 3 ulp off:
    /// `n` equal values give `-ln n` to 1 ulp. Dtypes as [`Array::softmax`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`]; [`crate::Error::OpDType`] for f64.
    #[track_caller]
    pub fn log_softmax(&self, axes: impl Into<Axes>) -> Result<Array> {
        let axes = axes.into();
        if let Some(y) = self.one_pass(NormKind::LogSoftmax, Some(&axes), &[], 0.0)? {
            return Ok(y);
        }
        let Some((shifted, sum)) = self.max_sum_exp("log_softmax", axes)? else {
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

    /// `(x - m, s)` over `axes` (keepdims; `m` the maximum, `s` the sum of
    /// `exp(x - m)`), from one reduction that reads `x` as it is (f16 and
    /// integers are widened in its loads, not in a kernel of their own);
    /// `None` for an empty array (nothing to compute).
    #[track_caller]
    fn max_sum_exp(&self, op: &'static str, axes: Axes) -> Result<Option<(Array, Array)>> {
        axes.resolve(op, self.ndim())?;
        if self.dtype() == DType::F64 {
            return Err(crate::Error::OpDType {
                op,
                dtype: DType::F64,
                takes: "float32, float16, bfloat16 and integer arrays (no 64-bit exp \
                        on the GPU; cast with astype(DType::F32))",
            });
        }
        if self.size() == 0 {
            return Ok(None);
        }
        let mut ms = self.reduce(
            op,
            crate::graph::primitive::ReduceOp::MaxSumExp,
            axes,
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
    /// broadcast to it: `[1]`, `[]`); either may be absent. `eps` is any
    /// scalar ([`crate::Scalar`]: `1e-5`, `1e-5f32`). Integer input gives
    /// f32; f16 and bf16 compute in f32 and round once.
    ///
    /// Float rows of at most 65536 elements (at least 256 rows of 2 or more) are normalised in one kernel
    /// that reads each row three times (the second and third time from
    /// cache): its mean, then the mean of its squared deviations from that
    /// mean (the two-pass variance, which unlike `E[x^2] - E[x]^2` loses
    /// nothing to cancellation when the mean is large against the spread;
    /// the sums within about `1e-6 * sqrt(n)` relative in f32), then the
    /// result. Longer rows, f64 and integers take the moments of Welford's
    /// algorithm in one reduction and a fused elementwise kernel.
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
        let eps32 = eps.value().to_f64() as f32;
        if let Some(y) = self.one_pass(NormKind::LayerNorm, None, &[weight, bias], eps32)? {
            return Ok(y);
        }
        // The statistics read the input as it is (f16 widens in the loads).
        let x = &self.widen()?;
        let mut mv = self.reduce(
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
    /// `rms_norm`): `x / sqrt(mean(x^2) + eps) * weight`. Float rows of
    /// at most 65536 elements (at least 256 of them) in one kernel (the mean of squares, then
    /// the result, the row read twice, the second time from cache); other
    /// arrays in two dispatches (the mean of squares in one reduction, the
    /// rest fused). Shapes, dtypes and `eps` as [`Array::layer_norm`].
    ///
    /// # Errors
    /// As [`Array::layer_norm`], naming `rms_norm`.
    #[track_caller]
    pub fn rms_norm(&self, weight: Option<&Array>, eps: impl Scalar) -> Result<Array> {
        self.check_norm("rms_norm", &[weight])?;
        let eps32 = eps.value().to_f64() as f32;
        if let Some(y) = self.one_pass(NormKind::RmsNorm, None, &[weight], eps32)? {
            return Ok(y);
        }
        let x = &self.widen()?;
        let ms = self
            .reduce(
                "rms_norm",
                crate::graph::primitive::ReduceOp::MeanSquare,
                Axes::from(-1isize),
                true,
                0,
            )?
            .remove(0);
        let mut y = (x * &(&ms + eps)?.rsqrt()?)?;
        if let Some(w) = weight {
            y = (&y * &w.astype(DType::F32)?)?;
        }
        self.narrow_like(y)
    }

    /// `kind` over the last axis in one kernel (`Primitive::Normalize`,
    /// with the present `params` cast to f32 and broadcast to the row), or
    /// `None` where that kernel does not apply and the op composes a
    /// reduction and an elementwise kernel instead: `axes` (the softmaxes';
    /// `None` for the norms) other than the last axis alone (a leading
    /// axis is strided in memory: the reduction's strided mode and the
    /// wide elementwise kernel read it better than one thread per column
    /// walking it twice), an empty array, a dtype other than f32, f16 and
    /// bf16 (f64 and integers keep their own accumulators), rows longer
    /// than [`MAX_ONE_PASS_ROW`] (see there), fewer than
    /// [`MIN_ONE_PASS_ROWS`] rows longer than [`SHORT_ONE_PASS_ROW`], or
    /// rows of one element. (With few long rows
    /// the reduction cuts each row into parts across workgroups, where
    /// the one-pass kernel gives a row one workgroup: measured 6 to 15
    /// times slower on f32[16, 65536] on lavapipe and llvmpipe; a row of
    /// one element has nothing to reuse from cache.)
    #[track_caller]
    fn one_pass(
        &self,
        kind: NormKind,
        axes: Option<&Axes>,
        params: &[Option<&Array>],
        eps: f32,
    ) -> Result<Option<Array>> {
        let n = self.ndim();
        if let Some(axes) = axes
            && axes.resolve(kind.name(), n)? != [n.wrapping_sub(1)]
        {
            return Ok(None);
        }
        if n == 0
            || self.size() == 0
            || !matches!(self.dtype(), DType::F32 | DType::F16 | DType::BF16)
            || self.shape()[n - 1] > MAX_ONE_PASS_ROW
            || self.shape()[n - 1] < 2
            || (self.size() / self.shape()[n - 1] < MIN_ONE_PASS_ROWS
                && self.shape()[n - 1] > SHORT_ONE_PASS_ROW)
        {
            return Ok(None);
        }
        let cols = self.shape()[n - 1];
        self.device()
            .check_array(kind.name(), self.shape(), DType::F32)?;
        let mut inputs = vec![self.clone()];
        for p in params.iter().flatten() {
            inputs.push(p.astype(DType::F32)?.broadcast_to(&[cols])?);
        }
        let norm = Norm {
            kind,
            weight: params.first().is_some_and(Option::is_some),
            bias: params.get(1).is_some_and(Option::is_some),
            eps_bits: eps.to_bits(),
        };
        let y = Array::from_node1(
            self.device(),
            Primitive::Normalize(norm),
            inputs,
            self.shape().to_vec(),
            DType::F32,
        );
        Ok(Some(self.narrow_like(y)?))
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
