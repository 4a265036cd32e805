//! WGSL snippets on element bits shared by the kernels that move single
//! elements (top-k, scan, sort, scatter): order keys and element stores.

use super::elementwise::element_bits;
use crate::DType;

/// Statements of `fn key(i: u32) -> u32`: the order key of element `i` of
/// the `array<u32>` named `array` holding `dtype`. Unsigned order of keys
/// is NumPy's ascending sort order: floats by value with -0 == +0 and
/// every NaN above +inf (wgsl/order.wgsl `float_key`), signed integers
/// with the sign bit of their width flipped, unsigned integers and bool as
/// they are. Not for f64 (64-bit keys): callers refuse it.
pub(crate) fn order_key(dtype: DType, array: &str) -> String {
    let raw = element_bits(dtype, array, "i");
    let key = match dtype {
        DType::F32 => "float_key(b, 0x80000000u, 0x7f800000u)",
        DType::F16 => "float_key(b, 0x8000u, 0x7c00u)",
        DType::BF16 => "float_key(b, 0x8000u, 0x7f80u)",
        DType::I32 => "b ^ 0x80000000u",
        DType::I16 => "b ^ 0x8000u",
        DType::I8 => "b ^ 0x80u",
        DType::U32 | DType::U16 | DType::U8 | DType::Bool => "b",
        DType::F64 | DType::Q4_0 | DType::Q4_1 | DType::Q8_0 | DType::Q4K | DType::Q6K => {
            unreachable!("order keys are 32-bit; f64 and block formats are refused by the op")
        }
    };
    format!("    let b = {raw};\n    return {key};")
}

/// The element type of an output array of `dtype` written one element at
/// a time, and statements of `fn store(q: u32, v: u32)` writing bits `v`
/// to element `q` of it (named `array`). A 2-byte (1-byte) element shares
/// its word with one (three) neighbours another thread may write, so the
/// word is an `atomic<u32>` and the half (byte) is cleared and set with
/// `atomicAnd` and `atomicOr`, which commute with the neighbours'. Only
/// for kernels that write each element once; not for f64.
pub(crate) fn store_element(dtype: DType, array: &str) -> (&'static str, String) {
    let (shift, mask) = match dtype.size_in_bytes() {
        4 => return ("u32", format!("    {array}[q] = v;")),
        2 => (1, "0xffffu"),
        1 => (2, "0xffu"),
        _ => unreachable!("element stores are 32-bit at most; f64 is refused by the op"),
    };
    let per = 1u32 << shift;
    let width = 32 / per;
    (
        "atomic<u32>",
        format!(
            "    let w = q >> {shift}u;\n    let sh = (q & {}u) * {width}u;\n    \
             atomicAnd(&{array}[w], ~({mask} << sh));\n    \
             atomicOr(&{array}[w], (v & {mask}) << sh);",
            per - 1
        ),
    )
}
