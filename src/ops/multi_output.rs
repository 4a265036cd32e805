//! Multi-output primitives.
//!
//! The outputs of one call share one graph node; each output holds the node
//! strongly, the node holds its outputs only weakly, and no output refers to
//! a sibling. Dropping any subset of the outputs, in any order, before or
//! after eval, releases exactly what nobody else holds: the node (and with it
//! the input's buffer) goes when its last unevaluated output goes, and each
//! evaluated output's buffer goes with that output.

use crate::graph::Primitive;
use crate::kernels::elementwise::ElementwiseOp;
use crate::kernels::reduce::ReduceOp;
use crate::ops::elementwise::promote_types;
use crate::ops::reduce::Axes;
use crate::shape::broadcast_shapes;
use crate::shape::normalize_axis;
use crate::{Array, Error, Result};

/// How [`Array::split`] divides an axis, as NumPy's `indices_or_sections`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitSpec {
    /// This many equal parts; the axis length must divide evenly.
    Sections(usize),
    /// Cut before each of these indices (NumPy slicing: an index past the end
    /// or below its predecessor gives an empty part).
    Indices(Vec<usize>),
}

impl From<usize> for SplitSpec {
    fn from(n: usize) -> Self {
        SplitSpec::Sections(n)
    }
}

impl From<&[usize]> for SplitSpec {
    fn from(v: &[usize]) -> Self {
        SplitSpec::Indices(v.to_vec())
    }
}

impl From<Vec<usize>> for SplitSpec {
    fn from(v: Vec<usize>) -> Self {
        SplitSpec::Indices(v)
    }
}

impl<const N: usize> From<[usize; N]> for SplitSpec {
    fn from(v: [usize; N]) -> Self {
        SplitSpec::Indices(v.to_vec())
    }
}

impl Array {
    /// NumPy/MLX `split(x, indices_or_sections, axis)`: parts of `self` along
    /// `axis` (negative counts from the end), in order.
    ///
    /// One multi-output node; on eval each live output is one strided-copy
    /// dispatch (dead outputs cost nothing), all in the eval's one submission.
    /// Any dtype.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3], &device)?;
    /// let parts = x.split([1], -1)?;
    /// assert_eq!(parts[0].to_vec::<i32>()?, vec![0, 3]);
    /// assert_eq!(parts[1].to_vec::<i32>()?, vec![1, 2, 4, 5]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] for zero sections
    /// or sections that do not divide the axis.
    pub fn split(&self, spec: impl Into<SplitSpec>, axis: isize) -> Result<Vec<Array>> {
        let axis = normalize_axis(axis, self.ndim())?;
        let len = self.shape()[axis];
        let bounds: Vec<(usize, usize)> = match spec.into() {
            SplitSpec::Sections(0) => {
                return Err(Error::InvalidArgument("split into 0 sections".into()));
            }
            SplitSpec::Sections(n) if !len.is_multiple_of(n) => {
                return Err(Error::InvalidArgument(format!(
                    "an axis of length {len} does not split into {n} equal sections"
                )));
            }
            SplitSpec::Sections(n) => (0..n).map(|i| (i * len / n, (i + 1) * len / n)).collect(),
            SplitSpec::Indices(idx) => {
                let mut cuts = vec![0];
                cuts.extend(idx.iter().map(|&i| i.min(len)));
                cuts.push(len);
                cuts.windows(2).map(|w| (w[0], w[1].max(w[0]))).collect()
            }
        };
        let outputs = bounds
            .iter()
            .map(|&(s, e)| {
                let mut shape = self.shape().to_vec();
                shape[axis] = e - s;
                (shape, self.dtype())
            })
            .collect();
        let starts = bounds.iter().map(|b| b.0).collect();
        Ok(Array::from_node(
            self.device(),
            Primitive::Split { axis, starts },
            vec![self.clone()],
            outputs,
        ))
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
    /// [`Error::InvalidAxis`].
    pub fn moments(
        &self,
        axes: impl Into<Axes>,
        keepdims: bool,
        ddof: u32,
    ) -> Result<(Array, Array)> {
        let mut v = self.reduce(ReduceOp::Moments, axes.into(), keepdims, ddof)?;
        let var = v.pop().expect("two outputs");
        let mean = v.pop().expect("two outputs");
        Ok((mean, var))
    }
}

impl Array {
    /// Floored quotient and remainder (Python/NumPy `divmod`): `q =
    /// floor(a / b)`, `r = a - q * b` with the divisor's sign, broadcast
    /// together, in the promoted dtype; integer division by zero gives 0 and 0.
    ///
    /// One node and one dispatch write both outputs. Either can be dropped on
    /// its own, before or after eval: a dropped one gets a scratch buffer at
    /// eval that returns to the pool as soon as the dispatch is encoded.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`], [`Error::DeviceMismatch`].
    pub fn divmod(&self, other: &Array) -> Result<(Array, Array)> {
        super::same_device(self, other)?;
        let t = promote_types(self.dtype(), other.dtype());
        let shape = broadcast_shapes("divmod", self.shape(), other.shape())?;
        let (a, b) = (self.astype(t)?, other.astype(t)?);
        let mut v = Array::from_node(
            self.device(),
            Primitive::Elementwise(ElementwiseOp::DivMod),
            vec![a, b],
            vec![(shape.clone(), t), (shape, t)],
        );
        let r = v.pop().expect("two outputs");
        let q = v.pop().expect("two outputs");
        Ok((q, r))
    }
}
