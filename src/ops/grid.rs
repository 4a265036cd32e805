//! Ops built from element positions: [`Array::eye`], [`Array::linspace`],
//! [`Array::tril`], [`Array::triu`], [`Array::one_hot`],
//! [`Array::take_along_axis`], and [`Array::clip`].
//!
//! Each is a composition of existing primitives: short position vectors
//! (an [`Array::arange`] upload of one row or column, never of the whole
//! output) compared, combined and selected elementwise, so the fusion pass
//! turns the elementwise part into one generated kernel (one dispatch,
//! plus a `take` for `take_along_axis`). No new WGSL.

use super::same_device;
use crate::axis::Axes;
use crate::ops::elementwise::where_;
use crate::scalar::Operand;
use crate::scalar::sealed::Arg;
use crate::shape::{broadcast_shapes, check_shape, contiguous_strides};
use crate::transfer::device_bytes;
use crate::{Array, DType, Device, Error, Result};

/// `start, start + step, ...` (`n` values) of `dtype`, shaped to lie along
/// dimension `dim` of `ndim` (length 1 elsewhere); uploaded now, as
/// [`Array::arange`], with a binding error naming `op`.
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn positions(
    op: &'static str,
    n: usize,
    start: f64,
    step: f64,
    dtype: DType,
    dim: usize,
    ndim: usize,
    device: &Device,
) -> Result<Array> {
    device.check_binding(op, device_bytes(n, dtype))?;
    let v = if n == 0 {
        Array::zeros(&[0], dtype, device)?
    } else {
        Array::arange(
            start,
            start + n as f64 * step - step / 2.0,
            step,
            dtype,
            device,
        )?
    };
    let mut shape = vec![1; ndim];
    shape[dim] = n;
    Ok(v.reshape_to(&shape))
}

/// Row and column index grids of an `n x m` matrix as i32, the rows
/// shifted by `k` (clamped to the range where it still matters, so that
/// the shifted values fit i32): `rows + k` of shape `[n, 1]`, `cols` of
/// shape `[m]`.
#[track_caller]
fn diagonal_grids(
    op: &'static str,
    n: usize,
    m: usize,
    k: isize,
    device: &Device,
) -> Result<(Array, Array)> {
    let k = k.clamp(-(n as isize) - 1, m as isize + 1) as f64;
    let rows = positions(op, n, k, 1.0, DType::I32, 0, 2, device)?;
    let cols = positions(op, m, 0.0, 1.0, DType::I32, 0, 1, device)?;
    Ok((rows, cols))
}

impl Array {
    /// An `n x m` matrix (`m` defaults to `n`) of `dtype` with ones on
    /// diagonal `k` (0 the main one, positive above it, negative below) and
    /// zeros elsewhere (NumPy `eye(N, M, k, dtype)`, MLX `eye`).
    ///
    /// A composition: `cols == rows + k` on an `n`-row and an `m`-column
    /// index vector, cast to `dtype`; one fused dispatch on eval.
    ///
    /// ```
    /// # use wgarray::{Array, DType, Device};
    /// # let device = Device::new_default()?;
    /// let e = Array::eye(2, Some(3), 1, DType::I32, &device)?;
    /// assert_eq!(e.to_vec::<i32>()?, vec![0, 1, 0, 0, 0, 1]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::TooLarge`] naming `eye` past `usize` elements
    /// ([`crate::Limit::Elements`]) or when a side's index vector exceeds
    /// the adapter's largest storage binding.
    #[track_caller]
    pub fn eye(
        n: usize,
        m: Option<usize>,
        k: isize,
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        let m = m.unwrap_or(n);
        device.check_array("eye", &[n, m], dtype)?;
        let (rows, cols) = diagonal_grids("eye", n, m, k, device)?;
        cols.equal(&rows)?.astype(dtype)
    }

