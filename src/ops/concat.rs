//! Joining arrays: [`concatenate`] and [`stack`].
//!
//! One node per call. On eval the kernel (wgsl/concat.wgsl) writes the
//! output in one dispatch per group of up to 7 inputs: WebGPU guarantees 8
//! storage buffers per shader stage, one of which is the output. Groups are
//! smaller for inputs of high rank, whose strides fill the 256-byte
//! parameter block sooner (5 inputs at rank 8, after dropping axes of
//! length 1), and inputs of length 0 along the axis cost nothing. Inputs
//! are read through their own strides (transposed, sliced or broadcast
//! views are not copied first).

use crate::axis::{Axes, Axis};
use crate::graph::Primitive;
use crate::ops::elementwise::promote_types;
use crate::{Array, Error, Result};

/// NumPy `concatenate(arrays, axis)`: the arrays joined along `axis`
/// (negative counts from the end), or, for `None`, the arrays flattened
/// (row-major) and joined into one 1-D array of any shapes
/// (`concatenate(&[&a, &b], 0)`, `concatenate(&[&a, &b], None)`).
///
/// Along an axis, every array must have the same rank (at least 1) and the
/// same length on every other axis. The result's dtype is the promotion of all the inputs'
/// dtypes ([`crate::promote_types`], applied left to right); an input of
/// another dtype is converted first, by one cast dispatch of its own. The
/// join is one dispatch per group of up to 7 inputs (see the module docs).
///
/// ```
/// # use wgarray::{Array, Device};
/// # let device = Device::new_default()?;
/// let a = Array::from_slice(&[1i32, 2, 3, 4], &[2, 2], &device)?;
/// let b = Array::from_slice(&[5i32, 6], &[2, 1], &device)?;
/// let c = wgarray::concatenate(&[&a, &b], 1)?;
/// assert_eq!(c.shape(), &[2, 3]);
/// assert_eq!(c.to_vec::<i32>()?, vec![1, 2, 5, 3, 4, 6]);
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty list, 0-dimensional arrays or
/// a list of several axes; [`Error::InvalidAxis`]; [`Error::DeviceMismatch`];
/// [`Error::ShapeMismatch`] when ranks or the other axes differ;
/// [`Error::DType`] for an array of a block format beside one of another
/// dtype (block formats join only themselves, whole blocks at a time: a
/// fused projection's weights concatenated along their rows stay
/// quantized); [`Error::TooLarge`] for a result past the adapter's largest
/// storage binding.
#[track_caller]
pub fn concatenate(arrays: &[&Array], axis: impl Into<Axes>) -> Result<Array> {
    let Some(first) = arrays.first() else {
        return Err(Error::InvalidArgument(
            "concatenate: `arrays` is empty; it needs at least one array".into(),
        ));
    };
    let axis = axis.into();
    if axis == Axes::All {
        // A loop, not a closure: the reshapes record the caller's location.
        let mut flat = Vec::with_capacity(arrays.len());
        for a in arrays {
            flat.push(a.ravel());
        }
        let refs: Vec<&Array> = flat.iter().collect();
        return concatenate(&refs, 0);
    }
    if first.ndim() == 0 {
        return Err(Error::InvalidArgument(
            "concatenate: `arrays` are 0-dimensional, which have no axis to join".into(),
        ));
    }
    let axis = axis
        .one("concatenate", first.ndim())?
        .expect("Axes::All returned above");
    let mut shape = first.shape().to_vec();
    shape[axis] = 0;
    let mut dtype = first.dtype();
    for a in arrays {
        super::same_device("concatenate", first, a)?;
        let same_rest = a.ndim() == first.ndim()
            && (0..a.ndim()).all(|d| d == axis || a.shape()[d] == first.shape()[d]);
        if !same_rest {
            return Err(Error::ShapeMismatch {
                op: "concatenate",
                lhs: first.shape().to_vec(),
                rhs: a.shape().to_vec(),
            });
        }
        shape[axis] = shape[axis].saturating_add(a.shape()[axis]);
        dtype = promote_types(dtype, a.dtype());
    }
    // A block format joins only itself (whole rows of blocks, or whole
    // blocks along the last axis): no cast makes one.
    if let Some(q) = arrays.iter().find(|a| a.dtype().is_quantized())
        && let Some(o) = arrays.iter().find(|a| a.dtype() != q.dtype())
    {
        return Err(Error::DType {
            op: "concatenate",
            dtype: q.dtype(),
            other: Some(o.dtype()),
        });
    }
    first.device().check_array("concatenate", &shape, dtype)?;
    // A loop, not a closure: the casts record the caller's location.
    let mut inputs = Vec::with_capacity(arrays.len());
    for a in arrays {
        inputs.push(a.astype(dtype)?);
    }
    Ok(Array::from_node(
        first.device(),
        Primitive::Concatenate { axis },
        inputs,
        vec![(shape, dtype)],
    )
    .pop()
    .expect("one output"))
}

/// NumPy `stack(arrays, axis)`: the arrays, all of one shape, joined along a
/// new axis at `axis` (in `-(ndim + 1) ..= ndim`; negative counts from the
/// end of the result's axes).
///
/// [`concatenate`] of the inputs with a length-1 axis inserted (a view, no
/// copy); dtype promotion and dispatches as there.
///
/// ```
/// # use wgarray::{Array, Device};
/// # let device = Device::new_default()?;
/// let a = Array::from_slice(&[1.0f32, 2.0], &[2], &device)?;
/// let b = Array::from_slice(&[3.0f32, 4.0], &[2], &device)?;
/// let s = wgarray::stack(&[&a, &b], 1)?;
/// assert_eq!(s.shape(), &[2, 2]);
/// assert_eq!(s.to_vec::<f32>()?, vec![1.0, 3.0, 2.0, 4.0]);
/// # Ok::<(), wgarray::Error>(())
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty list; [`Error::DeviceMismatch`];
/// [`Error::InvalidAxis`]; [`Error::TooLarge`] for a result of more than
/// [`crate::shape::MAX_DIMS`] dimensions or past the adapter's largest
/// storage binding; [`Error::ShapeMismatch`] when the shapes differ.
#[track_caller]
pub fn stack(arrays: &[&Array], axis: impl Into<Axis>) -> Result<Array> {
    let Some(first) = arrays.first() else {
        return Err(Error::InvalidArgument(
            "stack: `arrays` is empty; it needs at least one array".into(),
        ));
    };
    let axis = axis.into().resolve("stack", first.ndim() + 1)?;
    let mut shape = first.shape().to_vec();
    shape.insert(axis, arrays.len());
    first.device().check_array("stack", &shape, first.dtype())?;
    for a in arrays {
        super::same_device("stack", first, a)?;
    }
    let mut expanded = Vec::with_capacity(arrays.len());
    for a in arrays {
        if a.shape() != first.shape() {
            return Err(Error::ShapeMismatch {
                op: "stack",
                lhs: first.shape().to_vec(),
                rhs: a.shape().to_vec(),
            });
        }
        expanded.push(a.expand_dims(axis as isize)?);
    }
    let refs: Vec<&Array> = expanded.iter().collect();
    concatenate(&refs, axis as isize)
}
