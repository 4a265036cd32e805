//! Elementwise kernels: binary ops, strided copy, fill.

use super::{BINARY, COPY, Dispatch, FILL, Kernel, PARAMS_WORDS, Spec, grid};
use crate::device::DeviceInner;
use crate::{DType, Error, Result};

/// A kernel operand: a buffer read through element strides from `offset`.
pub(crate) struct Operand<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub strides: &'a [usize],
    pub offset: usize,
}

/// Maximum rank the strided kernels take.
pub(crate) const MAX_NDIM: usize = 8;

/// The binary ops the `binary` kernel is specialised for, with the WGSL
/// expression of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
}

impl BinaryOp {
    #[cfg(test)]
    /// Every op, so that the specialisation space (see [`specs`]) follows
    /// the enum.
    pub(crate) const ALL: [BinaryOp; 6] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "subtract",
            BinaryOp::Mul => "multiply",
            BinaryOp::Div => "divide",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
        }
    }

    fn wgsl(self) -> &'static str {
        match self {
            BinaryOp::Add => "a + b",
            BinaryOp::Sub => "a - b",
            BinaryOp::Mul => "a * b",
            BinaryOp::Div => "a / b",
            BinaryOp::Maximum => "max(a, b)",
            BinaryOp::Minimum => "min(a, b)",
        }
    }
}

/// The WGSL scalar type the arithmetic kernels use for `dtype`, if they
/// take it at all (whatever the adapter's features).
fn arith_scalar(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::F32 => Some("f32"),
        DType::I32 => Some("i32"),
        DType::U32 => Some("u32"),
        DType::F16 => Some("f16"),
        DType::BF16 | DType::Bool => None,
    }
}

/// The WGSL scalar type of a dtype the arithmetic kernels take.
pub(crate) fn wgsl_type(dev: &DeviceInner, op: &'static str, dtype: DType) -> Result<&'static str> {
    match arith_scalar(dtype) {
        Some("f16") if !dev.features.contains(wgpu::Features::SHADER_F16) => {
            Err(Error::MissingFeature {
                op,
                feature: "SHADER_F16",
            })
        }
        Some(ty) => Ok(ty),
        None => Err(Error::DType {
            op,
            dtype,
            other: None,
        }),
    }
}

fn is_contiguous(shape: &[usize], strides: &[usize]) -> bool {
    let mut acc = 1;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d != 1 && s != acc {
            return false;
        }
        acc *= d;
    }
    true
}

fn put(v: &mut [u32; PARAMS_WORDS], base: usize, xs: &[usize]) -> Result<()> {
    for (i, &x) in xs.iter().enumerate() {
        v[base + i] = u32::try_from(x).map_err(|_| Error::TooLarge {
            op: "strided kernel",
            bytes: x as u64,
            max: u32::MAX as u64,
        })?;
    }
    Ok(())
}

