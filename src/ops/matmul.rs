//! Matrix multiplication with NumPy semantics.

use crate::graph::Primitive;
use crate::kernels::matmul::MAX_BATCH_DIMS;
use crate::shape::broadcast_shapes;
use crate::{Array, DType, Error, Result};

impl Array {
    /// NumPy `matmul`: `[..., m, k] @ [..., k, n] -> [..., m, n]`.
    ///
    /// A 1-D left operand is a row `[1, k]` and a 1-D right operand a column
    /// `[k, 1]`; the added dimension is removed from the result. Batch
    /// dimensions (up to four) broadcast. f32 only for now, accumulated in
    /// f32; the kernel is the reference one-thread-per-output kernel.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] when the inner dimensions differ or batch
    /// dimensions do not broadcast; [`Error::InvalidArgument`] for 0-d
    /// operands or more than four batch dimensions; [`Error::DType`] for
    /// dtypes other than f32; [`Error::DeviceMismatch`].
    pub fn matmul(&self, other: &Array) -> Result<Array> {
        super::same_device(self, other)?;
        for x in [self, other] {
            if x.dtype() != DType::F32 {
                return Err(Error::DType {
                    op: "matmul",
                    dtype: x.dtype(),
                    other: None,
                });
            }
            if x.ndim() == 0 {
                return Err(Error::InvalidArgument("matmul of a 0-d array".into()));
            }
        }
        let mismatch = || Error::ShapeMismatch {
            op: "matmul",
            lhs: self.shape().to_vec(),
            rhs: other.shape().to_vec(),
        };
        let a_shape: Vec<usize> = if self.ndim() == 1 {
            vec![1, self.shape()[0]]
        } else {
            self.shape().to_vec()
        };
        let b_shape: Vec<usize> = if other.ndim() == 1 {
            vec![other.shape()[0], 1]
        } else {
            other.shape().to_vec()
        };
        let (ar, br) = (a_shape.len(), b_shape.len());
        if a_shape[ar - 1] != b_shape[br - 2] {
            return Err(mismatch());
        }
        let batch = broadcast_shapes("matmul", &a_shape[..ar - 2], &b_shape[..br - 2])
            .map_err(|_| mismatch())?;
        if batch.len() > MAX_BATCH_DIMS {
            return Err(Error::InvalidArgument(format!(
                "matmul takes at most {MAX_BATCH_DIMS} batch dimensions, got {}",
                batch.len()
            )));
        }
        let a = self.reshape_to(&a_shape);
        let b = other.reshape_to(&b_shape);
        let mut out = batch.clone();
        out.extend([a_shape[ar - 2], b_shape[br - 1]]);
        let c = Array::from_node(
            self.device(),
            Primitive::Matmul,
            vec![a, b],
            vec![(out.clone(), DType::F32)],
        )
        .pop()
        .expect("one output");
        // Drop the dimensions NumPy adds for 1-D operands.
        let mut final_shape = batch;
        if self.ndim() > 1 {
            final_shape.push(out[out.len() - 2]);
        }
        if other.ndim() > 1 {
            final_shape.push(out[out.len() - 1]);
        }
        Ok(c.reshape_to(&final_shape))
    }
}
