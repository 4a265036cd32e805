//! Functional writes: [`Array::slice_update`] (MLX), [`Array::slice_assign`]
//! (NumPy `a[slices] = v` as a function), [`Array::put`] (NumPy) and
//! [`Array::at`] (MLX `a.at[idx].set(v)` / `.add(v)`).
//!
//! Each returns a new array; the source keeps its values. A slice update
//! writes into the source's own buffer when nothing else holds it
//! (donation, see [`Array::slice_update`]), so a KV cache updated as
//! `cache = cache.slice_update(&row, &[t, 0], None)?` costs one
//! dispatch of the row's size per step and no new cache-sized buffer.

use super::same_device;
use crate::axis::{Axes, Axis};
use crate::graph::Primitive;
use crate::ops::shape::Slice;
use crate::shape::{broadcast_shapes, normalize_axis};
use crate::{Array, DType, Error, Result};

impl Array {
    /// This array with `update` written over the slice that starts at
    /// `start_indices` on `axes` (MLX
    /// `mlx.core.slice_update(a, update, start_indices, axes)`, the functional
    /// form of `a[i:i + n, ...] = update`; JAX `lax.dynamic_update_slice`).
    /// The slice has `update`'s shape: on axis `axes[k]` it covers
    /// `start_indices[k] .. start_indices[k] + update.shape[axes[k]]`, and
    /// on every other axis it starts at 0. `axes` is any axis list
    /// (negative counts from the end) or `None` (`start_indices`
    /// then gives every axis). For a slice of another shape, a step, or a
    /// broadcast update, see [`Array::slice_assign`].
    ///
    /// `update` has this array's number of dimensions and any dtype; it is
    /// cast to this array's dtype (as MLX does), which the result has, with
    /// this array's shape. Every dtype. Views are read in place.
    ///
    /// # In place (donation)
    ///
    /// At eval, when this array's buffer has no other holder (no live
    /// handle besides the node, no other node or compiled function reading
    /// it, no view sharing its buffer) and is dense, the result takes that
    /// buffer and only the slice is written: one dispatch of the update's
    /// size, no new memory. Otherwise the result is a copy (one more
    /// dispatch, and a buffer of this array's size), and any handle to this
    /// array keeps its old values. So write a cache as
    /// `cache = cache.slice_update(..)?` (the old handle goes at the
    /// assignment, before eval) to get the in-place path.
    ///
    /// ```
    /// # use wgarray::{Array, Axes, Device, DType};
    /// # let device = Device::new_default()?;
    /// let mut cache = Array::zeros(&[4, 3], DType::F32, &device)?;
    /// for t in 0..2 {
    ///     let row = Array::full(&[1, 3], t as f32 + 1.0, DType::F32, &device)?;
    ///     cache = cache.slice_update(&row, &[t, 0], None)?;
    ///     cache.eval()?; // written into the cache's own buffer
    /// }
    /// let y = cache.slice_update(&Array::full(&[1, 2], 9.0f32, DType::F32, &device)?, &[3, 1], None)?;
    /// assert_eq!(y.to_vec::<f32>()?[9..], [0.0, 9.0, 9.0]);
    /// // `cache` was still held: `y` is a copy and `cache` is unchanged.
    /// assert_eq!(cache.to_vec::<f32>()?[..6], [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// Each naming `slice_update`, in the house order:
    /// [`Error::DeviceMismatch`]; [`Error::InvalidAxis`] for an axis out of
    /// range; [`Error::InvalidArgument`] for a repeated axis, a number of
    /// `start_indices` other than the number of axes, an `update` of
    /// another number of dimensions, a negative start, or a slice that
    /// passes the end of its axis. A deliberate difference: NumPy's
    /// `a[-1:] = v` wraps a negative start and clips a slice to the array,
    /// and MLX's dynamic slices clamp at run time; here a start is a host
    /// number, and a write at another place than the one asked for would be
    /// silent ([`Array::slice_assign`] has NumPy's rules). Nothing is
    /// recorded on an error.
    #[track_caller]
    pub fn slice_update(
        &self,
        update: &Array,
        start_indices: &[isize],
        axes: impl Into<Axes>,
    ) -> Result<Array> {
        const OP: &str = "slice_update";
        same_device(OP, self, update)?;
        let nd = self.ndim();
        let axes: Vec<usize> = match axes.into() {
            Axes::All => (0..nd).collect(),
            Axes::These(a) => a
                .iter()
                .map(|&a| normalize_axis(OP, a, nd))
                .collect::<Result<_>>()?,
        };
        let bad = |why: String| Err(Error::InvalidArgument(format!("{OP}: {why}")));
        if let Some(i) = (1..axes.len()).find(|&i| axes[..i].contains(&axes[i])) {
            return bad(format!("`axes` repeat axis {}", axes[i]));
        }
        if start_indices.len() != axes.len() {
            return bad(format!(
                "{} `start_indices` for {} axes",
                start_indices.len(),
                axes.len()
            ));
        }
        if update.ndim() != nd {
            return bad(format!(
                "`update` has {} dimension(s), the array {nd}",
                update.ndim()
            ));
        }
        let mut starts = vec![0usize; nd];
        for (k, (&a, &s)) in axes.iter().zip(start_indices).enumerate() {
            if s < 0 {
                return bad(format!("`start_indices[{k}]` is {s}, negative"));
            }
            starts[a] = s as usize;
        }
        for (a, (&s, (&n, &len))) in starts
            .iter()
            .zip(update.shape().iter().zip(self.shape()))
            .enumerate()
        {
            if s.checked_add(n).is_none_or(|end| end > len) {
                return bad(format!(
                    "a slice of {n} at {s} passes the end of axis {a} (length {len}); \
                     `update` has shape {:?}, the array {:?}",
                    update.shape(),
                    self.shape()
                ));
            }
        }
        self.write_slice(starts, vec![1; nd], update.shape().to_vec(), update)
    }

