//! Scatters along an axis: [`Array::scatter_add`], [`Array::put_along_axis`].

use super::{check_word_dtype, same_device};
use crate::axis::Axis;
use crate::graph::Primitive;
use crate::ops::elementwise::where_;
use crate::shape::{broadcast_shapes, normalize_axis};
use crate::{Array, DType, Error, Result};

impl Array {
    /// This array with `updates` added at `indices` along `axis`, duplicate
    /// indices accumulating (PyTorch `scatter_add(dim, index, src)`, NumPy
    /// `add.at` along an axis, the adjoint of [`Array::take_along_axis`]):
    /// for every position `u` of the broadcast shape of `indices` and
    /// `updates`, `out[u with axis -> indices[u]] += updates[u]`.
    ///
    /// `indices` (i32 or u32) has this array's number of dimensions;
    /// `indices` and `updates` broadcast together to a shape no longer than
    /// this array on every other axis (PyTorch's rule: they cover a block
    /// from the array's start, and a length-1 axis of theirs is not
    /// stretched to the array's; NumPy's `add.at` with
    /// `take_along_axis`'s index grid is the same when that shape has the
    /// array's length on every other axis; [`Array::put_along_axis`]
    /// broadcasts against the array instead, as NumPy defines it). Leading
    /// length-1 axes of `updates` beyond the array's are dropped. A
    /// negative index counts from the end;
    /// out-of-range ones are clamped (as [`Array::take`]). The result has
    /// this array's shape and dtype (f32, f16, bf16, i32 or u32; the
    /// atomics are 32-bit, so i8, u8, i16, u16 and f64 are refused: cast
    /// with `astype`); `updates` are cast to it. Views are read in place.
    ///
    /// # Numerics and kernel
    ///
    /// wgsl/scatter.wgsl: one dispatch zeroes an accumulator, one adds each
    /// update atomically (i32 and u32 with `atomicAdd`, wrapping; floats in
    /// f32 with a compare-exchange loop), and a fused elementwise dispatch
    /// adds this array (f16 and bf16: in f32, rounded once). The order of
    /// float additions is not fixed: sums agree with a sequential sum to f32
    /// rounding, not bit for bit, and may differ between runs.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[0.0f32; 3], &[3], &device)?;
    /// let i = Array::from_slice(&[0i32, 2, 0, -1], &[4], &device)?;
    /// let u = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &device)?;
    /// assert_eq!(x.scatter_add(&i, &u, 0)?.to_vec::<f32>()?, vec![4.0, 0.0, 6.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// Each naming the op, in the house order: [`Error::DeviceMismatch`];
    /// [`Error::InvalidAxis`]; [`Error::InvalidArgument`] when `indices`
    /// has another number of dimensions or indexes an empty axis;
    /// [`Error::ShapeMismatch`] when `indices` and `updates` do not
    /// broadcast or exceed this array on another axis; then
    /// [`Error::OpDType`] for an i8, u8, i16, u16 or f64 array;
    /// [`Error::DType`] for non-integer indices or a bool array.
    #[track_caller]
    pub fn scatter_add(
        &self,
        indices: &Array,
        updates: &Array,
        axis: impl Into<Axis>,
    ) -> Result<Array> {
        self.add_along("scatter_add", indices, updates, axis.into().get())
    }

    /// [`Array::scatter_add`], its errors naming `op`.
    #[track_caller]
    pub(super) fn add_along(
        &self,
        op: &'static str,
        indices: &Array,
        updates: &Array,
        axis: isize,
    ) -> Result<Array> {
        let (sums, acc) = self.scatter(op, indices, updates, axis, true)?;
        self.astype(acc)?.add(&sums)?.astype(self.dtype())
    }

    /// This array with `values` written at `indices` along `axis` (NumPy
    /// `put_along_axis(arr, indices, values, axis)` as a function, MLX
    /// `put_along_axis`).
    ///
    /// NumPy's definition (`arr[_make_along_axis_idx(arr.shape, indices,
    /// axis)] = values`): `indices` (i32 or u32, this array's number of
    /// dimensions) and `values` broadcast together, and then against this
    /// array on every axis but `axis`, as [`Array::take_along_axis`]'s
    /// indices do; for every position `u` of that shape, `out[u with axis
    /// -> indices[u]] = values[u]`. So indices of shape `[1, 1, 4, 1]` on
    /// an array `[1, 1, 8, 32]` along axis -2 write all 32 columns of four
    /// rows (MLX's `test_put_along_axis`). Where this array has length 1 on
    /// an axis and they are longer, they all write the one element there.
    /// Where indices repeat, one of the values wins (which one is not
    /// fixed, as in NumPy). Leading length-1 axes of `values` beyond the
    /// array's are dropped. Negative and out-of-range indices and dtypes
    /// (bool too) as [`Array::scatter_add`]; `values` are cast to this
    /// array's dtype.
    ///
    /// Two scatters of two dispatches each (the values, and a mark of the
    /// written places) and a fused `where`.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3], &device)?;
    /// let i = Array::from_slice(&[2i32, 0], &[2, 1], &device)?;
    /// let v = Array::from_slice(&[-1i32], &[1, 1], &device)?;
    /// let y = x.put_along_axis(&i, &v, 1)?;
    /// assert_eq!(y.to_vec::<i32>()?, vec![1, 2, -1, -1, 5, 6]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Array::scatter_add`], bool arrays allowed, except that
    /// [`Error::ShapeMismatch`] is for `indices` and `values` that do not
    /// broadcast together or, on an axis other than `axis`, against this
    /// array.
    #[track_caller]
    pub fn put_along_axis(
        &self,
        indices: &Array,
        values: &Array,
        axis: impl Into<Axis>,
    ) -> Result<Array> {
        self.store_along("put_along_axis", indices, values, axis.into().get())
    }

