//! Sorting along an axis: [`Array::sort`], [`Array::argsort`],
//! [`Array::partition`], [`Array::argpartition`].
//!
//! # Order
//!
//! Ascending and stable (equal values keep their order, as NumPy's
//! `kind="stable"`), with NumPy's float order: -0 and +0 equal, NaN after
//! +inf (all NaNs alike). Integers and bool compare as integers. Values
//! come back bit for bit (NaN payloads, the sign of zero). Indices are u32,
//! as MLX's.
//!
//! # Dtypes
//!
//! Every dtype but f64, which is [`crate::Error::OpDType`] (cast with
//! `astype`): the order keys are 32-bit. The packed i8, u8, i16 and u16
//! are read from their words and written with `atomicAnd`/`atomicOr` on
//! the shared word (kernels/bits.rs, also top-k's), so neighbours written
//! by other threads never race.
//!
//! # Kernel
//!
//! wgsl/sort.wgsl, a bitonic sorting network (Batcher 1968) on (key, index)
//! pairs, rows padded to a power of two: rows of up to 1024 elements sort in
//! one dispatch (several rows per workgroup when short), longer rows of
//! padded length `P = 2^p` take `1 + sum over s in 11..=p of (s - 9)`
//! dispatches (66 for a row of 2^20), and a work buffer of 8 bytes per
//! padded element that returns to the pool when the node is done. The
//! input is read through its strides (views are not copied); values and
//! indices are written by the same dispatches, as one node with two
//! outputs (either can be dropped, as for [`Array::topk`]).
//!
//! `partition` and `argpartition` sort the whole row: the result meets
//! NumPy's contract (the kth element in its sorted place, none larger
//! before it, none smaller after it) and is in fact sorted, which NumPy
//! does not promise, so code written for NumPy runs unchanged.

use crate::axis::Axes;
use crate::error::Limit;
use crate::graph::Primitive;
use crate::graph::primitive::{sort_padded, sort_work_pairs};
use crate::ops::check_32bit_dtype;
use crate::shape::rows_along;
use crate::{Array, Error, Result};

impl Array {
    /// Record a sort node for op `op`: (values, indices) along `axis`, the
    /// flattened array for `None`. Checks what the eval will need: padded
    /// rows of at most 2^31 elements in all (the kernels index pairs with
    /// 32-bit words) and a work buffer within the largest storage binding.
    #[track_caller]
    fn sort_node(&self, op: &'static str, axis: Axes) -> Result<(Array, Array)> {
        let (x, axis) = match axis.one(op, self.ndim())? {
            None => (self.ravel(), 0),
            Some(a) => (self.clone(), a),
        };
        check_32bit_dtype(op, x.dtype())?;
        let shape = x.shape().to_vec();
        let (_, rows) = rows_along(&shape, axis);
        let total = rows.saturating_mul(sort_padded(shape[axis])) as u64;
        if total > 1 << 31 {
            return Err(Error::TooLarge {
                op,
                limit: Limit::KernelIndex,
                value: total,
                max: 1 << 31,
            });
        }
        let work = sort_work_pairs(rows, shape[axis]) as u64;
        self.device().check_binding(op, work.saturating_mul(8))?;
        Ok(super::topk::values_and_indices(
            &x,
            Primitive::Sort { axis },
            shape,
        ))
    }

    /// The elements sorted ascending along `axis` (negative counts from the
    /// end; `None` sorts the flattened array), stable, NaN last (NumPy
    /// `sort(a, axis, kind="stable")`, MLX `sort`). Same shape (flattened
    /// for `None`) and dtype; every dtype but f64. See the module docs for the order
    /// and the kernel.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[3.0f32, f32::NAN, -1.0, 2.0], &[4], &device)?;
    /// let s = x.sort(-1)?.to_vec::<f32>()?;
    /// assert_eq!(&s[..3], &[-1.0, 2.0, 3.0]);
    /// assert!(s[3].is_nan());
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidAxis`] (a 0-dimensional array has no axis to sort);
    /// [`Error::InvalidArgument`] for a list of several axes;
    /// [`Error::OpDType`] for f64 (see the module docs); [`Error::TooLarge`]
    /// naming the op: [`Limit::StorageBinding`] when
    /// the work buffer (8 bytes per element, rows padded to a power of two,
    /// for rows longer than 1024) exceeds the adapter's largest storage
    /// binding, [`Limit::KernelIndex`] past 2^31 padded elements.
    #[track_caller]
    pub fn sort(&self, axis: impl Into<Axes>) -> Result<Array> {
        Ok(self.sort_node("sort", axis.into())?.0)
    }

    /// The indices (u32) that sort this array along `axis`, as
    /// [`Array::sort`] (NumPy `argsort(a, axis, kind="stable")`, MLX
    /// `argsort`): equal elements keep their order. Use
    /// [`Array::take_along_axis`] to apply them.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[2i32, 1, 2, 0], &[4], &device)?;
    /// assert_eq!(x.argsort(0)?.to_vec::<u32>()?, vec![3, 1, 0, 2]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Array::sort`].
    #[track_caller]
    pub fn argsort(&self, axis: impl Into<Axes>) -> Result<Array> {
        Ok(self.sort_node("argsort", axis.into())?.1)
    }

    /// The elements rearranged along `axis` so that the one at position
    /// `kth` (negative counts from the end) is where a sort puts it, none
    /// after it smaller and none before it larger (NumPy `partition(a, kth,
    /// axis)`, MLX `partition`). Computed as a full stable sort (see the
    /// module docs), so the result is sorted.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] when `kth` is
    /// outside `-len..len` for the axis length `len`; [`Error::OpDType`] and
    /// [`Error::TooLarge`] as [`Array::sort`]; each naming `partition`.
    #[track_caller]
    pub fn partition(&self, kth: isize, axis: impl Into<Axes>) -> Result<Array> {
        let axis = axis.into();
        self.check_kth("partition", kth, &axis)?;
        Ok(self.sort_node("partition", axis)?.0)
    }

    /// The indices (u32) that partition this array along `axis` around
    /// position `kth`, as [`Array::partition`] (NumPy `argpartition`, MLX
    /// `argpartition`).
    ///
    /// # Errors
    /// As [`Array::partition`].
    #[track_caller]
    pub fn argpartition(&self, kth: isize, axis: impl Into<Axes>) -> Result<Array> {
        let axis = axis.into();
        self.check_kth("argpartition", kth, &axis)?;
        Ok(self.sort_node("argpartition", axis)?.1)
    }

    fn check_kth(&self, op: &'static str, kth: isize, axis: &Axes) -> Result<()> {
        let len = match axis.one(op, self.ndim())? {
            None => self.size(),
            Some(a) => self.shape()[a],
        } as isize;
        if kth < -len || kth >= len {
            return Err(Error::InvalidArgument(format!(
                "{op}: kth = {kth} is out of range for an axis of length {len}"
            )));
        }
        Ok(())
    }
}
