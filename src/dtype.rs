//! Element types: [`DType`] on the device, [`Element`] on the host.

use std::fmt;

/// The element type of an [`crate::Array`].
///
/// | dtype | host type | bytes on the device |
/// |-------|-----------|---------------------|
/// | `F32` | `f32` | 4 |
/// | `F16` | [`half::f16`] | 2 (arithmetic needs `SHADER_F16`) |
/// | `BF16`| [`half::bf16`] | 2 (unpacked to f32 in kernels) |
/// | `I32` | `i32` | 4 |
/// | `U32` | `u32` | 4 |
/// | `Bool`| `bool` | 4 (one `u32`, 0 or 1: WGSL has no byte type) |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16: the top 16 bits of an f32.
    BF16,
    /// Two's-complement 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Boolean, stored as a `u32` that is 0 or 1.
    Bool,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 6] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::Bool,
    ];

    /// Bytes one element takes in a device buffer.
    pub const fn size_in_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 | DType::Bool => 4,
        }
    }

    /// The NumPy-style name: `float32`, `float16`, `bfloat16`, `int32`, `uint32`, `bool`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I32 => "int32",
            DType::U32 => "uint32",
            DType::Bool => "bool",
        }
    }

    /// Whether the dtype is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A host type that maps to a [`DType`]: `f32`, [`half::f16`], [`half::bf16`],
/// `i32`, `u32` and `bool`.
///
/// Conversion to and from device bytes is a plain copy (bytemuck) for every
/// type but `bool`, which is widened to a `u32` on the device.
pub trait Element: Copy + Send + Sync + fmt::Debug + PartialEq + 'static + sealed::Sealed {
    /// The matching device dtype.
    const DTYPE: DType;

    /// The value as an f64 (for printing and for `full`).
    fn to_f64(self) -> f64;

    /// The nearest value of this type to `v` (round to nearest even for the
    /// float types, saturating for integers, `v != 0` for bool).
    fn from_f64(v: f64) -> Self;

    /// Device bytes of `values`, in the layout of [`DType::size_in_bytes`].
    fn to_device_bytes(values: &[Self]) -> Vec<u8>;

    /// Values from device bytes; `bytes.len()` is a multiple of the element size.
    fn from_device_bytes(bytes: &[u8]) -> Vec<Self>;

    /// The bytes of `values` as they lie in host memory, without a copy:
    /// the device layout for every type but `bool`, which is one byte per
    /// element (0 or 1), as in safetensors' `BOOL`.
    fn as_host_bytes(values: &[Self]) -> &[u8];

    /// Fill `dst` from device bytes without allocating;
    /// `bytes.len() == dst.len() * Self::DTYPE.size_in_bytes()`.
    ///
    /// # Panics
    /// When the lengths disagree (a bug in the caller, never bad data).
    fn copy_from_device_bytes(bytes: &[u8], dst: &mut [Self]);
}

macro_rules! pod_element {
    ($t:ty, $dtype:expr, $to:expr, $from:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $dtype;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            fn to_device_bytes(values: &[Self]) -> Vec<u8> {
                bytemuck::cast_slice(values).to_vec()
            }
            fn from_device_bytes(bytes: &[u8]) -> Vec<Self> {
                // The read-back buffer is not necessarily aligned for Self.
                bytemuck::pod_collect_to_vec(bytes)
            }
            fn as_host_bytes(values: &[Self]) -> &[u8] {
                bytemuck::cast_slice(values)
            }
            fn copy_from_device_bytes(bytes: &[u8], dst: &mut [Self]) {
                bytemuck::cast_slice_mut::<Self, u8>(dst).copy_from_slice(bytes);
            }
        }
    };
}

pod_element!(f32, DType::F32, |x: f32| x as f64, |v: f64| v as f32);
pod_element!(
    half::f16,
    DType::F16,
    |x: half::f16| x.to_f64(),
    half::f16::from_f64
);
pod_element!(
    half::bf16,
    DType::BF16,
    |x: half::bf16| x.to_f64(),
    half::bf16::from_f64
);
pod_element!(i32, DType::I32, |x: i32| x as f64, |v: f64| v as i32);
pod_element!(u32, DType::U32, |x: u32| x as f64, |v: f64| v as u32);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        if self { 1.0 } else { 0.0 }
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_device_bytes(values: &[Self]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&b| (b as u32).to_ne_bytes())
            .collect()
    }
    fn from_device_bytes(bytes: &[u8]) -> Vec<Self> {
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) != 0)
            .collect()
    }
    fn as_host_bytes(values: &[Self]) -> &[u8] {
        bytemuck::cast_slice(values)
    }
    fn copy_from_device_bytes(bytes: &[u8], dst: &mut [Self]) {
        assert_eq!(bytes.len(), dst.len() * 4, "bool read-back length");
        for (d, c) in dst.iter_mut().zip(bytes.chunks_exact(4)) {
            *d = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) != 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bool_round_trips_through_u32() {
        let v = [true, false, true];
        let bytes = bool::to_device_bytes(&v);
        assert_eq!(bytes.len(), 12);
        assert_eq!(bool::from_device_bytes(&bytes), v);
        let mut back = [false; 3];
        bool::copy_from_device_bytes(&bytes, &mut back);
        assert_eq!(back, v);
        assert_eq!(bool::as_host_bytes(&v), &[1, 0, 1]);
    }

    #[test]
    fn sizes() {
        for d in DType::ALL {
            assert!(d.size_in_bytes() == 2 || d.size_in_bytes() == 4, "{d}");
        }
        assert_eq!(half::bf16::from_f64(1.0).to_f64(), 1.0);
    }
}
