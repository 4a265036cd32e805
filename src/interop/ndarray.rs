//! [`Array::from_ndarray`] and [`Array::to_ndarray`] (feature `ndarray`).

use ndarray::{ArrayBase, Data, Dimension, IxDyn};
use wgpu::WriteOnly;

use crate::transfer::{self, device_bytes};
use crate::{Array, Device, Element, Error, Result};

/// Elements per chunk when gathering a strided ndarray.
const GATHER_CHUNK: usize = 1024;

/// Write `values` (in order) into `dst` in the device layout, through a
/// small fixed buffer, and zero the rest of `dst`.
fn write_elements<T: Element>(mut dst: WriteOnly<'_, [u8]>, values: impl Iterator<Item = T>) {
    let mut values = values.peekable();
    let mut chunk = Vec::with_capacity(GATHER_CHUNK);
    while values.peek().is_some() {
        chunk.clear();
        chunk.extend(values.by_ref().take(GATHER_CHUNK));
        let (head, rest) = dst.split_at(chunk.len() * T::DTYPE.size_in_bytes());
        T::write_device(&chunk, head);
        dst = rest;
    }
    dst.fill(0);
}

impl Array {
    /// An evaluated array holding the elements of an ndarray array of any
    /// layout, with the same shape (`[]` for a 0-dimensional one) and the
    /// dtype of `T`.
    ///
    /// Each element is copied once on the host, into wgpu's staging
    /// memory:
    /// - standard (row-major, contiguous) layout: one `memcpy`;
    /// - contiguous in memory in another order (a transposed or permuted
    ///   array, reversed axes): the memory block is copied as it lies and
    ///   the result reads it through the ndarray's strides (element
    ///   strides, negative ones included), a view like [`Array::transpose`]
    ///   gives, which later ops read without copying;
    /// - anything else (a slice with steps, a column of a matrix): gathered
    ///   in row-major order, so only the elements themselves are uploaded.
    ///
    /// ```
    /// use wgarray::{Array, Device, ndarray};
    /// let device = Device::new_default()?;
    /// let a = ndarray::array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    /// let t = Array::from_ndarray(&a.t(), &device)?;          // [3, 2]
    /// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// let back = t.to_ndarray::<f32, ndarray::Ix2>()?;
    /// assert_eq!(back, a.t());
    /// # Ok::<(), wgarray::Error>(())
    /// ```
    ///
    /// `i64` and `u64` elements become `I32` and `U32` (see [`Element`]).
    ///
    /// # Errors
    /// [`Error::TooLarge`] for more than [`crate::shape::MAX_DIMS`]
    /// dimensions (an `IxDyn` array), or when the uploaded bytes exceed the
    /// adapter's largest storage binding; [`Error::OutOfMemory`];
    /// [`Error::OutOfRange`] for the first `i64`/`u64` element (row-major)
    /// that does not fit 32 bits; [`Error::MissingFeature`] for f64 without
    /// `SHADER_F64`.
    #[track_caller]
    pub fn from_ndarray<T, S, D>(array: &ArrayBase<S, D>, device: &Device) -> Result<Array>
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        let shape = array.shape();
        crate::shape::check_shape("from_ndarray", shape)?;
        let dtype = T::DTYPE;
        let origin = device.origin(|| "from_ndarray");
        if let Some(slice) = array.as_slice() {
            return Array::from_slice(slice, shape, device);
        }
        device.check_dtype("from_ndarray", dtype)?;
        // i64 and u64 are narrowed: every value must fit (row-major order
        // names the culprit, as from_slice does).
        if let Some((index, value)) = array
            .iter()
            .enumerate()
            .find_map(|(i, x)| T::first_out_of_range(std::slice::from_ref(x)).map(|(_, v)| (i, v)))
        {
            return Err(Error::OutOfRange {
                op: "from_ndarray",
                tensor: None,
                index,
                value,
                dtype,
            });
        }
        if let Some(block) = array.as_slice_memory_order() {
            // The first element in logical order, counted from the lowest
            // address (not the block's start when an axis is reversed).
            let offset = (array.as_ptr() as usize - block.as_ptr() as usize) / size_of::<T>();
            let strides = array.strides().to_vec();
            let buffer = transfer::upload(
                device,
                "from_ndarray",
                device_bytes(block.len(), dtype),
                origin,
                |dst| T::write_device(block, dst),
            )?;
            return Ok(Array::ready_strided(
                shape, dtype, device, buffer, strides, offset, origin,
            ));
        }
        let buffer = transfer::upload(
            device,
            "from_ndarray",
            device_bytes(array.len(), dtype),
            origin,
            |dst| write_elements(dst, array.iter().copied()),
        )?;
        Ok(Array::ready(shape, dtype, device, buffer, origin))
    }

    /// Evaluate and read back into an owned ndarray array of standard
    /// layout, of element type `T` and dimension `D` (`Ix1`, `Ix2`, ...,
    /// or `IxDyn` for any number of axes).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `D` has a fixed number of axes that
    /// is not [`Array::ndim`]; [`Error::ReadDType`] (naming `to_ndarray`
    /// and the fixes) when `T` is not this array's dtype; otherwise as
    /// [`Array::to_vec`].
    pub fn to_ndarray<T: Element, D: Dimension>(&self) -> Result<ndarray::Array<T, D>> {
        if let Some(n) = D::NDIM
            && n != self.ndim()
        {
            return Err(Error::InvalidArgument(format!(
                "to_ndarray: the array has {} dimensions (shape {:?}), the requested type {n}",
                self.ndim(),
                self.shape()
            )));
        }
        self.check_read::<T>("to_ndarray")?;
        let values = self.to_vec::<T>()?;
        ndarray::Array::from_shape_vec(IxDyn(self.shape()), values)
            .and_then(|a| a.into_dimensionality::<D>())
            .map_err(|e| Error::Internal(format!("to_ndarray: {e}")))
    }
}
