//! Scans along an axis: [`Array::cumsum`], [`Array::cumprod`],
//! [`Array::cummax`], [`Array::cummin`].
//!
//! MLX's signatures (`cumsum(a, axis, reverse, inclusive)`): `axis: None`
//! scans the flattened array, `reverse` scans from the end, and
//! `inclusive = false` gives the exclusive scan (each output combines the
//! elements strictly before it; the first is the op's identity: 0, 1, the
//! dtype's lowest or highest value, -inf and +inf for floats).
//!
//! # Dtypes and numerics
//!
//! f32, f16, bf16, i32, u32 and bool; i8, u8, i16, u16 and f64 are
//! [`crate::Error::OpDType`] (the accumulators are 32-bit: cast with
//! `astype`, to i32 for NumPy's widening of small integers). Floats accumulate in f32 (f16 and bf16 too, rounded once
//! when each output is stored); integers in their own type, wrapping on
//! overflow (NumPy widens to int64, which WGSL lacks); bool sums and
//! products count in i32 (NumPy and MLX promote bool), bool max and min
//! stay bool. `cummax` and `cummin` propagate NaN: every output from the
//! first NaN on is NaN (NumPy's `maximum.accumulate`).
//!
//! # Kernels
//!
//! wgsl/scan.wgsl, reduce-then-scan over blocks of 1024 elements (Merrill
//! and Garland 2016, the three-kernel baseline of section 3): rows of up to
//! 64 elements take one thread each (one dispatch), rows of up to 1024 one
//! workgroup (one dispatch), longer rows three dispatches (block totals, a
//! scan of each row's totals, the blocks scanned from their prefixes). The
//! input is read through its strides (views are not copied) and read twice
//! for long rows; the output is written once, dense. Float sums therefore
//! add in a tree order, not NumPy's left-to-right one: results agree to
//! f32 rounding, not bit for bit.

use crate::axis::Axes;
use crate::graph::Primitive;
use crate::graph::primitive::ReduceOp;
use crate::ops::check_word_dtype;
use crate::{Array, Result};

impl Array {
    /// Record a scan node for the public op `name`: the flattened array
    /// for `axis = None`.
    #[track_caller]
    fn scan(
        &self,
        name: &'static str,
        op: ReduceOp,
        axis: Axes,
        reverse: bool,
        inclusive: bool,
    ) -> Result<Array> {
        let (x, axis) = match axis.one(name, self.ndim())? {
            None => (self.ravel(), 0),
            Some(a) => (self.clone(), a),
        };
        check_word_dtype(name, x.dtype())?;
        let dtype = op.scan_dtype(x.dtype());
        let shape = x.shape().to_vec();
        self.device().check_array(name, &shape, dtype)?;
        Ok(Array::from_node(
            self.device(),
            Primitive::Scan {
                op,
                axis,
                reverse,
                inclusive,
            },
            vec![x],
            vec![(shape, dtype)],
        )
        .pop()
        .expect("one output"))
    }

    /// Cumulative sum along `axis` (NumPy `cumsum`, MLX `cumsum(a, axis,
    /// reverse, inclusive)`; see the module docs for the options, dtypes and
    /// kernels). The output has this array's shape (flattened for `axis =
    /// None`) and dtype (i32 for bool).
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[1i32, 2, 3, 4], &[4], &device)?;
    /// assert_eq!(x.cumsum(0, false, true)?.to_vec::<i32>()?, vec![1, 3, 6, 10]);
    /// assert_eq!(x.cumsum(0, true, false)?.to_vec::<i32>()?, vec![9, 7, 4, 0]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`] and [`crate::Error::InvalidArgument`]
    /// for a list of several axes, then [`crate::Error::OpDType`] for i8,
    /// u8, i16, u16 and f64, naming the op.
    #[track_caller]
    pub fn cumsum(&self, axis: impl Into<Axes>, reverse: bool, inclusive: bool) -> Result<Array> {
        self.scan("cumsum", ReduceOp::Sum, axis.into(), reverse, inclusive)
    }

    /// Cumulative product along `axis` (NumPy `cumprod`, MLX `cumprod`),
    /// as [`Array::cumsum`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`] and [`crate::Error::InvalidArgument`]
    /// for a list of several axes, then [`crate::Error::OpDType`] for i8,
    /// u8, i16, u16 and f64, naming the op.
    #[track_caller]
    pub fn cumprod(&self, axis: impl Into<Axes>, reverse: bool, inclusive: bool) -> Result<Array> {
        self.scan("cumprod", ReduceOp::Prod, axis.into(), reverse, inclusive)
    }

    /// Running maximum along `axis` (NumPy `maximum.accumulate`, MLX
    /// `cummax`), as [`Array::cumsum`]; NaN propagates. The dtype is kept
    /// (bool too).
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`] and [`crate::Error::InvalidArgument`]
    /// for a list of several axes, then [`crate::Error::OpDType`] for i8,
    /// u8, i16, u16 and f64, naming the op.
    #[track_caller]
    pub fn cummax(&self, axis: impl Into<Axes>, reverse: bool, inclusive: bool) -> Result<Array> {
        self.scan("cummax", ReduceOp::Max, axis.into(), reverse, inclusive)
    }

    /// Running minimum along `axis` (NumPy `minimum.accumulate`, MLX
    /// `cummin`), as [`Array::cummax`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidAxis`] and [`crate::Error::InvalidArgument`]
    /// for a list of several axes, then [`crate::Error::OpDType`] for i8,
    /// u8, i16, u16 and f64, naming the op.
    #[track_caller]
    pub fn cummin(&self, axis: impl Into<Axes>, reverse: bool, inclusive: bool) -> Result<Array> {
        self.scan("cummin", ReduceOp::Min, axis.into(), reverse, inclusive)
    }
}