    /// This array with `update` written over the slice of axis `axis` that
    /// starts at `start`, a position held in a device array: JAX
    /// `lax.dynamic_update_slice_in_dim(a, update, start, axis)`, MLX
    /// `slice_update(a, update, start, axes)` with an array `start`. The
    /// place is read when the kernel runs, so a function traced by
    /// [`crate::compile()`] writes where each call's `start` says (a KV
    /// cache written at the step's position), where [`Array::slice_update`]
    /// bakes its host numbers into the trace.
    ///
    /// `axis` is one [`Axis`] (any integer type; negative counts from the
    /// end). `update` has this array's number of dimensions; on every axis
    /// but `axis` its length is the array's, on `axis` at most the array's
    /// (`n`), and it is cast to this array's dtype. `start` is one i32 or
    /// u32 element (shape `[]` or `[1]`). As JAX clamps a dynamic start,
    /// the start is clamped at run time to `0 ..= len - n` so the write
    /// always stays inside the array; an i32 start below 0 first counts
    /// from the end of that range once, as [`Array::take`]'s indices do.
    /// The result has this array's shape and dtype; every element dtype.
    ///
    /// In place (donation) exactly as [`Array::slice_update`]: when, at
    /// eval, nothing but this op holds the array and it owns its buffer
    /// densely, one dispatch of the update's size writes into that buffer;
    /// else the array is copied first (two dispatches). Inside a compiled
    /// function the array is an input, held by the caller: pass it with
    /// [`crate::Compiled::call_donating`] to let the write happen in place.
    ///
    /// ```
    /// # use wgarray::{Array, Device, DType};
    /// # let device = Device::new_default()?;
    /// let mut cache = Array::zeros(&[4, 2], DType::F32, &device)?;
    /// for t in 0..3u32 {
    ///     let row = Array::full(&[1, 2], t as f64 + 1.0, DType::F32, &device)?;
    ///     let pos = Array::from_slice(&[t], &[1], &device)?;
    ///     cache = cache.slice_update_dynamic(&row, &pos, 0)?;
    /// }
    /// assert_eq!(cache.to_vec::<f32>()?, [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 0.0, 0.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// Each naming `slice_update_dynamic`: [`Error::DeviceMismatch`];
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] for an `update`
    /// of another number of dimensions, another length on an axis but
    /// `axis`, or a longer one on `axis`, or a `start` that is not one
    /// element; [`Error::OpDType`] for a `start` that is not i32 or u32,
    /// or a block format. Nothing is recorded on an error.
    #[track_caller]
    pub fn slice_update_dynamic(
        &self,
        update: &Array,
        start: &Array,
        axis: impl Into<Axis>,
    ) -> Result<Array> {
        const OP: &str = "slice_update_dynamic";
        same_device(OP, self, update)?;
        same_device(OP, self, start)?;
        let nd = self.ndim();
        let axis = axis.into().resolve(OP, nd)?;
        let bad = |why: String| Err(Error::InvalidArgument(format!("{OP}: {why}")));
        if update.ndim() != nd {
            return bad(format!(
                "`update` has {} dimension(s), the array {nd}",
                update.ndim()
            ));
        }
        for (a, (&n, &len)) in update.shape().iter().zip(self.shape()).enumerate() {
            if (a == axis && n > len) || (a != axis && n != len) {
                return bad(format!(
                    "`update` of shape {:?} does not fit the array of shape {:?} along axis \
                     {axis} (every other axis must be whole)",
                    update.shape(),
                    self.shape()
                ));
            }
        }
        if start.size() != 1 || start.ndim() > 1 {
            return bad(format!(
                "`start` must be one element (shape [] or [1]), got shape {:?}",
                start.shape()
            ));
        }
        if !matches!(start.dtype(), DType::I32 | DType::U32) {
            return Err(Error::OpDType {
                op: OP,
                dtype: start.dtype(),
                takes: "an int32 or uint32 start",
            });
        }
        super::refuse_blocks(OP, &[self, update])?;
        let update = update.astype(self.dtype())?;
        Ok(Array::from_node(
            self.device(),
            Primitive::SliceUpdate {
                starts: vec![0; nd],
                steps: vec![1; nd],
                dynamic: Some(axis),
            },
            vec![self.clone(), update, start.reshape(&[1])?],
            vec![(self.shape().to_vec(), self.dtype())],
        )
        .pop()
        .expect("one output"))
    }

    /// This array with `update` written over `self.slice(slices)`: NumPy's
    /// `a[slices] = update` as a function (candle `slice_assign`, MLX's
    /// `slice_update(src, update, start, stop, strides)`). One [`Slice`]
    /// per leading axis (the rest are whole), with NumPy's rules: negative
    /// bounds count from the end, out-of-range bounds clip, steps may be
    /// negative. `update` broadcasts to the slice's shape and is cast to
    /// this array's dtype; the result has this array's shape and dtype.
    /// Every dtype; an empty slice writes nothing. In place when this
    /// array's buffer is not shared, as [`Array::slice_update`] says.
    ///
    /// ```
    /// # use wgarray::{Array, Device, Slice};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[0i32; 8], &[2, 4], &device)?;
    /// // x[:, ::2] = [7, 8]  (the update broadcasts over the rows)
    /// let v = Array::from_slice(&[7i32, 8], &[2], &device)?;
    /// let y = x.slice_assign(&[Slice::FULL, Slice::step(2)], &v)?;
    /// assert_eq!(y.to_vec::<i32>()?, vec![7, 0, 8, 0, 7, 0, 8, 0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// Each naming `slice_assign`: [`Error::DeviceMismatch`];
    /// [`Error::InvalidArgument`] for more slices than axes or a step of 0;
    /// [`Error::ShapeMismatch`] when `update` does not broadcast to the
    /// slice's shape (leading length-1 axes beyond the slice's rank are
    /// dropped first, as NumPy's assignment does). Nothing is recorded on
    /// an error.
    #[track_caller]
    pub fn slice_assign(&self, slices: &[Slice], update: &Array) -> Result<Array> {
        const OP: &str = "slice_assign";
        same_device(OP, self, update)?;
        if slices.len() > self.ndim() {
            return Err(Error::InvalidArgument(format!(
                "{OP}: {} `slices` for an array of {} dimensions",
                slices.len(),
                self.ndim()
            )));
        }
        let (mut starts, mut steps, mut shape) = (Vec::new(), Vec::new(), Vec::new());
        for (a, &len) in self.shape().iter().enumerate() {
            let s = slices.get(a).copied().unwrap_or(Slice::FULL);
            let (start, count, step) = s.resolve(a, len).map_err(|e| match e {
                Error::InvalidArgument(m) => Error::InvalidArgument(format!("{OP}: {m}")),
                e => e,
            })?;
            starts.push(if count == 0 { 0 } else { start });
            steps.push(step);
            shape.push(count);
        }
        // Leading length-1 axes past the slice's rank are dropped, as
        // NumPy's assignment does (`a[0:3] = ones((1, 1, 3))`).
        let extra = update.ndim().saturating_sub(shape.len());
        let dropped;
        let update = if extra > 0 && update.shape()[..extra].iter().all(|&n| n == 1) {
            dropped = update.reshape(&update.shape()[extra..])?;
            &dropped
        } else {
            update
        };
        if broadcast_shapes(OP, update.shape(), &shape)? != shape {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: update.shape().to_vec(),
                rhs: shape,
            });
        }
        self.write_slice(starts, steps, shape, update)
    }

    /// Record a slice update (arguments checked): `update` cast and
    /// broadcast to `shape`, written at `starts` with `steps`.
    #[track_caller]
    fn write_slice(
        &self,
        starts: Vec<usize>,
        steps: Vec<isize>,
        shape: Vec<usize>,
        update: &Array,
    ) -> Result<Array> {
        super::refuse_blocks("slice_update", &[self, update])?;
        let update = update.astype(self.dtype())?.broadcast_to(&shape)?;
        Ok(Array::from_node(
            self.device(),
            Primitive::SliceUpdate {
                starts,
                steps,
                dynamic: None,
            },
            vec![self.clone(), update],
            vec![(self.shape().to_vec(), self.dtype())],
        )
        .pop()
        .expect("one output"))
    }

    /// This array with `values` written at the flat (row-major) positions
    /// `indices` (NumPy `np.put(a, ind, v)` as a function, MLX
    /// `a.flatten().at[ind].set(v)`): `out.flat[indices[i]] = values.flat[i
    /// % values.size()]`. As in NumPy, `values` repeat when shorter than
    /// `indices` and only their first `indices.size()` are used when
    /// longer; with no values nothing is written. Where indices repeat, one
    /// of the values wins (which one is not fixed).
    ///
    /// `indices` are i32 or u32 of any shape. A negative index counts from
    /// the end (`i + len`); an index still out of range is clamped to the
    /// nearest end (below 0 to the first element, past the end to the
    /// last). NumPy raises with `mode="raise"`; a kernel cannot, so this is
    /// NumPy's `mode="clip"` except that negative indices wrap once, as in
    /// [`Array::put_along_axis`]. The array is f32, f16, bf16, i32, u32 or
    /// bool (the scatter kernel's 32-bit words); `values` of any dtype are
    /// cast to it. A composition: [`Array::put_along_axis`] on the
    /// flattened array (two scatters of two dispatches and a fused `where`).
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let a = Array::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3], &device)?;
    /// let i = Array::from_slice(&[0i32, 2, -1], &[3], &device)?;
    /// let v = Array::from_slice(&[-7i32, -8], &[2], &device)?;
    /// assert_eq!(a.put(&i, &v)?.to_vec::<i32>()?, vec![-7, 1, -8, 3, 4, -7]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// Each naming `put`: [`Error::DeviceMismatch`]; [`Error::InvalidArgument`]
    /// for indices into an empty array; [`Error::OpDType`] for an i8, u8,
    /// i16, u16 or f64 array; [`Error::DType`] for non-integer indices.
    #[track_caller]
    pub fn put(&self, indices: &Array, values: &Array) -> Result<Array> {
        const OP: &str = "put";
        same_device(OP, self, indices)?;
        same_device(OP, self, values)?;
        let (n, m) = (indices.size(), values.size());
        let flat = self.reshape(&[self.size()])?;
        let mut idx = indices.reshape(&[n])?;
        let vals = values.reshape(&[m])?;
        let vals = if m == n || m == 1 {
            vals
        } else if m == 0 {
            // NumPy writes nothing.
            idx = idx.slice(&[Slice::range(0, 0)])?;
            vals
        } else {
            let cycle = Array::arange(0.0, n as f64, 1.0, DType::U32, self.device())?
                .remainder(m as u32)?;
            vals.take(&cycle, 0)?
        };
        flat.store_along(OP, &idx, &vals, 0)?.reshape(self.shape())
    }

    /// MLX's `a.at[indices]`: rows of this array (along axis 0) picked by
    /// integer `indices`, for a functional [`At::set`] or [`At::add`]. Nothing
    /// is checked or recorded until one of them is called.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let a = Array::from_slice(&[0.0f32; 6], &[3, 2], &device)?;
    /// let i = Array::from_slice(&[2i32, 0, 2], &[3], &device)?;
    /// let v = Array::from_slice(&[1.0f32, 10.0], &[2], &device)?;
    /// // Rows 2, 0, 2 += [1, 10]: duplicates accumulate.
    /// let y = a.at(&i).add(&v)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0, 10.0, 0.0, 0.0, 2.0, 20.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    pub fn at<'a>(&'a self, indices: &'a Array) -> At<'a> {
        At {
            array: self,
            indices,
        }
    }
}

