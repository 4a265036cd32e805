//! Products built on matmul: `outer`, `inner`, `tensordot`.
//!
//! `tensordot` (and `inner`, one case of it) permutes the contracted axes
//! of `a` to the end and those of `b` to the front, merges each side to a
//! matrix and runs one matmul: views and one GEMM dispatch, plus a copy of
//! an operand whose permuted axes cannot be merged by strides. f16 without
//! `SHADER_F16` widens to f32 for the GEMM and rounds back (where
//! [`Array::matmul`] refuses it); integer and bool operands, which the
//! GEMM does not take, multiply elementwise and sum (exact, with the
//! integer dtype's wrapping, as NumPy's int32).

use crate::ops::elementwise::promote_types;
use crate::ops::reduce::Axes;
use crate::shape::{check_shape, normalize_axis};
use crate::{Array, DType, Error, Result};

/// Which axes [`Array::tensordot`] contracts (NumPy's `axes`): a count
/// (`tensordot(&b, 2)`: the last 2 axes of `a` with the first 2 of `b`, in
/// order) or pairs (`tensordot(&b, ([1, 0], [0, 1]))`: axis `a[i]` of `a`
/// with axis `b[i]` of `b`; negative axes count from the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TensordotAxes {
    /// The last `n` axes of `a` with the first `n` of `b`.
    Count(usize),
    /// `(axes of a, axes of b)`, contracted pairwise.
    Pairs(Vec<isize>, Vec<isize>),
}

impl From<usize> for TensordotAxes {
    fn from(n: usize) -> Self {
        TensordotAxes::Count(n)
    }
}

impl From<(Vec<isize>, Vec<isize>)> for TensordotAxes {
    fn from((a, b): (Vec<isize>, Vec<isize>)) -> Self {
        TensordotAxes::Pairs(a, b)
    }
}

impl<const N: usize> From<([isize; N], [isize; N])> for TensordotAxes {
    fn from((a, b): ([isize; N], [isize; N])) -> Self {
        TensordotAxes::Pairs(a.to_vec(), b.to_vec())
    }
}

impl Array {
    /// The outer product of the flattened arrays (NumPy/MLX `outer(a,
    /// b)`): `out[i, j] = a[i] * b[j]`, shape `[a.size(), b.size()]`, in
    /// the promoted dtype. One elementwise multiply of two broadcast views
    /// (exact products, no GEMM rounding); any dtype.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`]; [`Error::TooLarge`] for an element count
    /// past `usize`.
    #[track_caller]
    pub fn outer(&self, other: &Array) -> Result<Array> {
        super::same_device("outer", self, other)?;
        check_shape("outer", &[self.size(), other.size()])?;
        let a = self.ravel().reshape_to(&[self.size(), 1]);
        let b = other.ravel().reshape_to(&[1, other.size()]);
        &a * &b
    }

