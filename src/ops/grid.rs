//! Arrays whose values follow from the element's index: [`Array::eye`],
//! [`Array::tril`], [`Array::triu`], [`Array::one_hot`],
//! [`Array::linspace`].
//!
//! The first four compare index vectors (`arange(n)`, shaped `[n, 1]` and
//! `[1, m]`) that broadcast into the `[n, m]` grid: the index vectors,
//! `n + m` integers, are uploaded at the call (as [`Array::arange`] is);
//! the grid itself is lazy, one elementwise node chain that the eval runs
//! as elementwise dispatches (one, where they fuse). `linspace` is computed
//! on the host in f64 by NumPy's formula and uploaded, as `arange` is.

use crate::ops::elementwise::where_;
use crate::shape::check_shape;
use crate::{Array, DType, Device, Error, Result};

/// `arange(n)` as `dtype` (i32 or u32), uploaded now.
#[track_caller]
fn iota(n: usize, dtype: DType, device: &Device) -> Result<Array> {
    Array::arange(0.0, n as f64, 1.0, dtype, device)
}

/// `col - row` over an `[n, m]` grid, as i32 (lazy; the two index
/// vectors are uploaded now).
#[track_caller]
fn diagonal_offsets(n: usize, m: usize, device: &Device) -> Result<Array> {
    let rows = iota(n, DType::I32, device)?.reshape_to(&[n, 1]);
    let cols = iota(m, DType::I32, device)?.reshape_to(&[1, m]);
    &cols - &rows
}

/// `k` as an i32 diagonal offset for an `[n, m]` grid: offsets past the
/// grid behave as the nearest one just outside it.
fn clamp_offset(k: isize, n: usize, m: usize) -> i32 {
    let lo = -(n.min(i32::MAX as usize / 2) as i64) - 1;
    let hi = m.min(i32::MAX as usize / 2) as i64 + 1;
    (k as i64).clamp(lo, hi) as i32
}

impl Array {
    /// An `n` x `m` array (`m` = `n` for `None`) with ones on the `k`-th
    /// diagonal and zeros elsewhere (NumPy and MLX `eye(N, M, k, dtype)`):
    /// element `[i, j]` is 1 where `j - i == k`. `k > 0` is above the main
    /// diagonal, `k < 0` below; a `k` past the edge gives all zeros. Any
    /// dtype (bool: true on the diagonal).
    ///
    /// Lazy but for its two index vectors (`n + m` integers, uploaded at
    /// the call); see the module docs.
    ///
    /// ```
    /// # use wgarray::{Array, DType, Device};
    /// # let device = Device::new_default()?;
    /// let e = Array::eye(2, Some(3), 1, DType::F32, &device)?;
    /// assert_eq!(e.to_vec::<f32>()?, vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::TooLarge`] past `usize` elements or the adapter's largest
    /// storage binding (for the index vectors); [`Error::OutOfMemory`].
    #[track_caller]
    pub fn eye(
        n: usize,
        m: Option<usize>,
        k: isize,
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        let m = m.unwrap_or(n);
        check_shape("eye", &[n, m])?;
        let offsets = diagonal_offsets(n, m, device)?;
        offsets.equal(clamp_offset(k, n, m))?.astype(dtype)
    }

    /// The lower triangle of the last two axes (NumPy and MLX `tril(x,
    /// k)`): element `[.., i, j]` is kept where `j - i <= k`, else 0. `k =
    /// 0` keeps the main diagonal, `k = -1` drops it, `k = 1` keeps one
    /// diagonal above it. Any dtype (bool: false above); leading axes are a
    /// batch. Strided views are read in place.
    ///
    /// Differs from NumPy on purpose: a 1-D input is an error (NumPy makes
    /// it a square matrix by broadcasting), as in MLX.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `tril` for fewer than two axes.
    #[track_caller]
    pub fn tril(&self, k: isize) -> Result<Array> {
        self.triangle("tril", k, true)
    }