    /// `num` evenly spaced values from `start` to `stop`, both included
    /// (NumPy `linspace(start, stop, num, endpoint=True, dtype)`, MLX
    /// `linspace`): `start + i * (stop - start) / (num - 1)`, the last value
    /// exactly `stop`; `num = 1` gives `[start]`, `num = 0` an empty array.
    ///
    /// Computed in f32 (an index vector times the step plus the start, one
    /// fused dispatch), then cast to `dtype`: values agree with NumPy's f64
    /// ones to f32 rounding (a few ulp). Integer dtypes take the floor, as
    /// NumPy 2 does.
    ///
    /// ```
    /// # use wgarray::{Array, DType, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::linspace(0.0, 1.0, 5, DType::F32, &device)?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `linspace` when `start` or `stop`
    /// is not finite; [`Error::TooLarge`] naming `linspace` past the
    /// adapter's largest storage binding.
    #[track_caller]
    pub fn linspace(
        start: f64,
        stop: f64,
        num: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        if !start.is_finite() || !stop.is_finite() {
            return Err(Error::InvalidArgument(format!(
                "linspace: start ({start}) and stop ({stop}) must be finite"
            )));
        }
        check_shape("linspace", &[num])?;
        device.check_binding("linspace", device_bytes(num, dtype))?;
        let i = positions("linspace", num, 0.0, 1.0, DType::F32, 0, 1, device)?;
        let step = if num > 1 {
            (stop - start) / (num - 1) as f64
        } else {
            0.0
        };
        // Weak f64 scalars beside the f32 index vector: f32 parameters.
        let y = i.multiply(step)?.add(start)?;
        let y = if num > 1 {
            let last = i.equal((num - 1) as f64)?;
            where_(&last, stop, &y)?
        } else {
            y
        };
        let y = if dtype.is_float() || dtype == DType::Bool {
            y
        } else {
            y.floor()?
        };
        y.astype(dtype)
    }

    /// The lower triangle of the last two axes: elements on and below
    /// diagonal `k` (0 the main one, positive above it, negative below)
    /// kept, the rest zero (NumPy/MLX `tril(x, k)`). Shape and dtype
    /// unchanged; any dtype; views are read in place.
    ///
    /// A composition (`where(cols <= rows + k, x, 0)`): one fused dispatch.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for fewer than 2 dimensions.
    #[track_caller]
    pub fn tril(&self, k: isize) -> Result<Array> {
        self.triangle(k, "tril")
    }

    /// The upper triangle of the last two axes: elements on and above
    /// diagonal `k` kept, the rest zero (NumPy/MLX `triu(x, k)`), as
    /// [`Array::tril`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for fewer than 2 dimensions.
    #[track_caller]
    pub fn triu(&self, k: isize) -> Result<Array> {
        self.triangle(k, "triu")
    }

    #[track_caller]
    fn triangle(&self, k: isize, op: &'static str) -> Result<Array> {
        let nd = self.ndim();
        if nd < 2 {
            return Err(Error::InvalidArgument(format!(
                "{op}: x must have at least 2 dimensions, it has {nd}"
            )));
        }
        let (n, m) = (self.shape()[nd - 2], self.shape()[nd - 1]);
        let (rows, cols) = diagonal_grids(op, n, m, k, self.device())?;
        let keep = if op == "tril" {
            cols.less_equal(&rows)?
        } else {
            cols.greater_equal(&rows)?
        };
        // A bool scalar is weak beside every dtype: the result keeps x's.
        where_(&keep, self, false)
    }

