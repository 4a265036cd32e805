//! Shapes and strides. All strides here count elements, not bytes.

use crate::{Error, Result};

/// The number of elements of `shape` (1 for a scalar, `[]`); saturates at
/// `usize::MAX` instead of overflowing, so that an absurd shape becomes a
/// [`Error::TooLarge`] where memory is asked for, not a panic.
pub fn numel(shape: &[usize]) -> usize {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .unwrap_or(if shape.contains(&0) { 0 } else { usize::MAX })
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

/// `axis` (negative counts from the end) as an index below `ndim`.
///
/// # Errors
/// [`Error::InvalidAxis`] when it is out of range.
pub fn normalize_axis(axis: isize, ndim: usize) -> Result<usize> {
    let a = if axis < 0 { axis + ndim as isize } else { axis };
    if a < 0 || a as usize >= ndim {
        return Err(Error::InvalidAxis { axis, ndim });
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
        assert_eq!(normalize_axis(-1, 3).unwrap(), 2);
        assert!(normalize_axis(3, 3).is_err());
    }
}
