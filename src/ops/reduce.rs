//! Reductions over any set of axes, with `keepdims`: sum, prod, max, min,
//! mean, var, std, logsumexp, argmax, argmin, all, any.
//!
//! One dispatch each (see wgsl/reduce.wgsl): a workgroup per output with a
//! shared-memory tree when more than 256 elements are reduced, a thread per
//! output otherwise. Float input accumulates in f32 (f16 and bf16 too, then
//! the result is rounded back to the input dtype; f64 in f64), integers in
//! 32 bits of their signedness: sums and products of int8, int16 and int32
//! give int32, of the unsigned ones uint32 (NumPy widens them to int64,
//! which WGSL lacks: a 32-bit sum wraps on overflow), max and min give the
//! input's dtype. logsumexp takes no f64 (no 64-bit `exp`).

use crate::graph::Primitive;
use crate::graph::primitive::ReduceOp;
use crate::{Array, DType, Result};

pub use crate::axis::Axes;

/// `ddof` as the kernel's parameter word. No axis holds `u32::MAX`
/// elements (arrays are at most the largest storage binding), so a larger
/// `ddof` gives the same result as `u32::MAX`: `count - ddof <= 0`, the
/// variance is infinite or NaN, as NumPy's.
fn ddof_word(ddof: usize) -> u32 {
    u32::try_from(ddof).unwrap_or(u32::MAX)
}

impl Array {
    /// Record a reduction node and shape its outputs (dtype, keepdims);
    /// errors name `name`, the public op.
    #[track_caller]
    pub(crate) fn reduce(
        &self,
        name: &'static str,
        op: ReduceOp,
        axes: Axes,
        keepdims: bool,
        ddof: u32,
    ) -> Result<Vec<Array>> {
        let axes = axes.resolve(name, self.ndim())?;
        if !op.takes(self.dtype()) {
            return Err(crate::Error::OpDType {
                op: name,
                dtype: self.dtype(),
                takes: "every dtype but float64 (no 64-bit exp and log on the GPU; cast with astype)",
            });
        }
        if op.without_identity().is_some() && axes.iter().any(|&a| self.shape()[a] == 0) {
            return Err(crate::Error::EmptyReduction {
                op: name,
                shape: self.shape().to_vec(),
                axes,
            });
        }
        // The kernel's limit on the elements folded into one output,
        // checked at the call so that the error names the caller's op.
        let reduced: usize = axes.iter().map(|&a| self.shape()[a]).product();
        if self.size() > 0 && reduced > crate::graph::primitive::MAX_REDUCED {
            return Err(crate::Error::TooLarge {
                op: name,
                limit: crate::Limit::ReducedElements,
                value: reduced as u64,
                max: crate::graph::primitive::MAX_REDUCED as u64,
            });
        }
        let input = match (op, self.dtype()) {
            (ReduceOp::Sum | ReduceOp::Prod, DType::Bool) => self.astype(DType::I32)?,
            _ => self.clone(),
        };
        let kept: Vec<usize> = (0..self.ndim())
            .filter(|a| !axes.contains(a))
            .map(|a| self.shape()[a])
            .collect();
        for d in op.out_dtypes(input.dtype()) {
            self.device().check_array(name, &kept, d)?;
        }
        let outs = Array::from_node(
            self.device(),
            Primitive::Reduce {
                op,
                axes: axes.clone(),
                ddof,
            },
            vec![input.clone()],
            op.out_dtypes(input.dtype())
                .into_iter()
                .map(|d| (kept.clone(), d))
                .collect(),
        );
        let keep_shape: Vec<usize> = (0..self.ndim())
            .map(|a| {
                if axes.contains(&a) {
                    1
                } else {
                    self.shape()[a]
                }
            })
            .collect();
        // A loop, not a closure: the casts and reshapes record the caller's
        // location.
        let mut shaped = Vec::with_capacity(outs.len());
        for o in outs {
            // f16/bf16 accumulate in f32: round the result back; max and
            // min of 8- and 16-bit integers go back to their dtype.
            let back = (o.dtype() == DType::F32
                && matches!(self.dtype(), DType::F16 | DType::BF16))
                || (matches!(op, ReduceOp::Max | ReduceOp::Min) && self.dtype().is_integer());
            let o = if back { o.astype(self.dtype())? } else { o };
            shaped.push(if keepdims {
                o.reshape_to(&keep_shape)
            } else {
                o
            });
        }
        Ok(shaped)
    }

    #[track_caller]
    fn reduce1(
        &self,
        name: &'static str,
        op: ReduceOp,
        axes: Axes,
        keepdims: bool,
    ) -> Result<Array> {
        Ok(self.reduce(name, op, axes, keepdims, 0)?.remove(0))
    }
}

macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Array {
            $(
                $(#[$doc])*
                ///
                /// `axes`: `None` (every axis), an axis, or a list (negative
                /// counts from the end; see [`crate::axis`]). `keepdims`
                /// keeps reduced axes with length 1.
                ///
                /// # Errors
                /// [`crate::Error::InvalidAxis`]; for max and min,
                /// [`crate::Error::EmptyReduction`] when a reduced axis has
                /// length 0; [`crate::Error::TooLarge`]
                /// ([`crate::Limit::ReducedElements`]) when more than 2^26
                /// elements fold into one output (a broadcast view).
                #[track_caller]
                pub fn $name(&self, axes: impl Into<Axes>, keepdims: bool) -> Result<Array> {
                    self.reduce1(stringify!($name), $op, axes.into(), keepdims)
                }
            )*
        }
    };
}

