//! Elementwise binary operations with NumPy broadcasting.
//!
//! Both operands must have the same dtype (type promotion comes with the full
//! op set). Scalars (`&a + 2.0`) are converted to the array's dtype. The
//! operators on `&Array` return `Result<Array>`, as candle's do.

use crate::graph::Primitive;
use crate::kernels::elementwise::{BinaryOp, wgsl_type};
use crate::shape::broadcast_shapes;
use crate::{Array, Error, Result};

fn binary(op: BinaryOp, a: &Array, b: &Array) -> Result<Array> {
    super::same_device(a, b)?;
    if a.dtype() != b.dtype() {
        return Err(Error::DType {
            op: op.name(),
            dtype: a.dtype(),
            other: Some(b.dtype()),
        });
    }
    wgsl_type(&a.device().inner, op.name(), a.dtype())?;
    let shape = broadcast_shapes(op.name(), a.shape(), b.shape())?;
    Ok(Array::from_node(
        a.device(),
        Primitive::Binary(op),
        vec![a.clone(), b.clone()],
        vec![(shape, a.dtype())],
    )
    .pop()
    .expect("one output"))
}

macro_rules! binary_fns {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Array {
            $(
                $(#[$doc])*
                ///
                /// Shapes broadcast as in NumPy; both operands must share a
                /// dtype among f32, i32, u32 (f16 with `SHADER_F16`).
                ///
                /// # Errors
                /// [`Error::ShapeMismatch`] when the shapes do not broadcast,
                /// [`Error::DType`] for mixed or unsupported dtypes,
                /// [`Error::MissingFeature`] for f16 without `SHADER_F16`,
                /// [`Error::DeviceMismatch`].
                pub fn $name(&self, other: &Array) -> Result<Array> {
                    binary($op, self, other)
                }
            )*
        }
    };
}

binary_fns! {
    /// Elementwise `self + other` (NumPy `add`).
    add => BinaryOp::Add;
    /// Elementwise `self - other` (NumPy `subtract`).
    subtract => BinaryOp::Sub;
    /// Elementwise `self * other` (NumPy `multiply`).
    multiply => BinaryOp::Mul;
    /// Elementwise `self / other` (NumPy `divide`; integer division truncates, as WGSL does).
    divide => BinaryOp::Div;
    /// Elementwise maximum (NumPy `maximum`).
    maximum => BinaryOp::Maximum;
    /// Elementwise minimum (NumPy `minimum`).
    minimum => BinaryOp::Minimum;
}

macro_rules! operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl std::ops::$trait<&Array> for &Array {
            type Output = Result<Array>;
            fn $method(self, rhs: &Array) -> Result<Array> {
                binary($op, self, rhs)
            }
        }
        impl std::ops::$trait<Array> for Array {
            type Output = Result<Array>;
            fn $method(self, rhs: Array) -> Result<Array> {
                binary($op, &self, &rhs)
            }
        }
        impl std::ops::$trait<f64> for &Array {
            type Output = Result<Array>;
            /// The scalar is converted to the array's dtype.
            fn $method(self, rhs: f64) -> Result<Array> {
                let s = Array::scalar(rhs, self.dtype(), self.device())?;
                binary($op, self, &s)
            }
        }
        impl std::ops::$trait<f64> for Array {
            type Output = Result<Array>;
            fn $method(self, rhs: f64) -> Result<Array> {
                std::ops::$trait::$method(&self, rhs)
            }
        }
    };
}

operator!(Add, add, BinaryOp::Add);
operator!(Sub, sub, BinaryOp::Sub);
operator!(Mul, mul, BinaryOp::Mul);
operator!(Div, div, BinaryOp::Div);
