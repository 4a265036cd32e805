//! Element types: [`DType`] on the device, [`Element`] on the host.

use std::fmt;

use wgpu::WriteOnly;

/// The element type of an [`crate::Array`].
///
/// | dtype | host type | bytes on the device |
/// |-------|-----------|---------------------|
/// | `F32` | `f32` | 4 |
/// | `F16` | [`half::f16`] | 2 (decoded to f32 in kernels) |
/// | `BF16`| [`half::bf16`] | 2 (decoded to f32 in kernels) |
/// | `I32` | `i32` (and `i64`, narrowed with a range check) | 4 |
/// | `U32` | `u32` (and `u64`, narrowed with a range check) | 4 |
/// | `Bool`| `bool` | 4 (one `u32`, 0 or 1) |
/// | `I8`  | `i8` | 1 (four to a 32-bit word) |
/// | `U8`  | `u8` | 1 (four to a 32-bit word) |
/// | `I16` | `i16` | 2 (two to a word) |
/// | `U16` | `u16` | 2 (two to a word) |
/// | `F64` | `f64` | 8 (needs `SHADER_F64` and `SHADER_INT64`) |
/// | `Q4_0`, `Q4_1`, `Q8_0`, `Q4K`, `Q6K` | none (packed blocks) | 18, 20, 34, 144, 210 per block of 32, 32, 32, 256, 256 elements |
///
/// Every buffer is an array of 32-bit words; the dtypes of 1 and 2 bytes
/// are packed (element `i` of a 1-byte dtype is byte `i % 4` of word
/// `i / 4`, little-endian, as on the host), so memory and bandwidth are
/// what the dtype says. Kernels widen each element to a 32-bit compute type
/// (f32 for every float dtype but f64, i32 for signed, u32 for unsigned
/// integers and bool) and round the result back to its dtype: integer
/// results wrap around to their width as in NumPy (`int8(127) + 1 ==
/// -128`). f64 computes in f64 and needs the adapter's `SHADER_F64` (Vulkan
/// on most GPUs and on lavapipe; not GL, Metal or DX12 in wgpu 30), and
/// `SHADER_INT64` to move its bits; without them every op that would make
/// an f64 array returns [`crate::Error::MissingFeature`], never a silent
/// downcast.
///
/// # Block formats
///
/// `Q4_0`, `Q4_1`, `Q8_0`, `Q4K` and `Q6K` are ggml's (llama.cpp's GGUF
/// files') quantized block formats, stored exactly as in the file: an
/// array of shape `[..., k]` holds each row of `k` elements as `k /
/// block_size()` blocks of [`DType::size_in_bytes`] bytes each (ggml's
/// `blck_size` and `type_size`), rows one after another with no padding,
/// so a row need not start on a 4-byte boundary (Q4_0 blocks are 18
/// bytes). Such an array has no element type on the host: it comes from a
/// GGUF file ([`crate::io::GgufFile`]) or from its bytes
/// ([`Array::from_blocks`](crate::Array::from_blocks)), and computes through
/// [`crate::dequantize`] and [`crate::quantized_matmul`]. Views that keep
/// the last axis whole work on it (slices and reshapes of the leading
/// axes, `broadcast_to` of new leading axes), and so do `contiguous`,
/// `concatenate`, `split` and `take` along a leading axis (moving whole
/// rows of blocks); every other op returns [`crate::Error::OpDType`]
/// naming itself. [`DType::ALL`] lists only the element dtypes;
/// [`DType::BLOCK_FORMATS`] lists these.
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
    /// Two's-complement 8-bit integer, packed four to a word.
    I8,
    /// Unsigned 8-bit integer, packed four to a word.
    U8,
    /// Two's-complement 16-bit integer, packed two to a word.
    I16,
    /// Unsigned 16-bit integer, packed two to a word.
    U16,
    /// IEEE 754 binary64 (needs `SHADER_F64` and `SHADER_INT64`).
    F64,
    /// ggml's Q4_0: blocks of 32 elements in 18 bytes, an f16 scale `d`
    /// and 32 4-bit quants `q`; element = `(q - 8) * d`.
    Q4_0,
    /// ggml's Q4_1: blocks of 32 elements in 20 bytes, f16 `d` and `m`
    /// and 32 4-bit quants; element = `q * d + m`.
    Q4_1,
    /// ggml's Q8_0: blocks of 32 elements in 34 bytes, f16 `d` and 32
    /// signed 8-bit quants; element = `q * d`.
    Q8_0,
    /// ggml's Q4_K: super-blocks of 256 elements in 144 bytes, f16 `d`
    /// and `dmin`, eight 6-bit scales and mins, 256 4-bit quants; element
    /// = `d * sc * q - dmin * m` per sub-block of 32.
    Q4K,
    /// ggml's Q6_K: super-blocks of 256 elements in 210 bytes, 6-bit
    /// quants, sixteen 8-bit scales and an f16 `d`; element = `d * sc *
    /// (q - 32)` per sub-block of 16.
    Q6K,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 11] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::U32,
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::F64,
    ];

    /// Every block format (ggml's quantized types), in declaration order.
    pub const BLOCK_FORMATS: [DType; 5] = [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q8_0,
        DType::Q4K,
        DType::Q6K,
    ];

    /// Bytes one element takes in a device buffer; for a block format,
    /// bytes one block takes (ggml's `type_size`: 18, 20, 34, 144, 210).
    /// [`DType::nbytes`] counts bytes for a number of elements in either
    /// case.
    pub const fn size_in_bytes(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 | DType::Bool => 4,
            DType::F64 => 8,
            DType::Q4_0 => 18,
            DType::Q4_1 => 20,
            DType::Q8_0 => 34,
            DType::Q4K => 144,
            DType::Q6K => 210,
        }
    }

    /// Elements one block holds (ggml's `blck_size`): 32 for Q4_0, Q4_1
    /// and Q8_0, 256 for Q4_K and Q6_K, 1 for every element dtype.
    pub const fn block_size(self) -> usize {
        match self {
            DType::Q4_0 | DType::Q4_1 | DType::Q8_0 => 32,
            DType::Q4K | DType::Q6K => 256,
            _ => 1,
        }
    }

    /// Whether this is a block format ([`DType::BLOCK_FORMATS`]).
    pub const fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes `elements` elements take in a device buffer (before the
    /// padding to a whole 4-byte word): `elements * size_in_bytes()`, or
    /// for a block format `elements / block_size() * size_in_bytes()`
    /// (ggml's `ggml_row_size`; `elements` a multiple of the block size).
    /// Saturates at `usize::MAX`.
    pub const fn nbytes(self, elements: usize) -> usize {
        (elements / self.block_size()).saturating_mul(self.size_in_bytes())
    }

    /// The NumPy-style name: `float32`, `float16`, `bfloat16`, `int32`,
    /// `uint32`, `bool`, `int8`, `uint8`, `int16`, `uint16`, `float64`;
    /// ggml's for the block formats: `q4_0`, `q4_1`, `q8_0`, `q4_K`,
    /// `q6_K`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I32 => "int32",
            DType::U32 => "uint32",
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::F64 => "float64",
            DType::Q4_0 => "q4_0",
            DType::Q4_1 => "q4_1",
            DType::Q8_0 => "q8_0",
            DType::Q4K => "q4_K",
            DType::Q6K => "q6_K",
        }
    }

    /// Whether the dtype is a floating-point type (a block format is not:
    /// see [`DType::is_quantized`]).
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// Whether the dtype is an integer type (bool is not).
    pub const fn is_integer(self) -> bool {
        matches!(
            self,
            DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32 | DType::U32
        )
    }

    /// Whether the dtype is a signed integer type.
    pub const fn is_signed_integer(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32)
    }

    /// The smallest and largest value of an integer dtype (bool: 0 and 1),
    /// `None` for floats.
    pub const fn integer_range(self) -> Option<(i64, i64)> {
        Some(match self {
            DType::I8 => (i8::MIN as i64, i8::MAX as i64),
            DType::U8 => (0, u8::MAX as i64),
            DType::I16 => (i16::MIN as i64, i16::MAX as i64),
            DType::U16 => (0, u16::MAX as i64),
            DType::I32 => (i32::MIN as i64, i32::MAX as i64),
            DType::U32 => (0, u32::MAX as i64),
            DType::Bool => (0, 1),
            _ => return None,
        })
    }

    /// The wgpu feature an adapter needs for arrays of this dtype, if any
    /// (f64: `SHADER_F64` for the arithmetic and `SHADER_INT64` to move its
    /// bits through 32-bit words).
    pub(crate) fn missing_feature(self, features: wgpu::Features) -> Option<&'static str> {
        if self != DType::F64 {
            None
        } else if !features.contains(wgpu::Features::SHADER_F64) {
            Some("SHADER_F64")
        } else if !features.contains(wgpu::Features::SHADER_INT64) {
            Some("SHADER_INT64")
        } else {
            None
        }
    }

    /// The bits of `value` as this dtype, in the low [`DType::size_in_bytes`]
    /// bytes: floats rounded to nearest even, integers truncated toward zero
    /// and saturated at the dtype's limits (NaN to 0), bool `value != 0`
    /// (as [`Element::from_f64`]). A block format has no element bits: 0
    /// (the ops that make constants refuse block formats before asking).
    pub(crate) fn bits_of(self, value: f64) -> u64 {
        match self {
            DType::F32 => (value as f32).to_bits() as u64,
            DType::F16 => half::f16::from_f64(value).to_bits() as u64,
            DType::BF16 => half::bf16::from_f64(value).to_bits() as u64,
            DType::F64 => value.to_bits(),
            DType::I32 => (value as i32) as u32 as u64,
            DType::U32 => (value as u32) as u64,
            DType::I8 => (value as i8) as u8 as u64,
            DType::U8 => (value as u8) as u64,
            DType::I16 => (value as i16) as u16 as u64,
            DType::U16 => (value as u16) as u64,
            DType::Bool => (value != 0.0) as u64,
            DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => 0,
        }
    }

    /// The value of element bits `bits` (as [`DType::bits_of`] gives them).
    #[cfg(test)]
    pub(crate) fn value_of(self, bits: u64) -> f64 {
        match self {
            DType::F32 => f32::from_bits(bits as u32) as f64,
            DType::F16 => half::f16::from_bits(bits as u16).to_f64(),
            DType::BF16 => half::bf16::from_bits(bits as u16).to_f64(),
            DType::F64 => f64::from_bits(bits),
            DType::I32 => bits as u32 as i32 as f64,
            DType::U32 | DType::Bool => bits as u32 as f64,
            DType::I8 => bits as u8 as i8 as f64,
            DType::U8 => bits as u8 as f64,
            DType::I16 => bits as u16 as i16 as f64,
            DType::U16 => bits as u16 as f64,
            DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => f64::NAN,
        }
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
/// `f64`, `i32`, `u32`, `i16`, `u16`, `i8`, `u8` and `bool`; and `i64` and
/// `u64`, which map to `I32` and `U32` (PyTorch's index dtype is int64):
/// uploads check that every value fits (else [`crate::Error::OutOfRange`]
/// names the first that does not) and read-backs widen.
///
/// Conversion to and from device bytes is a plain copy (bytemuck) for every
/// type but `bool`, which is widened to a `u32` on the device, and `i64` and
/// `u64`, which are narrowed to 32 bits.
pub trait Element: Copy + Send + Sync + fmt::Debug + PartialEq + 'static + sealed::Sealed {
    /// The matching device dtype.
    const DTYPE: DType;

    /// The value as an f64 (for printing and for `full`).
    fn to_f64(self) -> f64;

    /// The nearest value of this type to `v` (round to nearest even for the
    /// float types, saturating for integers, `v != 0` for bool).
    fn from_f64(v: f64) -> Self;

    /// Device bytes of `values`, in the layout of [`DType::size_in_bytes`]
    /// (`i64` and `u64` truncated to 32 bits: check the range first).
    fn to_device_bytes(values: &[Self]) -> Vec<u8>;

    /// Values from device bytes; `bytes.len()` is a multiple of the element size.
    fn from_device_bytes(bytes: &[u8]) -> Vec<Self>;

    /// The bytes of `values` as they lie in host memory, without a copy:
    /// the device layout for every type but `bool`, which is one byte per
    /// element (0 or 1), as in safetensors' `BOOL`, and `i64` and `u64`
    /// (eight bytes each).
    fn as_host_bytes(values: &[Self]) -> &[u8];

    /// Fill `dst` from device bytes without allocating;
    /// `bytes.len() == dst.len() * Self::DTYPE.size_in_bytes()`.
    ///
    /// # Panics
    /// When the lengths disagree (a bug in the caller, never bad data).
    fn copy_from_device_bytes(bytes: &[u8], dst: &mut [Self]);

    /// The first of `values` that [`Element::DTYPE`] cannot hold, as its
    /// index and value: only `i64` and `u64` values can fail to fit.
    fn first_out_of_range(values: &[Self]) -> Option<(usize, i128)> {
        let _ = values;
        None
    }

    /// Write `values` into the start of `dst` in the device layout and zero
    /// the rest of `dst` (the padding to a whole word).
    ///
    /// # Panics
    /// When the device bytes of `values` do not fit `dst` (a bug in the caller).
    #[doc(hidden)]
    fn write_device(values: &[Self], dst: WriteOnly<'_, [u8]>) {
        crate::transfer::write_host_bytes(dst, Self::as_host_bytes(values), Self::DTYPE)
    }
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
pod_element!(f64, DType::F64, |x: f64| x, |v: f64| v);
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
pod_element!(i16, DType::I16, |x: i16| x as f64, |v: f64| v as i16);
pod_element!(u16, DType::U16, |x: u16| x as f64, |v: f64| v as u16);
pod_element!(i8, DType::I8, |x: i8| x as f64, |v: f64| v as i8);
pod_element!(u8, DType::U8, |x: u8| x as f64, |v: f64| v as u8);

/// `i64` and `u64`: host types of `I32` and `U32`, narrowed on upload
/// (after [`Element::first_out_of_range`]) and widened on read-back.
macro_rules! wide_element {
    ($t:ty, $narrow:ty, $dtype:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $dtype;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                // Saturating at the device type's limits: the result fits.
                v as $narrow as $t
            }
            fn to_device_bytes(values: &[Self]) -> Vec<u8> {
                values
                    .iter()
                    .flat_map(|&x| (x as $narrow).to_le_bytes())
                    .collect()
            }
            fn from_device_bytes(bytes: &[u8]) -> Vec<Self> {
                bytes
                    .chunks_exact(4)
                    .map(|c| <$narrow>::from_le_bytes([c[0], c[1], c[2], c[3]]) as $t)
                    .collect()
            }
            fn as_host_bytes(values: &[Self]) -> &[u8] {
                bytemuck::cast_slice(values)
            }
            fn copy_from_device_bytes(bytes: &[u8], dst: &mut [Self]) {
                assert_eq!(bytes.len(), dst.len() * 4, "read-back length");
                for (d, c) in dst.iter_mut().zip(bytes.chunks_exact(4)) {
                    *d = <$narrow>::from_le_bytes([c[0], c[1], c[2], c[3]]) as $t;
                }
            }
            fn first_out_of_range(values: &[Self]) -> Option<(usize, i128)> {
                values
                    .iter()
                    .position(|&x| <$narrow>::try_from(x).is_err())
                    .map(|i| (i, values[i] as i128))
            }
            fn write_device(values: &[Self], dst: WriteOnly<'_, [u8]>) {
                let (head, mut tail) = dst.split_at(values.len() * 4);
                let (words, _) = head.into_chunks::<4>();
                words.write_iter(values.iter().map(|&x| (x as $narrow).to_le_bytes()));
                tail.fill(0);
            }
        }
    };
}