/// Parameters of the strided family (see wgsl/strided.wgsl), and whether
/// the CONTIGUOUS specialisation applies.
fn strided_params(
    n: usize,
    shape: &[usize],
    ops: &[&Operand<'_>],
    extra: u32,
) -> Result<([u32; PARAMS_WORDS], bool)> {
    if shape.len() > MAX_NDIM {
        return Err(Error::InvalidArgument(format!(
            "arrays of more than {MAX_NDIM} dimensions are not supported (got {})",
            shape.len()
        )));
    }
    let mut p = [0u32; PARAMS_WORDS];
    put(&mut p, 0, &[n, shape.len()])?;
    put(&mut p, 4, shape)?;
    let mut contiguous = true;
    for (k, o) in ops.iter().enumerate() {
        put(&mut p, 2 + k, &[o.offset])?;
        put(&mut p, 12 + 8 * k, o.strides)?;
        contiguous &= is_contiguous(shape, o.strides);
    }
    p[28] = extra;
    Ok((p, contiguous))
}

fn flag(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// Which operand of a binary op, if any, was donated to the output: its
/// buffer *is* `out`, dense and of the output's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Donated {
    None,
    Lhs,
    Rhs,
}

impl Donated {
    #[cfg(test)]
    const ALL: [Donated; 3] = [Donated::None, Donated::Lhs, Donated::Rhs];

    /// The `{{LHS}}` and `{{RHS}}` substitutions: a donated operand is read
    /// through `out`.
    fn operands(self) -> (&'static str, &'static str) {
        match self {
            Donated::None => ("lhs", "rhs"),
            Donated::Lhs => ("out", "rhs"),
            Donated::Rhs => ("lhs", "out"),
        }
    }
}

fn binary_spec(
    op: BinaryOp,
    ty: &str,
    contiguous: bool,
    donated: Donated,
) -> (Spec, &'static Kernel) {
    let (lhs, rhs) = donated.operands();
    BINARY.spec(&[
        ("T", ty),
        ("OP", op.wgsl()),
        ("CONTIGUOUS", flag(contiguous)),
        ("LHS", lhs),
        ("RHS", rhs),
    ])
}

fn copy_spec(elem_bytes: usize, contiguous: bool) -> (Spec, &'static Kernel) {
    COPY.spec(&[
        ("ELEM_BYTES", &elem_bytes.to_string()),
        ("CONTIGUOUS", flag(contiguous)),
    ])
}

fn fill_spec() -> (Spec, &'static Kernel) {
    FILL.spec(&[("CONTIGUOUS", "true")])
}

#[cfg(test)]
/// Every specialisation the dispatch functions below can ask for, built by
/// the same `*_spec` functions from the same tables (ops, dtypes, flags).
pub(crate) fn specs() -> Vec<(Spec, &'static Kernel)> {
    let mut out = Vec::new();
    for op in BinaryOp::ALL {
        for ty in DType::ALL.into_iter().filter_map(arith_scalar) {
            for contiguous in [true, false] {
                for donated in Donated::ALL {
                    out.push(binary_spec(op, ty, contiguous, donated));
                }
            }
        }
    }
    let mut widths: Vec<usize> = DType::ALL.iter().map(|d| d.size_in_bytes()).collect();
    widths.sort_unstable();
    widths.dedup();
    for elem_bytes in widths {
        for contiguous in [true, false] {
            out.push(copy_spec(elem_bytes, contiguous));
        }
    }
    out.push(fill_spec());
    out
}

/// `out = op(a, b)` over `shape` (a and b already broadcast by their strides).
#[allow(clippy::too_many_arguments)]
pub(crate) fn binary(
    dev: &DeviceInner,
    op: BinaryOp,
    dtype: DType,
    shape: &[usize],
    a: &Operand<'_>,
    b: &Operand<'_>,
    out: &wgpu::Buffer,
    donated: Donated,
) -> Result<Option<Dispatch>> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(None);
    }
    let ty = wgsl_type(dev, op.name(), dtype)?;
    let (params, contiguous) = strided_params(n, shape, &[a, b], 0)?;
    // A donated operand is read through `out`; its binding takes the other
    // operand's buffer (read-only twice is allowed).
    let (bound_a, bound_b) = match donated {
        Donated::None => (a.buffer, b.buffer),
        Donated::Lhs => (b.buffer, b.buffer),
        Donated::Rhs => (a.buffer, a.buffer),
    };
    let (spec, kernel) = binary_spec(op, ty, contiguous, donated);
    Ok(Some(Dispatch {
        pipeline: dev.kernels.get(kernel, &spec)?,
        params,
        buffers: vec![bound_a.clone(), bound_b.clone(), out.clone()],
        workgroups: grid(n as u64, dev.limits.max_compute_workgroups_per_dimension)?,
    }))
}

/// Copy the strided `src` (of `shape`, elements of `elem_bytes` bytes) into
/// the dense `out`.
pub(crate) fn copy(
    dev: &DeviceInner,
    elem_bytes: usize,
    shape: &[usize],
    src: &Operand<'_>,
    out: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(None);
    }
    let (params, contiguous) = strided_params(n, shape, &[src], 0)?;
    let (spec, kernel) = copy_spec(elem_bytes, contiguous);
    let threads = if elem_bytes == 2 { n.div_ceil(2) } else { n };
    Ok(Some(Dispatch {
        pipeline: dev.kernels.get(kernel, &spec)?,
        params,
        buffers: vec![src.buffer.clone(), out.clone()],
        workgroups: grid(
            threads as u64,
            dev.limits.max_compute_workgroups_per_dimension,
        )?,
    }))
}

/// Write the 32-bit `word` into the first `words` words of `out`.
pub(crate) fn fill(
    dev: &DeviceInner,
    words: usize,
    word: u32,
    out: &wgpu::Buffer,
) -> Result<Option<Dispatch>> {
    if words == 0 {
        return Ok(None);
    }
    let (params, _) = strided_params(words, &[words], &[], word)?;
    let (spec, kernel) = fill_spec();
    Ok(Some(Dispatch {
        pipeline: dev.kernels.get(kernel, &spec)?,
        params,
        buffers: vec![out.clone()],
        workgroups: grid(
            words as u64,
            dev.limits.max_compute_workgroups_per_dimension,
        )?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity() {
        assert!(is_contiguous(&[2, 3], &[3, 1]));
        assert!(!is_contiguous(&[2, 3], &[1, 2]));
        assert!(is_contiguous(&[1, 3], &[99, 1]));
        assert!(!is_contiguous(&[2, 3], &[0, 1]));
    }
}
