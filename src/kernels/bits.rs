//! WGSL snippets on element bits shared by the kernels that move single
//! elements (top-k, scan, sort, scatter): order keys and element stores.

use super::elementwise::element_bits;
use crate::DType;

/// Statements of `fn key(i: u32) -> u32`: the order key of element `i` of
/// the `array<u32>` named `array` holding `dtype`. Unsigned order of keys
/// is NumPy's ascending sort order: floats by value with -0 == +0 and
/// every NaN above +inf (wgsl/order.wgsl `float_key`), i32 with the sign
/// bit flipped, u32 and bool as they are.
pub(crate) fn order_key(dtype: DType, array: &str) -> String {
    let raw = element_bits(dtype, array);
    let key = match dtype {
        DType::F32 => "float_key(b, 0x80000000u, 0x7f800000u)",
        DType::F16 => "float_key(b, 0x8000u, 0x7c00u)",
        DType::BF16 => "float_key(b, 0x8000u, 0x7f80u)",
        DType::I32 => "b ^ 0x80000000u",
        DType::U32 | DType::Bool => "b",
    };
    format!("    let b = {raw};\n    return {key};")
}

/// The element type of an output array of `dtype` written one element at
/// a time, and statements of `fn store(q: u32, v: u32)` writing bits `v`
/// to element `q` of it (named `array`). A 2-byte element shares its word
/// with a neighbour another thread may write, so the word is an
/// `atomic<u32>` and the half is cleared and set with `atomicAnd` and
/// `atomicOr`, which commute with the neighbour's. Only for kernels that
/// write each element once.
pub(crate) fn store_element(dtype: DType, array: &str) -> (&'static str, String) {
    if dtype.size_in_bytes() == 2 {
        (
            "atomic<u32>",
            format!(
                "    let w = q >> 1u;\n    let sh = (q & 1u) * 16u;\n    \
                 atomicAnd(&{array}[w], ~(0xffffu << sh));\n    \
                 atomicOr(&{array}[w], (v & 0xffffu) << sh);"
            ),
        )
    } else {
        ("u32", format!("    {array}[q] = v;"))
    }
}
