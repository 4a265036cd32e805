//! How an op names its axes: one convention for the whole API, as MLX's
//! `axis=None|int|list` and candle's `Dim`/`Dims`.
//!
//! - **One axis** is any integer: `isize`, `i32`, `i64`, `usize` or `u32`
//!   (so `-1`, `1usize` and an `i32` variable all work); a negative axis
//!   counts from the end. Ops that work on exactly one axis (`split`,
//!   `stack`, `topk`, `swapaxes`, ...) take `impl Into<`[`Axis`]`>`.
//! - **Every axis, or the flattened array**, is `None` (NumPy and MLX
//!   `axis=None`), the same value for every op that has such a mode:
//!   reductions reduce every axis, `argmax`, `sort`, `cumsum`, `take`,
//!   `concatenate`, ... work on the flattened array. `Some(axis)` is
//!   accepted wherever `None` is, so an `Option<isize>` variable passes as
//!   it is. These ops take `impl Into<`[`Axes`]`>`.
//! - **Several axes** (reductions, `softmax`, `squeeze`, `expand_dims`,
//!   `permute`, `slice_update`) are an array, slice or `Vec` of integers:
//!   `[0, 2]`, `&axes[..]`, `vec![1usize, 2]`. An op that takes one axis or
//!   `None` refuses a list of several with [`Error::InvalidArgument`], and
//!   an axis named twice (`[0, 0]`, `[1, -1]` of a 2-d array) is refused
//!   with [`Error::InvalidArgument`] too, as NumPy does.
//!
//! ```
//! # use wgarray::{Array, Device, DType};
//! # let device = Device::new_default()?;
//! let x = Array::arange(0.0, 6.0, 1.0, DType::F32, &device)?.reshape(&[2, 3])?;
//! assert_eq!(x.sum(-1, false)?.to_vec::<f32>()?, vec![3.0, 12.0]); // one axis
//! assert_eq!(x.sum([0, 1], false)?.item::<f32>()?, 15.0); // several
//! assert_eq!(x.sum(None, false)?.item::<f32>()?, 15.0); // every axis
//! assert_eq!(x.argmax(None, false)?.item::<u32>()?, 5); // the flattened array
//! assert_eq!(x.argmax(-1, false)?.to_vec::<u32>()?, vec![2, 2]);
//! let parts = x.split(3, 1usize)?; // exactly one axis
//! assert_eq!(parts.len(), 3);
//! # Ok::<(), wgarray::Error>(())
//! ```

use crate::shape::normalize_axis;
use crate::{Error, Result};

/// Exactly one axis, for ops that have no "every axis" mode (`split`,
/// `stack`, `topk`, `swapaxes`, `diagonal`, ...). Converts from `isize`,
/// `i32`, `i64`, `usize` and `u32`; negative counts from the end. A value
/// past `isize` (a `usize` above `isize::MAX`) becomes `isize::MAX`, which
/// no array has, so the op refuses it as [`Error::InvalidAxis`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Axis(isize);

impl Axis {
    /// The axis as given (negative counts from the end).
    pub fn get(self) -> isize {
        self.0
    }

    /// The axis as an index below `ndim`.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`] naming `op` when it is out of range.
    pub(crate) fn resolve(self, op: &'static str, ndim: usize) -> Result<usize> {
        normalize_axis(op, self.0, ndim)
    }
}

/// Which axes an op works on: every axis (`None`, which converts to `Axes::All`), or
/// these (negative counts from the end). Converts from one integer (as
/// [`Axis`]), from arrays, slices and `Vec`s of integers, from `None` and
/// from `Some(axis)`: `-1`, `[0, 2]`, `&[1][..]`, `vec![0usize, 1]`,
/// `None`, `Some(-1)` all work. See the [module docs](crate::axis) for the
/// whole convention.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Axes {
    /// Every axis, or the flattened array (NumPy `axis=None`); what `None`
    /// converts to.
    All,
    /// These axes; an empty list reduces nothing.
    These(Vec<isize>),
}

