//! Shapes and strides. All strides here count elements, not bytes.
//!
//! Shapes, lengths and sizes are `usize`; axes are `isize` (negative counts
//! from the end), as everywhere in wgarray's API.

use crate::error::Limit;
use crate::{Error, Result};

/// The most dimensions an array has. Kernels unravel a flat index over
/// the dimensions in straight-line code, one step per dimension (Mesa's
/// llvmpipe stops an invocation after 65535 loop iterations, so no loop);
/// every op that makes a shape checks it, so a ninth dimension is an
/// [`Error::TooLarge`] ([`Limit::Dimensions`]) at the call that asks for
/// it, not at eval.
pub const MAX_DIMS: usize = 8;

/// The length [`crate::Array::reshape`] infers (NumPy's and MLX's `-1`):
/// `x.reshape(&[2, INFER])`. No real length is this large.
pub const INFER: usize = usize::MAX;

/// The number of elements of `shape` (1 for a scalar, `[]`). Every array's
/// shape was checked with [`check_shape`] when it was made, so this does
/// not overflow for them; for other shapes it saturates at `usize::MAX`.
pub fn numel(shape: &[usize]) -> usize {
    checked_numel(shape).unwrap_or(usize::MAX)
}

/// The number of elements of `shape`, or `None` when it overflows `usize`
/// (a 0 anywhere gives 0, however large the other lengths).
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Check a shape an op `op` is about to make: at most [`MAX_DIMS`]
/// dimensions, and an element count that fits `usize` with room for the
/// bytes of any dtype (4 per element) in a `u64`.
///
/// # Errors
/// [`Error::TooLarge`] with [`Limit::Dimensions`] or [`Limit::Elements`].
pub fn check_shape(op: &'static str, shape: &[usize]) -> Result<()> {
    if shape.len() > MAX_DIMS {
        return Err(Error::TooLarge {
            op,
            limit: Limit::Dimensions,
            value: shape.len() as u64,
            max: MAX_DIMS as u64,
        });
    }
    let fits = checked_numel(shape)
        .and_then(|n| (n as u64).checked_mul(4))
        .is_some();
    if !fits {
        return Err(Error::TooLarge {
            op,
            limit: Limit::Elements,
            value: u64::MAX,
            max: (usize::MAX as u64).min(u64::MAX / 4),
        });
    }
    Ok(())
}

/// `shape` as the error messages write it: `[2, INFER]` for an inferred
/// length.
pub(crate) fn display_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape
        .iter()
        .map(|&d| {
            if d == INFER {
                "INFER".to_string()
            } else {
                d.to_string()
            }
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// The axes of `shape` other than `axis` and the number of rows along
/// `axis` (their product), for ops and kernels that work row by row (the
/// kernels unravel the other axes with wgsl/unravel.wgsl: at most 7, as
/// every shape was checked against [`MAX_DIMS`] when it was made).
pub(crate) fn rows_along(shape: &[usize], axis: usize) -> (Vec<usize>, usize) {
    debug_assert!(shape.len() <= MAX_DIMS);
    let outer: Vec<usize> = (0..shape.len()).filter(|&d| d != axis).collect();
    let rows = outer.iter().map(|&d| shape[d]).product();
    (outer, rows)
}

/// Row-major (C order) strides of `shape`, in elements.
pub fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1isize;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc *= d.max(1) as isize;
    }
    strides
}

/// Whether `strides` lay out `shape` densely in row-major order
/// (dimensions of length 1 may have any stride).
pub fn is_contiguous(shape: &[usize], strides: &[isize]) -> bool {
    let mut acc = 1isize;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d != 1 && s != acc {
            return false;
        }
        acc *= d as isize;
    }
    true
}

/// `axis` (negative counts from the end) as an index below `ndim`, for
/// the op `op`.
///
/// # Errors
/// [`Error::InvalidAxis`] naming `op` when it is out of range.
pub fn normalize_axis(op: &'static str, axis: isize, ndim: usize) -> Result<usize> {
    let a = if axis < 0 {
        axis.saturating_add(ndim as isize)
    } else {
        axis
    };
    if a < 0 || a as usize >= ndim {
        return Err(Error::InvalidAxis { op, axis, ndim });
    }
    Ok(a as usize)
}

/// The NumPy broadcast of two shapes.
///
/// # Errors
/// [`Error::ShapeMismatch`] when a dimension pair is neither equal nor 1.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: a.to_vec(),
                    rhs: b.to_vec(),
                });
            }
        };
    }
    Ok(out)
}

/// Strides that read an array of `shape`/`strides` as if it had the
/// broadcast shape `target` (stride 0 along broadcast dimensions).
pub fn broadcast_strides(shape: &[usize], strides: &[isize], target: &[usize]) -> Vec<isize> {
    let pad = target.len() - shape.len();
    (0..target.len())
        .map(|i| {
            if i < pad || shape[i - pad] == 1 {
                0
            } else {
                strides[i - pad]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_and_broadcast() {
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(contiguous_strides(&[]), Vec::<isize>::new());
        assert_eq!(broadcast_shapes("t", &[3, 1], &[4]).unwrap(), vec![3, 4]);
        assert!(broadcast_shapes("t", &[3], &[4]).is_err());
        assert_eq!(
            broadcast_strides(&[3, 1], &[1, 1], &[2, 3, 4]),
            vec![0, 1, 0]
        );
        assert_eq!(normalize_axis("t", -1, 3).unwrap(), 2);
        assert!(normalize_axis("t", 3, 3).is_err());
        assert!(normalize_axis("t", isize::MIN, 3).is_err());
        assert_eq!(checked_numel(&[1 << 40, 1 << 40]), None);
        assert_eq!(checked_numel(&[1 << 40, 1 << 40, 0]), Some(0));
        assert!(check_shape("t", &[1; 9]).is_err());
        assert!(check_shape("t", &[1; 8]).is_ok());
    }
}