    /// One-hot encoding of integer class indices: shape `indices.shape +
    /// [num_classes]`, 1 where the last coordinate equals the index and 0
    /// elsewhere, as `dtype` (JAX `nn.one_hot`, PyTorch `one_hot`; indices
    /// outside `[0, num_classes)`, negative ones included, give a row of
    /// zeros, as JAX does). `indices` are i32 or u32, any shape, views
    /// included.
    ///
    /// A composition (`indices[..., None] == arange(num_classes)`): one
    /// fused dispatch.
    ///
    /// # Errors
    /// [`Error::TooLarge`] naming `one_hot` for a result of more than
    /// [`crate::shape::MAX_DIMS`] dimensions or past `usize` elements, or a
    /// class vector past the largest storage binding; then
    /// [`Error::DType`] naming `one_hot` for non-integer indices.
    #[track_caller]
    pub fn one_hot(indices: &Array, num_classes: usize, dtype: DType) -> Result<Array> {
        let mut shape = indices.shape().to_vec();
        shape.push(num_classes);
        indices.device().check_array("one_hot", &shape, dtype)?;
        if !matches!(indices.dtype(), DType::I32 | DType::U32) {
            return Err(Error::DType {
                op: "one_hot",
                dtype: indices.dtype(),
                other: None,
            });
        }
        let classes = positions(
            "one_hot",
            num_classes,
            0.0,
            1.0,
            indices.dtype(),
            0,
            1,
            indices.device(),
        )?;
        indices.expand_dims(-1)?.equal(&classes)?.astype(dtype)
    }

    /// Elements of this array picked along `axis` by `indices` (NumPy/MLX
    /// `take_along_axis(a, indices, axis)`): `out[..., j, ...] =
    /// a[..., indices[..., j, ...], ...]`, the companion of
    /// [`Array::argsort`] and [`Array::topk`]'s indices. `indices` (i32 or
    /// u32) has this array's number of dimensions, and the two shapes
    /// broadcast except along `axis`; the result has the broadcast shape
    /// with `indices`' length along `axis`, and this array's dtype.
    /// [`Array::put_along_axis`] writes through the same broadcast.
    /// `axis = None` reads the flattened array with 1-D indices. A negative
    /// index counts from the end; out-of-range ones are clamped (NumPy
    /// `mode="clip"`, as [`Array::take`]: a kernel cannot raise).
    ///
    /// A composition: the flat source index (a fused elementwise program
    /// over per-axis position vectors) and one `take` of the flattened
    /// array.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[10i32, 30, 20, 5, 4, 6], &[2, 3], &device)?;
    /// let i = Array::from_slice(&[2i32, 0, -1, 1], &[2, 2], &device)?;
    /// assert_eq!(x.take_along_axis(&i, 1)?.to_vec::<i32>()?, vec![20, 10, 6, 4]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// Each naming `take_along_axis`, in the house order:
    /// [`Error::DeviceMismatch`]; [`Error::InvalidAxis`];
    /// [`Error::InvalidArgument`] for a list of several axes, when
    /// `indices` has another number of dimensions (not 1 for `axis = None`)
    /// or the axis is empty while `indices` is not; [`Error::ShapeMismatch`] when the other axes do not
    /// broadcast; then [`Error::DType`] for non-integer indices.
    #[track_caller]
    pub fn take_along_axis(&self, indices: &Array, axis: impl Into<Axes>) -> Result<Array> {
        const OP: &str = "take_along_axis";
        same_device(OP, self, indices)?;
        let (x, axis) = match axis.into().one(OP, self.ndim())? {
            None => (self.ravel(), 0),
            Some(a) => (self.clone(), a),
        };
        if indices.ndim() != x.ndim() {
            return Err(Error::InvalidArgument(format!(
                "{OP}: indices must have {} dimension(s) like the array, they have {}",
                x.ndim(),
                indices.ndim()
            )));
        }
        let len = x.shape()[axis];
        let mut along = x.shape().to_vec();
        along[axis] = indices.shape()[axis];
        let shape = broadcast_shapes(OP, &along, indices.shape())?;
        self.device().check_array(OP, &shape, self.dtype())?;
        if len == 0 && shape.iter().product::<usize>() > 0 {
            return Err(Error::InvalidArgument(format!(
                "{OP}: indices into an empty axis {axis}"
            )));
        }
        if !matches!(indices.dtype(), DType::I32 | DType::U32) {
            return Err(Error::DType {
                op: OP,
                dtype: indices.dtype(),
                other: None,
            });
        }
        if shape.iter().product::<usize>() == 0 {
            return Array::zeros(&shape, x.dtype(), x.device());
        }
        // The index along `axis`, wrapped and clamped into [0, len). The
        // array's length fits the kernels' 32-bit indices (it was checked
        // against the storage binding when it was made).
        let len = len as u32;
        let mut idx = indices.broadcast_to(&shape)?;
        if idx.dtype() == DType::I32 {
            let negative = idx.less(0)?;
            let wrapped = idx.add(len as i32)?;
            idx = where_(&negative, &wrapped, &idx)?
                .maximum(0)?
                .astype(DType::U32)?;
        }
        let idx = idx.minimum(len - 1)?;
        // Flat index into x's contiguous layout.
        let strides = contiguous_strides(x.shape());
        let nd = x.ndim();
        let mut flat = idx.multiply(strides[axis] as u32)?;
        for d in (0..nd).filter(|&d| d != axis && x.shape()[d] > 1) {
            let step = strides[d] as f64;
            let p = positions(OP, shape[d], 0.0, step, DType::U32, d, nd, x.device())?;
            flat = flat.add(&p)?;
        }
        x.ravel().take(&flat, 0)
    }

