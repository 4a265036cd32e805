//! The GEMM's parameter block (`Params` in `wgsl/gemm_common.wgsl`): sizes,
//! each operand's offset and strides, `alpha` and `beta`, the batch shape
//! and strides, the workgroup offset of a split grid; a fused epilogue's or
//! a family's own words follow at [`GEMM_WORDS`].

use super::operand::{Gemm, batch_strides, col_stride, row_stride};
use crate::Result;
use crate::kernels::{Operand, Params};

/// Words of the GEMM's own parameter block (`Params` in
/// `wgsl/gemm_common.wgsl` up to `group0`); an epilogue's words follow.
pub(crate) const GEMM_WORDS: usize = 36;

/// Store `op`'s offset, row stride and column stride at words `base ..
/// base + 3` of `p` (the layout both `gemm_common.wgsl` and
/// `matmul_naive.wgsl` read).
///
/// # Errors
/// [`crate::Error::TooLarge`] for values past `u32` (strides past `i32`).
pub(crate) fn put_operand(p: &mut Params, base: usize, op: &Operand<'_>) -> Result<()> {
    p.put(
        base,
        [
            op.offset as i64,
            row_stride(op) as i64,
            col_stride(op) as i64,
        ],
    )
}

/// The GEMM's parameter block for `g` (the families' `Params` in
/// `wgsl/gemm_common.wgsl`), `extra` words after its own [`GEMM_WORDS`]
/// (a fused epilogue's, the uniform family's windows).
///
/// # Errors
/// [`crate::Error::TooLarge`] for sizes, strides or offsets past `u32`, or
/// an output of more than `u32::MAX` elements.
pub(crate) fn gemm_params(g: &Gemm<'_>, extra: Vec<u32>) -> Result<Params> {
    let (m, n, k) = (g.m, g.n, g.k);
    let batch: usize = g.batch_shape.iter().product();
    let zero = Operand {
        buffer: g.out,
        dtype: g.dtype,
        offset: 0,
        strides: vec![0; 6],
    };
    let c = g.bias.as_ref().unwrap_or(&zero);
    let mut p = Params::with_words("matmul", GEMM_WORDS + extra.len());
    p.put_bits(GEMM_WORDS, extra);
    p.put(0, [m as i64, n as i64, k as i64, 0])?;
    for (base, op) in [(4, &g.a), (7, &g.b), (10, c)] {
        put_operand(&mut p, base, op)?;
    }
    p.put_bits(13, [g.alpha.to_bits(), g.beta.to_bits()]);
    p.put(16, g.batch_shape.iter().map(|&x| x as i64))?;
    let strides = batch_strides(&g.a)
        .iter()
        .chain(batch_strides(&g.b))
        .chain(batch_strides(c));
    p.put(20, strides.map(|&x| x as i64))?;
    if batch * m * n > u32::MAX as usize {
        // The kernel's flat output index is a u32.
        return Err(crate::Error::TooLarge {
            op: "matmul",
            limit: crate::Limit::KernelIndex,
            value: (batch * m * n) as u64,
            max: u32::MAX as u64,
        });
    }
    Ok(p)
}
