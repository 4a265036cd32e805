//! The reference kernel (`wgsl/matmul_naive.wgsl`): one thread per output,
//! f32, no tiling. No product runs it; `crate::baseline` times it as the
//! plain way to compare the GEMM families with.

use super::common::operand::batch_strides;
use super::common::params::put_operand;
use super::common::prelude::family_kernel;
use crate::Result;
use crate::kernels::{Context, Dispatch, Kernel, Operand, Params, Spec};

/// The one-thread-per-output kernel (`wgsl/matmul_naive.wgsl`).
/// (No prelude: it binds A, B and the output, and has its own parameters.)
pub(crate) static MATMUL_NAIVE: Kernel = family_kernel(
    "matmul_naive",
    &[],
    include_str!("../../../wgsl/matmul_naive.wgsl"),
);

/// The reference kernel (wgsl/matmul_naive.wgsl, one thread per output, f32):
/// `c[batch, m, n] (+)= a[batch, m, k0..k] @ b[batch, k0..k, n]` into dense
/// `c`, adding to `c` when `accumulate`. Only `crate::baseline` uses it, as
/// the plain way to compare the GEMM with.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_naive(
    cx: &Context,
    batch_shape: [usize; 4],
    m: usize,
    n: usize,
    k: std::ops::Range<usize>,
    accumulate: bool,
    a: &Operand<'_>,
    b: &Operand<'_>,
    c: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let total = batch_shape.iter().product::<usize>() * m * n;
    if total == 0 {
        return Ok(None);
    }
    let mut p = Params::new("matmul");
    p.put(0, [m, n, k.end, total].map(|x| x as i64))?;
    p.put(10, [k.start as i64, accumulate as i64])?;
    for (base, op) in [(4, a), (7, b)] {
        put_operand(&mut p, base, op)?;
    }
    p.put(12, batch_shape.iter().map(|&x| x as i64))?;
    p.put(16, batch_strides(a).iter().map(|&x| x as i64))?;
    p.put(20, batch_strides(b).iter().map(|&x| x as i64))?;
    let (spec, kernel) = spec();
    Ok(Some(Dispatch {
        windows: Vec::new(),
        pipeline: cx.cache.get(kernel, &spec)?,
        params: p.words(),
        buffers: vec![a.buffer.clone(), b.buffer.clone(), c.clone()],
        workgroups: cx.grid(total as u64)?,
    }))
}

/// The kernel's one specialisation.
pub(crate) fn spec() -> (Spec, &'static Kernel) {
    MATMUL_NAIVE.spec(&[])
}