/// MLX's `a.at[indices]` ([`Array::at`]): functional scatters of whole rows
/// along axis 0. For `indices` of shape `K` and an array of shape
/// `[n, rest..]`, `values` broadcast to `K + rest` and element `k` of
/// `indices` addresses row `indices[k]` (i32 or u32; negative counts from
/// the end (`i + n`), an index still out of range clamps to the nearest
/// end: below 0 to the first row, past the end to the last; a kernel
/// cannot raise).
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    array: &'a Array,
    indices: &'a Array,
}

impl At<'_> {
    /// MLX `a.at[indices].set(values)`: the rows replaced; where indices
    /// repeat, one of the values wins. Dtypes as [`Array::put_along_axis`]
    /// (f32, f16, bf16, i32, u32, bool); `values` are cast.
    ///
    /// # Errors
    /// Each naming `at.set`: [`Error::DeviceMismatch`];
    /// [`Error::InvalidArgument`] for a 0-d array or indices into an empty
    /// axis; [`Error::ShapeMismatch`] when `values` do not broadcast to
    /// `indices.shape + array.shape[1..]`; [`Error::OpDType`] for other
    /// array dtypes; [`Error::DType`] for non-integer indices.
    #[track_caller]
    pub fn set(&self, values: &Array) -> Result<Array> {
        let (idx, vals) = self.rows("at.set", values)?;
        self.array.store_along("at.set", &idx, &vals, 0)
    }

    /// MLX `a.at[indices].add(values)` (NumPy `np.add.at`): the values
    /// added to the rows, duplicates accumulating. Dtypes and numerics as
    /// [`Array::scatter_add`] (f32, f16, bf16, i32, u32).
    ///
    /// # Errors
    /// As [`At::set`], naming `at.add`; [`Error::DType`] for a bool array.
    #[track_caller]
    pub fn add(&self, values: &Array) -> Result<Array> {
        let (idx, vals) = self.rows("at.add", values)?;
        self.array.add_along("at.add", &idx, &vals, 0)
    }

    /// The indices as `[k, 1, ..]` and the values as `[k, rest..]`.
    #[track_caller]
    fn rows(&self, op: &'static str, values: &Array) -> Result<(Array, Array)> {
        let (a, indices) = (self.array, self.indices);
        same_device(op, a, indices)?;
        same_device(op, a, values)?;
        if a.ndim() == 0 {
            return Err(Error::InvalidArgument(format!(
                "{op}: a 0-d array has no rows to index"
            )));
        }
        let mut target = indices.shape().to_vec();
        target.extend_from_slice(&a.shape()[1..]);
        if broadcast_shapes(op, values.shape(), &target)? != target {
            return Err(Error::ShapeMismatch {
                op,
                lhs: values.shape().to_vec(),
                rhs: target,
            });
        }
        let k = indices.size();
        let mut rows = vec![k];
        rows.extend_from_slice(&a.shape()[1..]);
        let mut index_shape = vec![1; a.ndim()];
        index_shape[0] = k;
        Ok((
            indices.reshape(&index_shape)?,
            values.broadcast_to(&target)?.reshape(&rows)?,
        ))
    }
}