    /// Values limited to `[min, max]`: `minimum(maximum(x, min), max)`
    /// (NumPy `clip`, MLX `clip`, candle `clamp`). The bounds are arrays or
    /// scalars ([`Operand`]), as for [`Array::maximum`]: arrays broadcast,
    /// and scalars are weak (NEP 50, `src/scalar.rs`), so `i32_x.clip(0,
    /// 9)` stays i32 and `f16_x.clip(-1.0, 1.0)` stays f16, while a float
    /// bound on an integer array gives f32. NaN stays NaN; with `min > max`
    /// every value becomes `max`, as in NumPy. For one bound only, use
    /// [`Array::maximum`] or [`Array::minimum`] (NumPy's `None`). One fused
    /// dispatch.
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[-3i32, 0, 5, 12], &[4], &device)?;
    /// assert_eq!(x.clip(0, 9)?.to_vec::<i32>()?, vec![0, 0, 5, 9]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// Each naming `clip`, in the house order: [`Error::DeviceMismatch`]
    /// for an array bound on another device, [`Error::ShapeMismatch`] for
    /// one that does not broadcast, [`Error::InvalidArgument`] for an
    /// integer bound this array's integer dtype cannot hold (`u32_x.clip(-1,
    /// 5)`, NumPy 2's `OverflowError`).
    #[track_caller]
    pub fn clip(&self, min: impl Operand, max: impl Operand) -> Result<Array> {
        const OP: &str = "clip";
        let (min, max) = (min.into_arg(), max.into_arg());
        for b in [&min, &max] {
            if let Arg::Array(b) = b {
                same_device(OP, self, b)?;
            }
        }
        let mut shape = self.shape().to_vec();
        for b in [&min, &max] {
            if let Arg::Array(b) = b {
                shape = broadcast_shapes(OP, &shape, b.shape())?;
            }
        }
        let min = self.clip_bound(min)?;
        let max = self.clip_bound(max)?;
        self.maximum(&min)?.minimum(&max)
    }

    /// A bound of [`Array::clip`] as an array: a scalar becomes a lazy 0-d
    /// constant of the dtype it takes beside this array (weak), so the
    /// promotion is the scalar one.
    #[track_caller]
    fn clip_bound(&self, bound: Arg) -> Result<Array> {
        match bound {
            Arg::Array(b) => Ok(b),
            Arg::Scalar { value, dtype } => {
                value.constant("clip", value.weak_dtype(dtype, self.dtype()), self.device())
            }
        }
    }
}