    /// The sum product over the last axes (NumPy/MLX `inner(a, b)`):
    /// `out[i.., j..] = sum_k a[i.., k] b[j.., k]`, shape
    /// `a.shape[..-1] + b.shape[..-1]`; a 0-d operand multiplies the other.
    /// [`Array::tensordot`] with axes `([-1], [-1])`: one GEMM dispatch for
    /// floats (the transposed `b` is read through its strides).
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`]; [`Error::ShapeMismatch`] when the last
    /// axes differ in length; [`Error::TooLarge`] for a result of more than
    /// [`crate::shape::MAX_DIMS`] dimensions; as [`Array::matmul`] for float
    /// dtypes other than those listed there (none today).
    #[track_caller]
    pub fn inner(&self, other: &Array) -> Result<Array> {
        if self.ndim() == 0 || other.ndim() == 0 {
            super::same_device("inner", self, other)?;
            return self * other;
        }
        self.tensordot_named("inner", other, TensordotAxes::Pairs(vec![-1], vec![-1]))
    }

    /// The sum of products over pairs of axes (NumPy `tensordot(a, b,
    /// axes)`, MLX `tensordot`): the result's axes are `a`'s uncontracted
    /// axes, then `b`'s, each in order. `axes` is a count or pairs (see
    /// [`TensordotAxes`]); `0` is the outer product of the arrays as they
    /// are (not flattened). Dtypes promote; f32, f16 and bf16 run one GEMM
    /// (accumulating in f32), integers and bool multiply and sum exactly
    /// (see the module docs).
    ///
    /// ```
    /// # use wgarray::{Array, Device};
    /// # let device = Device::new_default()?;
    /// let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &device)?;
    /// let b = Array::from_slice(&[1.0f32, 0.0, 1.0], &[3], &device)?;
    /// assert_eq!(a.tensordot(&b, 1)?.to_vec::<f32>()?, vec![4.0, 10.0]);
    /// assert_eq!(a.tensordot(&a, ([0, 1], [0, 1]))?.item::<f32>()?, 91.0);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`]; [`Error::InvalidArgument`] for a count
    /// larger than either rank, pairs of different lengths or an axis
    /// contracted twice; [`Error::InvalidAxis`]; [`Error::ShapeMismatch`]
    /// when paired axes differ in length; [`Error::TooLarge`] for a result
    /// of more than [`crate::shape::MAX_DIMS`] dimensions.
    #[track_caller]
    pub fn tensordot(&self, other: &Array, axes: impl Into<TensordotAxes>) -> Result<Array> {
        self.tensordot_named("tensordot", other, axes.into())
    }

    #[track_caller]
    fn tensordot_named(
        &self,
        op: &'static str,
        other: &Array,
        axes: TensordotAxes,
    ) -> Result<Array> {
        super::same_device(op, self, other)?;
        let (na, nb) = (self.ndim(), other.ndim());
        let (ca, cb): (Vec<usize>, Vec<usize>) = match axes {
            TensordotAxes::Count(n) => {
                if n > na || n > nb {
                    return Err(Error::InvalidArgument(format!(
                        "{op}: cannot contract {n} axes of arrays of {na} and {nb} dimensions"
                    )));
                }
                ((na - n..na).collect(), (0..n).collect())
            }
            TensordotAxes::Pairs(a, b) => {
                if a.len() != b.len() {
                    return Err(Error::InvalidArgument(format!(
                        "{op}: axes {a:?} and {b:?} must pair up (equal lengths)"
                    )));
                }
                let a = a
                    .iter()
                    .map(|&x| normalize_axis(op, x, na))
                    .collect::<Result<Vec<_>>>()?;
                let b = b
                    .iter()
                    .map(|&x| normalize_axis(op, x, nb))
                    .collect::<Result<Vec<_>>>()?;
                (a, b)
            }
        };
        for (axes, n) in [(&ca, na), (&cb, nb)] {
            let mut seen = vec![false; n];
            for &x in axes.iter() {
                if std::mem::replace(&mut seen[x], true) {
                    return Err(Error::InvalidArgument(format!(
                        "{op}: axis {x} is contracted twice"
                    )));
                }
            }
        }
        if ca
            .iter()
            .zip(&cb)
            .any(|(&x, &y)| self.shape()[x] != other.shape()[y])
        {
            return Err(Error::ShapeMismatch {
                op,
                lhs: self.shape().to_vec(),
                rhs: other.shape().to_vec(),
            });
        }
        let free_a: Vec<usize> = (0..na).filter(|x| !ca.contains(x)).collect();
        let free_b: Vec<usize> = (0..nb).filter(|x| !cb.contains(x)).collect();
        let k: usize = ca.iter().map(|&x| self.shape()[x]).product();
        let m: usize = free_a.iter().map(|&x| self.shape()[x]).product();
        let n: usize = free_b.iter().map(|&x| other.shape()[x]).product();
        let mut out: Vec<usize> = free_a.iter().map(|&x| self.shape()[x]).collect();
        out.extend(free_b.iter().map(|&x| other.shape()[x]));
        check_shape(op, &out)?;

        let t = promote_types(self.dtype(), other.dtype());
        self.device().check_array(op, &out, t)?;
        let order_a: Vec<isize> = free_a.iter().chain(&ca).map(|&x| x as isize).collect();
        // b as [n, k]: its free axes first, then the contracted ones.
        let order_b: Vec<isize> = free_b.iter().chain(&cb).map(|&x| x as isize).collect();
        let a = self.astype(t)?.permute(&order_a)?.reshape_to(&[m, k]);
        let b = other.astype(t)?.permute(&order_b)?.reshape_to(&[n, k]);
        let product = if !t.is_float() {
            // [m, 1, k] * [1, n, k], summed over k: exact integer products.
            let p = (&a.reshape_to(&[m, 1, k]) * &b.reshape_to(&[1, n, k]))?;
            p.sum(Axes::from(-1isize), false)?.astype(t)?
        } else if k == 0 {
            // An empty sum: zeros (the GEMM is not asked to run with K = 0).
            Array::zeros(&[m, n], t, self.device())?
        } else {
            let f16_gemm = self
                .device()
                .features()
                .contains(wgpu::Features::SHADER_F16);
            let g = if t == DType::F16 && !f16_gemm {
                DType::F32
            } else {
                t
            };
            let p = a.astype(g)?.matmul(&b.astype(g)?.transpose())?;
            p.astype(t)?
        };
        Ok(product.reshape_to(&out))
    }
}