    /// The upper triangle of the last two axes (NumPy and MLX `triu(x,
    /// k)`): element `[.., i, j]` is kept where `j - i >= k`, else 0.
    /// Otherwise as [`Array::tril`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `triu` for fewer than two axes.
    #[track_caller]
    pub fn triu(&self, k: isize) -> Result<Array> {
        self.triangle("triu", k, false)
    }

    #[track_caller]
    fn triangle(&self, op: &'static str, k: isize, lower: bool) -> Result<Array> {
        if self.ndim() < 2 {
            return Err(Error::InvalidArgument(format!(
                "{op}: the input has shape {:?}; it needs at least 2 axes",
                self.shape()
            )));
        }
        let (n, m) = (self.shape()[self.ndim() - 2], self.shape()[self.ndim() - 1]);
        let offsets = diagonal_offsets(n, m, self.device())?;
        let k = clamp_offset(k, n, m);
        let keep = if lower {
            offsets.less_equal(k)?
        } else {
            offsets.greater_equal(k)?
        };
        where_(&keep, self, false)
    }

    /// One-hot encoding (JAX `nn.one_hot`; PyTorch `one_hot`):
    /// `indices.shape + [num_classes]`, 1 where the last index equals the
    /// value at `indices`, 0 elsewhere, as `dtype` (any; bool gives true
    /// and false). An index outside `0..num_classes` (negative included)
    /// gives a row of zeros, as JAX: a kernel cannot raise (PyTorch
    /// refuses such indices). NumPy and MLX have no `one_hot`.
    ///
    /// Lazy but for the class vector (`num_classes` integers, uploaded at
    /// the call).
    ///
    /// # Errors
    /// [`Error::TooLarge`] for a result of more than
    /// [`crate::shape::MAX_DIMS`] dimensions or past `usize` elements;
    /// [`Error::DType`] naming `one_hot` unless `indices` are i32 or u32.
    #[track_caller]
    pub fn one_hot(&self, num_classes: usize, dtype: DType) -> Result<Array> {
        let mut shape = self.shape().to_vec();
        shape.push(num_classes);
        check_shape("one_hot", &shape)?;
        if !matches!(self.dtype(), DType::I32 | DType::U32) {
            return Err(Error::DType {
                op: "one_hot",
                dtype: self.dtype(),
                other: None,
            });
        }
        let classes = iota(num_classes, self.dtype(), self.device())?;
        let mut column = self.shape().to_vec();
        column.push(1);
        self.reshape_to(&column).equal(&classes)?.astype(dtype)
    }

    /// `num` evenly spaced values from `start` to `stop`, both included
    /// (NumPy `linspace(start, stop, num)`, `endpoint=True`; MLX
    /// `linspace`), as `dtype`: value `i` is `start + i * step` with `step
    /// = (stop - start) / (num - 1)`, computed in f64 as NumPy computes it,
    /// the last set to `stop` exactly, then rounded to nearest even into a
    /// float dtype; integer dtypes take the floor (as NumPy 2), bool
    /// `value != 0`. `num = 1` gives `[start]`, `num = 0` an empty array.
    /// Computed on the host and uploaded at the call, as
    /// [`Array::arange`].
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
    /// [`Error::InvalidArgument`] naming `start` or `stop` when it is not
    /// finite; [`Error::TooLarge`] past the adapter's largest storage
    /// binding.
    #[track_caller]
    pub fn linspace(
        start: f64,
        stop: f64,
        num: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Array> {
        for (name, v) in [("start", start), ("stop", stop)] {
            if !v.is_finite() {
                return Err(Error::InvalidArgument(format!(
                    "linspace({start}, {stop}, {num}): `{name}` must be finite"
                )));
            }
        }
        check_shape("linspace", &[num])?;
        device.check_binding("linspace", crate::transfer::device_bytes(num, dtype))?;
        let step = (stop - start) / (num.max(2) - 1) as f64;
        let value = |i: usize| {
            let x = if i + 1 == num && num > 1 {
                stop
            } else {
                start + i as f64 * step
            };
            if dtype.is_float() || dtype == DType::Bool {
                x
            } else {
                x.floor()
            }
        };
        let values: Vec<f64> = (0..num).map(value).collect();
        Array::from_f64_values(&values, dtype, device, "linspace")
    }
}
