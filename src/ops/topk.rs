//! Top-k along an axis: [`Array::topk`] and [`Array::max_with_index`].
//!
//! # Order
//!
//! Values rank in descending order; NaN ranks above +inf (all NaNs alike,
//! as NumPy's sorts put NaN last in ascending order), -0 and +0 rank equal,
//! and equal values go in ascending index order (a stable sort). Integers
//! and bool compare as integers.
//!
//! # Outputs and memory
//!
//! Values and indices share one node (no strong reference between them, the
//! node holds them only weakly) and one dispatch writes both. Either can be
//! dropped on its own, before or after eval. Before eval, the node (and
//! with it the input) lives while either output is unevaluated; at eval a
//! dropped output gets a scratch buffer, because the kernel writes both,
//! and it returns to the pool when the node is done; after eval each
//! output's buffer goes back the moment that output is dropped.

use crate::axis::Axis;
use crate::graph::Primitive;
use crate::graph::primitive::MAX_TOPK;
use crate::{Array, DType, Error, Result};

impl Array {
    /// The `k` largest elements along `axis` (negative counts from the end)
    /// and their indices: PyTorch `topk(k, dim, largest=True, sorted=True)`
    /// with a stable order (see the module docs for NaN and ties).
    ///
    /// `values` has this array's dtype, `indices` is u32; both have this
    /// array's shape with `axis` of length `k`. One node, one dispatch
    /// (wgsl/topk.wgsl): rows longer than 256 take a workgroup each, in
    /// which every thread keeps its best `k` of a strided share and `k`
    /// shared-memory tree rounds merge them; shorter rows take a thread each.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[3.0f32, 1.0, 4.0, 1.0, 5.0, 9.0], &[2, 3], &device)?;
    /// let (v, i) = x.topk(2, -1)?;
    /// assert_eq!(v.to_vec::<f32>()?, vec![4.0, 3.0, 9.0, 5.0]);
    /// assert_eq!(i.to_vec::<u32>()?, vec![2, 0, 2, 1]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidAxis`] (so a 0-dimensional array has no top-k);
    /// [`Error::InvalidArgument`] when `k` exceeds the axis length or 64 (the
    /// kernel keeps `k` candidates per thread in registers);
    /// [`Error::OpDType`] for f64 (the kernel ranks 32-bit keys).
    #[track_caller]
    pub fn topk(&self, k: usize, axis: impl Into<Axis>) -> Result<(Array, Array)> {
        let axis = axis.into().resolve("topk", self.ndim())?;
        let len = self.shape()[axis];
        if k > len || k > MAX_TOPK {
            return Err(Error::InvalidArgument(format!(
                "topk: `k` = {k} must be at most the axis length {len} and at most {MAX_TOPK}"
            )));
        }
        if self.dtype() == DType::F64 {
            return Err(Error::OpDType {
                op: "topk",
                dtype: DType::F64,
                takes: "every dtype but float64 (its keys are 64 bits; cast with astype)",
            });
        }
        let mut shape = self.shape().to_vec();
        shape[axis] = k;
        self.device().check_array("topk", &shape, self.dtype())?;
        Ok(values_and_indices(self, Primitive::TopK { axis, k }, shape))
    }

    /// The maximum along `axis` and the index of its first occurrence, in one
    /// dispatch: [`Array::topk`] with `k = 1`, the axis removed unless
    /// `keepdims`. NaN counts as the maximum, as in [`Array::argmax`].
    /// Values keep this array's dtype; indices are u32. The two outputs
    /// share a node as described in the module docs.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::EmptyReduction`] for an empty axis.
    #[track_caller]
    pub fn max_with_index(&self, axis: impl Into<Axis>, keepdims: bool) -> Result<(Array, Array)> {
        let a = axis.into().resolve("max_with_index", self.ndim())?;
        if self.shape()[a] == 0 {
            return Err(Error::EmptyReduction {
                op: "max_with_index",
                shape: self.shape().to_vec(),
                axes: vec![a],
            });
        }
        let (v, i) = self.topk(1, a)?;
        if keepdims {
            return Ok((v, i));
        }
        Ok((v.squeeze(a)?, i.squeeze(a)?))
    }
}

/// [`Array::topk`] as a free function: `(values, indices)` of the `k`
/// largest elements of `x` along `axis`.
///
/// # Errors
/// As [`Array::topk`].
#[track_caller]
pub fn topk(x: &Array, k: usize, axis: impl Into<Axis>) -> Result<(Array, Array)> {
    x.topk(k, axis)
}

/// The two outputs of `primitive` (top-k, sort) on `x`: values of `shape`
/// in `x`'s dtype and their u32 indices, one node (recording the caller's
/// location, as every op down to `Array::from_node`).
#[track_caller]
pub(super) fn values_and_indices(
    x: &Array,
    primitive: Primitive,
    shape: Vec<usize>,
) -> (Array, Array) {
    let mut v = Array::from_node(
        x.device(),
        primitive,
        vec![x.clone()],
        vec![(shape.clone(), x.dtype()), (shape, DType::U32)],
    );
    let indices = v.pop().expect("two outputs");
    let values = v.pop().expect("two outputs");
    (values, indices)
}