wide_element!(i64, i32, DType::I32);
wide_element!(u64, u32, DType::U32);

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
            assert!([1, 2, 4, 8].contains(&d.size_in_bytes()), "{d}");
        }
        assert_eq!(half::bf16::from_f64(1.0).to_f64(), 1.0);
    }

    /// ggml's `blck_size` and `type_size` (ggml-common.h's block structs).
    #[test]
    fn block_formats_have_ggml_sizes() {
        let want = [(32, 18), (32, 20), (32, 34), (256, 144), (256, 210)];
        for (d, (elems, bytes)) in DType::BLOCK_FORMATS.into_iter().zip(want) {
            assert!(d.is_quantized() && !d.is_float() && !d.is_integer(), "{d}");
            assert_eq!((d.block_size(), d.size_in_bytes()), (elems, bytes), "{d}");
            assert_eq!(d.nbytes(3 * elems), 3 * bytes, "{d}");
            assert!(!DType::ALL.contains(&d));
        }
        for d in DType::ALL {
            assert!(!d.is_quantized());
            assert_eq!(d.nbytes(5), 5 * d.size_in_bytes());
        }
    }

    #[test]
    fn wide_integers_narrow_with_a_range_check() {
        let v = [0i64, -5, i32::MAX as i64, i32::MIN as i64];
        assert_eq!(i64::first_out_of_range(&v), None);
        let bytes = i64::to_device_bytes(&v);
        assert_eq!(bytes.len(), 16);
        assert_eq!(i64::from_device_bytes(&bytes), v);
        assert_eq!(
            i64::first_out_of_range(&[1, i32::MAX as i64 + 1, -1 << 40]),
            Some((1, i32::MAX as i128 + 1))
        );
        assert_eq!(u64::first_out_of_range(&[7, 1 << 32]), Some((1, 1 << 32)));
        let mut out = [0xAAu8; 12];
        u64::write_device(&[1, 2], WriteOnly::from_mut(&mut out[..]));
        assert_eq!(out, [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]);
        let mut back = [0u64; 2];
        u64::copy_from_device_bytes(&out[..8], &mut back);
        assert_eq!(back, [1, 2]);
    }

    #[test]
    fn element_bits_round_trip_every_dtype() {
        for d in DType::ALL {
            for v in [0.0, 1.0, -3.0, 100.0, 300.0, -300.0] {
                let back = d.value_of(d.bits_of(v));
                let want = match d {
                    DType::Bool => (v != 0.0) as u8 as f64,
                    _ => match d.integer_range() {
                        Some((lo, hi)) => v.clamp(lo as f64, hi as f64),
                        None => v,
                    },
                };
                assert_eq!(back, want, "{d} {v}");
                if d.size_in_bytes() < 8 {
                    assert!(d.bits_of(v) >> (8 * d.size_in_bytes()) == 0, "{d} {v}");
                }
            }
        }
    }
}