/// An integer type that names an axis.
trait AxisInt: Copy {
    fn axis(self) -> isize;
}

macro_rules! axis_int {
    ($($t:ty),*) => {$(
        impl AxisInt for $t {
            fn axis(self) -> isize {
                isize::try_from(self).unwrap_or(isize::MAX)
            }
        }
        impl From<$t> for Axis {
            fn from(a: $t) -> Axis {
                Axis(a.axis())
            }
        }
        impl From<$t> for Axes {
            fn from(a: $t) -> Axes {
                Axes::These(vec![a.axis()])
            }
        }
        impl<const N: usize> From<[$t; N]> for Axes {
            fn from(a: [$t; N]) -> Axes {
                Axes::These(a.iter().map(|x| x.axis()).collect())
            }
        }
        impl From<&[$t]> for Axes {
            fn from(a: &[$t]) -> Axes {
                Axes::These(a.iter().map(|x| x.axis()).collect())
            }
        }
        impl<const N: usize> From<&[$t; N]> for Axes {
            fn from(a: &[$t; N]) -> Axes {
                Axes::These(a.iter().map(|x| x.axis()).collect())
            }
        }
        impl From<Vec<$t>> for Axes {
            fn from(a: Vec<$t>) -> Axes {
                Axes::These(a.iter().map(|x| x.axis()).collect())
            }
        }
        impl From<&Vec<$t>> for Axes {
            fn from(a: &Vec<$t>) -> Axes {
                Axes::These(a.iter().map(|x| x.axis()).collect())
            }
        }
    )*};
}

axis_int!(isize, i32, i64, usize, u32);

/// `None` is every axis; `Some(axis)` that axis. Only `Option<isize>`
/// converts, so that a bare `None` or `Some(-1)` needs no annotation.
impl From<Option<isize>> for Axes {
    fn from(a: Option<isize>) -> Axes {
        match a {
            None => Axes::All,
            Some(a) => Axes::These(vec![a]),
        }
    }
}

impl From<Axis> for Axes {
    fn from(a: Axis) -> Axes {
        Axes::These(vec![a.0])
    }
}

impl Axes {
    /// Sorted, distinct, non-negative axes of an `ndim`-dimensional array.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`] naming `op` for an axis out of range;
    /// [`Error::InvalidArgument`] for an axis named twice (`[0, 0]`, or
    /// `[1, -1]` of a 2-d array), as NumPy ("duplicate value in 'axis'").
    pub(crate) fn resolve(&self, op: &'static str, ndim: usize) -> Result<Vec<usize>> {
        let given = match self {
            Axes::All => return Ok((0..ndim).collect()),
            Axes::These(a) => a,
        };
        let v: Vec<usize> = given
            .iter()
            .map(|&x| normalize_axis(op, x, ndim))
            .collect::<Result<_>>()?;
        let mut sorted = v.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!(
                "{op}: axis {} is named twice in {given:?} (an array of {ndim} dimensions)",
                w[0]
            )));
        }
        Ok(sorted)
    }

    /// For an op on one axis or the flattened array: `None` for every axis,
    /// else the one axis as an index below `ndim`.
    ///
    /// # Errors
    /// [`Error::InvalidAxis`] naming `op` when the axis is out of range;
    /// [`Error::InvalidArgument`] for a list of other than one axis.
    pub(crate) fn one(&self, op: &'static str, ndim: usize) -> Result<Option<usize>> {
        match self {
            Axes::All => Ok(None),
            Axes::These(a) if a.len() == 1 => normalize_axis(op, a[0], ndim).map(Some),
            Axes::These(a) => Err(Error::InvalidArgument(format!(
                "{op} works on one axis or on the flattened array (None), not on the axes {a:?}"
            ))),
        }
    }
}
