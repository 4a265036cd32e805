//! Bit-level views: [`Array::view`], the same bits read as another dtype of
//! the same size (NumPy `ndarray.view(dtype)`, PyTorch `Tensor.view(dtype)`,
//! MLX `view`).

use crate::graph::Primitive;
use crate::{Array, DType, Error, Result};

impl Array {
    /// This array's bits read as `dtype`, which must have the same size:
    /// f32, i32 and u32 (4 bytes); f16, bf16, i16 and u16 (2 bytes); i8
    /// and u8 (1 byte). Same shape; each element keeps its bits exactly
    /// (NaN payloads, -0). Free: the result shares this array's buffer,
    /// strides and offset, so no kernel runs for it, whatever the layout
    /// (a transposed or sliced view stays one); an unevaluated input is
    /// computed into memory first (fusion does not look through a bit
    /// view). Unlike NumPy, a size change along the last axis is not
    /// offered.
    ///
    /// ```
    /// # use wgarray::{Array, DType, Device};
    /// # let device = Device::new_default()?;
    /// let x = Array::from_slice(&[1.0f32, -2.0], &[2], &device)?;
    /// let bits = x.view(DType::U32)?;
    /// assert_eq!(bits.to_vec::<u32>()?, vec![0x3f80_0000, 0xc000_0000]);
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::DType`] (naming both dtypes) when the sizes differ;
    /// [`Error::OpDType`] for bool, whose elements must stay 0 or 1 (cast
    /// with [`Array::astype`] instead).
    #[track_caller]
    pub fn view(&self, dtype: DType) -> Result<Array> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        for d in [self.dtype(), dtype] {
            if d == DType::Bool {
                return Err(Error::OpDType {
                    op: "view",
                    dtype: d,
                    takes: "every dtype but bool, viewed as another of the same size \
                            (bool converts with astype)",
                });
            }
        }
        if dtype.size_in_bytes() != self.dtype().size_in_bytes() {
            return Err(Error::DType {
                op: "view",
                dtype: self.dtype(),
                other: Some(dtype),
            });
        }
        Ok(Array::from_node(
            self.device(),
            Primitive::Bitcast,
            vec![self.clone()],
            vec![(self.shape().to_vec(), dtype)],
        )
        .pop()
        .expect("one output"))
    }
}