reductions! {
    /// Sum (NumPy `sum`); bool sums to i32. A tree: exact for 10^7 ones.
    sum => ReduceOp::Sum;
    /// Product (NumPy `prod`); bool multiplies as i32.
    prod => ReduceOp::Prod;
    /// Maximum (NumPy `max`/`amax`); NaN propagates. Over an empty axis:
    /// an error (no identity), as NumPy, PyTorch and MLX.
    max => ReduceOp::Max;
    /// Minimum (NumPy `min`/`amin`); NaN propagates. Over an empty axis:
    /// an error, as `max`.
    min => ReduceOp::Min;
    /// Arithmetic mean, f32 for integer input (NumPy `mean`).
    mean => ReduceOp::Mean;
    /// `log(sum(exp(x)))` without overflow: a running maximum in one pass (MLX `logsumexp`).
    logsumexp => ReduceOp::LogSumExp;
    /// Whether every element is non-zero, as bool (NumPy `all`).
    all => ReduceOp::All;
    /// Whether any element is non-zero, as bool (NumPy `any`).
    any => ReduceOp::Any;
}

impl Array {
    /// Variance, dividing by `count - ddof` (NumPy `var`), in one pass
    /// (Welford, combined pairwise as Chan, Golub & LeVeque 1979).
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`]; [`crate::Error::TooLarge`]
    /// ([`crate::Limit::ReducedElements`]) when more than 2^26 elements
    /// fold into one output (a broadcast view).
    #[track_caller]
    pub fn var(&self, axes: impl Into<Axes>, keepdims: bool, ddof: usize) -> Result<Array> {
        Ok(self
            .reduce(
                "var",
                ReduceOp::Moments,
                axes.into(),
                keepdims,
                ddof_word(ddof),
            )?
            .remove(1))
    }

    /// Standard deviation: `sqrt(var)` (NumPy `std`).
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`]; [`crate::Error::TooLarge`]
    /// ([`crate::Limit::ReducedElements`]) when more than 2^26 elements
    /// fold into one output (a broadcast view).
    #[track_caller]
    pub fn std(&self, axes: impl Into<Axes>, keepdims: bool, ddof: usize) -> Result<Array> {
        self.reduce(
            "std",
            ReduceOp::Moments,
            axes.into(),
            keepdims,
            ddof_word(ddof),
        )?
        .remove(1)
        .sqrt()
    }

    /// Index of the first maximum along `axis`, or of the flattened array for
    /// `None` (NumPy `argmax`), as u32. NaN counts as the maximum.
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`]; [`crate::Error::InvalidArgument`] for
    /// a list of several axes; [`crate::Error::EmptyReduction`] when
    /// the axis (or, for `None`, the array) is empty;
    /// [`crate::Error::TooLarge`] ([`crate::Limit::ReducedElements`]) past
    /// 2^26 elements per output.
    #[track_caller]
    pub fn argmax(&self, axis: impl Into<Axes>, keepdims: bool) -> Result<Array> {
        self.arg(ReduceOp::ArgMax, axis.into(), keepdims)
    }

    /// Index of the first minimum (NumPy `argmin`), as u32; see [`Array::argmax`].
    ///
    /// # Errors
    /// As [`Array::argmax`].
    #[track_caller]
    pub fn argmin(&self, axis: impl Into<Axes>, keepdims: bool) -> Result<Array> {
        self.arg(ReduceOp::ArgMin, axis.into(), keepdims)
    }

    #[track_caller]
    fn arg(&self, op: ReduceOp, axis: Axes, keepdims: bool) -> Result<Array> {
        let name = op.name();
        let axis = axis.one(name, self.ndim())?;
        let axes = match axis {
            Some(a) => vec![a],
            None => (0..self.ndim()).collect(),
        };
        if self.size() == 0 && (axis.is_none() || self.shape()[axes[0]] == 0) {
            // Named with the caller's shape (the flattened one would hide it).
            return Err(crate::Error::EmptyReduction {
                op: name,
                shape: self.shape().to_vec(),
                axes,
            });
        }
        match axis {
            Some(a) => self.reduce1(name, op, Axes::from(a), keepdims),
            None => {
                let flat = self.ravel().reduce1(name, op, Axes::All, false)?;
                if keepdims {
                    Ok(flat.reshape_to(&vec![1; self.ndim()]))
                } else {
                    Ok(flat)
                }
            }
        }
    }
}

impl Array {
    /// Mean and variance over `axes` in one pass and one dispatch (MLX
    /// `moments`): Welford's update per thread, Chan, Golub & LeVeque's
    /// pairwise combination across threads; the variance divides by
    /// `count - ddof`. f32 for integer input; f16/bf16 accumulate in f32 and
    /// round back.
    ///
    /// Both outputs share one node. Either can be dropped on its own, before
    /// or after eval: the kernel always writes both, so at eval a dropped
    /// output gets a scratch buffer that goes back to the pool as soon as
    /// the dispatch is encoded; the input's buffer goes when the node does.
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`]; [`crate::Error::TooLarge`]
    /// ([`crate::Limit::ReducedElements`]) when more than 2^26 elements
    /// fold into one output (a broadcast view).
    #[track_caller]
    pub fn moments(
        &self,
        axes: impl Into<Axes>,
        keepdims: bool,
        ddof: usize,
    ) -> Result<(Array, Array)> {
        let mut v = self.reduce(
            "moments",
            ReduceOp::Moments,
            axes.into(),
            keepdims,
            ddof_word(ddof),
        )?;
        let var = v.pop().expect("two outputs");
        let mean = v.pop().expect("two outputs");
        Ok((mean, var))
    }
}