    /// [`Array::put_along_axis`], its errors naming `op`.
    #[track_caller]
    pub(super) fn store_along(
        &self,
        op: &'static str,
        indices: &Array,
        values: &Array,
        axis: isize,
    ) -> Result<Array> {
        let (stored, _) = self.scatter(op, indices, values, axis, false)?;
        // The mark covers every written place: the broadcast shape of the
        // indices and the values (then against this array), not the
        // indices' alone.
        let one = Array::scalar(1u32, DType::U32, self.device())?
            .broadcast_to(&broadcast_shapes(op, indices.shape(), values.shape())?)?;
        let (written, _) = Array::zeros(self.shape(), DType::U32, self.device())?
            .scatter(op, indices, &one, axis, false)?;
        where_(&written, &stored.astype(self.dtype())?, self)
    }

    /// Check a scatter's arguments and record its node: `updates` cast to
    /// the accumulator dtype (f32 for floats, u32 for bool, else this
    /// array's) added or stored into zeros of this array's shape.
    #[track_caller]
    fn scatter(
        &self,
        op: &'static str,
        indices: &Array,
        updates: &Array,
        axis: isize,
        add: bool,
    ) -> Result<(Array, DType)> {
        same_device(op, self, indices)?;
        same_device(op, self, updates)?;
        let axis = normalize_axis(op, axis, self.ndim())?;
        let nd = self.ndim();
        if indices.ndim() != nd {
            return Err(Error::InvalidArgument(format!(
                "{op}: indices must have {nd} dimension(s) like the array, they have {}",
                indices.ndim()
            )));
        }
        // Leading length-1 axes of the updates beyond the array's are
        // dropped (NumPy's assignment and MLX's `scatter_axis` do).
        let extra = updates.ndim().saturating_sub(nd);
        let squeezed;
        let updates = if extra > 0 && updates.shape()[..extra].iter().all(|&d| d == 1) {
            squeezed = updates.reshape(&updates.shape()[extra..])?;
            &squeezed
        } else {
            updates
        };
        let mut shape = broadcast_shapes(op, indices.shape(), updates.shape())?;
        let mismatch = |rhs: Vec<usize>| Error::ShapeMismatch {
            op,
            lhs: self.shape().to_vec(),
            rhs,
        };
        if shape.len() != nd {
            return Err(mismatch(shape));
        }
        // put_along_axis (NumPy's definition, `arr[_make_along_axis_idx(arr.
        // shape, indices, axis)] = values`): the indices and values broadcast
        // against the array on every axis but `axis`, as in take_along_axis.
        // Where the array's axis has length 1 and theirs is longer, each of
        // their lines writes that one line of the array: those axes are
        // folded into `axis` below. scatter_add keeps PyTorch's rule: they
        // cover a block of the array from its start (no longer than it on
        // any other axis).
        let mut folded = Vec::new();
        for d in (0..nd).filter(|&d| d != axis) {
            let (u, a) = (shape[d], self.shape()[d]);
            match (add, u, a) {
                (_, u, a) if u == a => {}
                (true, u, a) if u <= a => {}
                (false, 1, a) => shape[d] = a,
                (false, _, 1) => folded.push(d),
                _ => return Err(mismatch(shape)),
            }
        }
        let n: usize = shape.iter().product();
        if self.shape()[axis] == 0 && n > 0 {
            return Err(Error::InvalidArgument(format!(
                "{op}: indices into an empty axis {axis}"
            )));
        }
        check_word_dtype(op, self.dtype())?;
        for (dtype, bad) in [
            (
                indices.dtype(),
                !matches!(indices.dtype(), DType::I32 | DType::U32),
            ),
            (self.dtype(), add && self.dtype() == DType::Bool),
        ] {
            if bad {
                return Err(Error::DType {
                    op,
                    dtype,
                    other: None,
                });
            }
        }
        let acc = match self.dtype() {
            d if d.is_float() => DType::F32,
            DType::Bool => DType::U32,
            d => d,
        };
        // Each folded axis moves next to `axis` and merges into it: the
        // scatter reads the index along `axis` only, so the lines of a
        // folded axis become more entries of `axis` at coordinate 0.
        let fold = |a: Array| -> Result<Array> {
            if folded.is_empty() {
                return Ok(a);
            }
            let mut order: Vec<isize> = Vec::with_capacity(nd);
            for d in (0..nd).filter(|d| !folded.contains(d)) {
                if d == axis {
                    order.extend(folded.iter().map(|&f| f as isize));
                }
                order.push(d as isize);
            }
            let mut merged = shape.clone();
            for &f in &folded {
                merged[axis] *= shape[f];
                merged[f] = 1;
            }
            a.permute(&order)?.reshape(&merged)
        };
        let idx = fold(indices.broadcast_to(&shape)?)?;
        // A bool target takes "is non-zero" of the values (as astype and
        // NumPy do), not their truncation to an integer: 0.5 is true.
        let upd = fold(
            if self.dtype() == DType::Bool {
                updates.astype(DType::Bool)?.astype(acc)?
            } else {
                updates.astype(acc)?
            }
            .broadcast_to(&shape)?,
        )?;
        let out = Array::from_node(
            self.device(),
            Primitive::Scatter { axis, add },
            vec![idx, upd],
            vec![(self.shape().to_vec(), acc)],
        )
        .pop()
        .expect("one output");
        Ok((out, acc))
    }
}
