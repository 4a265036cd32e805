//! Graph-building operations, one file per family. Each checks its inputs
//! (shapes, dtypes, devices) and records a node; nothing runs until eval.

pub mod bits;
pub mod checks;
pub mod concat;
pub mod creation;
pub mod elementwise;
pub mod fast;
pub mod grid;
pub mod linalg;
pub mod matmul;
pub mod nn;
pub mod quant;
pub mod reduce;
pub mod scan;
pub mod scatter;
pub mod shape;
pub mod sort;
pub mod topk;
pub mod writes;

use crate::{Array, DType, Error, Result};

/// [`Error::DeviceMismatch`] naming `op` and both devices unless `a` and
/// `b` live on one device.
pub(crate) fn same_device(op: &'static str, a: &Array, b: &Array) -> Result<()> {
    if a.device() != b.device() {
        return Err(Error::device_mismatch(op, a.device(), b.device()));
    }
    Ok(())
}

/// The dtypes the scan, sort and scatter kernels take: their accumulators,
/// order keys and atomics are 32-bit, so the packed i8/u8/i16/u16 and f64
/// are refused (cast with `astype`).
pub(crate) const WORD_DTYPES: [DType; 6] = {
    use DType::*;
    [F32, F16, BF16, I32, U32, Bool]
};

/// [`Error::OpDType`] naming `op` for the first of `arrays` of a block
/// format (`DType::is_quantized`): for the ops that take element dtypes
/// only (most of them; see [`crate::ops::quant`]).
pub(crate) fn refuse_blocks(op: &'static str, arrays: &[&Array]) -> Result<()> {
    match arrays.iter().find(|a| a.dtype().is_quantized()) {
        Some(a) => Err(Error::OpDType {
            op,
            dtype: a.dtype(),
            takes: crate::graph::eval::TAKES_ELEMENTS,
        }),
        None => Ok(()),
    }
}

/// [`Error::OpDType`] naming `op` for f64: the kernels that move single
/// elements with 32-bit order keys and stores (kernels/bits.rs: sort)
/// take every dtype of at most 32 bits, the packed ones included.
pub(crate) fn check_32bit_dtype(op: &'static str, dtype: DType) -> Result<()> {
    match dtype {
        d if d.is_quantized() => Err(Error::OpDType {
            op,
            dtype,
            takes: crate::graph::eval::TAKES_ELEMENTS,
        }),
        DType::F64 => Err(Error::OpDType {
            op,
            dtype,
            takes: "arrays of every dtype but float64 (cast it with astype)",
        }),
        _ => Ok(()),
    }
}

/// [`Error::OpDType`] naming `op` unless `dtype` is one of [`WORD_DTYPES`].
pub(crate) fn check_word_dtype(op: &'static str, dtype: DType) -> Result<()> {
    match dtype {
        d if WORD_DTYPES.contains(&d) => Ok(()),
        _ => Err(Error::OpDType {
            op,
            dtype,
            takes: "float32, float16, bfloat16, int32, uint32 and bool arrays \
                    (cast int8, uint8, int16, uint16 and float64 with astype)",
        }),
    }
}
