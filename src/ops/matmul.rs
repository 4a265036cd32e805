//! Matrix multiplication with NumPy semantics, and `addmm`.
//!
//! Both run the tiled GEMM of `wgsl/gemm.wgsl` (see `src/kernels/gemm/`
//! for how a tile and the operand load modes are chosen): each thread keeps
//! a register block of the output, reads A and B through their strides (vec4
//! loads where the layout is aligned), accumulates in f32, and applies
//! `alpha`, `beta * c` and the output conversion in its epilogue.

use crate::graph::Primitive;
use crate::graph::primitive::MAX_MATMUL_BATCH_DIMS as MAX_BATCH_DIMS;
use crate::ops::shape::Slice;
use crate::shape::broadcast_shapes;
use crate::{Array, DType, Error, Result, Scalar};

/// Shapes of a checked matmul: operands as matrices, the kernel's output
/// shape `[batch.., m, n]`, and the NumPy result shape.
struct Plan {
    a: Array,
    b: Array,
    out: Vec<usize>,
    result: Vec<usize>,
}

/// The shape checks of `x @ y` (devices first, then shapes; no dtype or
/// feature checks: [`check_dtypes`] follows once every shape is checked).
fn plan(op: &'static str, x: &Array, y: &Array) -> Result<Plan> {
    super::same_device(op, x, y)?;
    for a in [x, y] {
        if a.ndim() == 0 {
            return Err(Error::InvalidArgument(format!(
                "{op}: an operand is 0-dimensional (shape []); matmul needs at least one axis"
            )));
        }
    }
    let mismatch = || Error::ShapeMismatch {
        op,
        lhs: x.shape().to_vec(),
        rhs: y.shape().to_vec(),
    };
    let a_shape: Vec<usize> = if x.ndim() == 1 {
        vec![1, x.shape()[0]]
    } else {
        x.shape().to_vec()
    };
    let b_shape: Vec<usize> = if y.ndim() == 1 {
        vec![y.shape()[0], 1]
    } else {
        y.shape().to_vec()
    };
    let (ar, br) = (a_shape.len(), b_shape.len());
    if a_shape[ar - 1] != b_shape[br - 2] {
        return Err(mismatch());
    }
    let batch =
        broadcast_shapes(op, &a_shape[..ar - 2], &b_shape[..br - 2]).map_err(|_| mismatch())?;
    if batch.len() > MAX_BATCH_DIMS {
        return Err(Error::InvalidArgument(format!(
            "{op}: at most {MAX_BATCH_DIMS} batch dimensions, got {} (shapes {:?} and {:?})",
            batch.len(),
            x.shape(),
            y.shape()
        )));
    }
    let mut out = batch.clone();
    out.extend([a_shape[ar - 2], b_shape[br - 1]]);
    // Drop the dimensions NumPy adds for 1-D operands.
    let mut result = batch;
    if x.ndim() > 1 {
        result.push(out[out.len() - 2]);
    }
    if y.ndim() > 1 {
        result.push(out[out.len() - 1]);
    }
    Ok(Plan {
        a: x.reshape_to(&a_shape),
        b: y.reshape_to(&b_shape),
        out,
        result,
    })
}

/// The dtype checks of a matmul whose shapes are checked: every operand
/// f32, f16, bf16, f64 or an integer, all of one dtype (integers of any
/// widths together: the exact path, [`exact_dtype`]); then the device's
/// features (f16 needs `SHADER_F16`; an f64 array exists only where the
/// device has f64).
fn check_dtypes(op: &'static str, operands: &[&Array]) -> Result<()> {
    // Block formats: quantized_matmul.
    super::refuse_blocks(op, operands)?;
    let first = operands[0].dtype();
    for a in operands {
        if a.dtype() == DType::Bool {
            return Err(Error::DType {
                op,
                dtype: a.dtype(),
                other: None,
            });
        }
    }
    for a in operands {
        if a.dtype() != first && !(a.dtype().is_integer() && first.is_integer()) {
            return Err(Error::DType {
                op,
                dtype: first,
                other: Some(a.dtype()),
            });
        }
    }
    if first == DType::F16
        && !operands[0]
            .device()
            .features()
            .contains(wgpu::Features::SHADER_F16)
    {
        return Err(Error::MissingFeature {
            op,
            feature: "SHADER_F16",
        });
    }
    Ok(())
}

/// The longest reduction dimension one matmul dispatch takes. llvmpipe
/// (Mesa's software driver, our CI adapter) stops a shader invocation after
/// 65535 loop iterations in total, and the matrix-vector tile loops once per
/// four elements of K; longer K is split into chunks accumulated through the
/// fused bias (`acc = a_i @ b_i + acc`), one dispatch per chunk, no copies.
pub(crate) const K_CHUNK: usize = 32768;

/// One matmul node `a @ b (+ bias)` with output shape `out`.
#[track_caller]
fn matmul_node(
    a: Array,
    b: Array,
    primitive: Primitive,
    bias: Option<Array>,
    out: &[usize],
) -> Array {
    let (device, dtype) = (a.device().clone(), a.dtype());
    let mut inputs = vec![a, b];
    inputs.extend(bias);
    Array::from_node(&device, primitive, inputs, vec![(out.to_vec(), dtype)])
        .pop()
        .expect("one output")
}

/// `x` sliced to `start..end` along `axis` (the others whole).
#[track_caller]
fn along(x: &Array, axis: usize, start: usize, end: usize) -> Array {
    let mut sl = vec![Slice::FULL; axis + 1];
    sl[axis] = Slice::range(start as isize, end as isize);
    x.slice(&sl).expect("in range")
}

// Helpers, not closures, throughout: every node records the caller's
// location (`#[track_caller]` does not pass into closures).
#[track_caller]
fn record(p: Plan, primitive: Primitive, bias: Option<Array>) -> Array {
    let (ar, br) = (p.a.ndim(), p.b.ndim());
    let k = p.a.shape()[ar - 1];
    let c = if k <= K_CHUNK {
        matmul_node(p.a.clone(), p.b.clone(), primitive, bias, &p.out)
    } else {
        // Chunks go through the tiled GEMM (the reference kernel takes no bias).
        let Primitive::Matmul { alpha, beta, .. } = primitive else {
            unreachable!("record takes matmul primitives")
        };
        let mut acc: Option<Array> = None;
        for start in (0..k).step_by(K_CHUNK) {
            let end = (start + K_CHUNK).min(k);
            let (a, b) = (
                along(&p.a, ar - 1, start, end),
                along(&p.b, br - 2, start, end),
            );
            acc = Some(match acc {
                // The first chunk carries the caller's bias and beta.
                None => matmul_node(
                    a,
                    b,
                    Primitive::Matmul { alpha, beta },
                    bias.clone(),
                    &p.out,
                ),
                Some(prev) => {
                    let primitive = Primitive::Matmul { alpha, beta: 1.0 };
                    matmul_node(a, b, primitive, Some(prev), &p.out)
                }
            });
        }
        acc.expect("k > 0")
    };
    c.reshape_to(&p.result)
}

/// The dtype an exact matmul accumulates and returns in, if `a @ b` takes
/// that path: f64 for f64, a 32-bit integer for integers (signed when
/// either operand is), as [`Array::sum`] accumulates.
fn exact_dtype(a: DType, b: DType) -> Option<DType> {
    match (a, b) {
        (DType::F64, DType::F64) => Some(DType::F64),
        (x, y) if x.is_integer() && y.is_integer() => {
            let t = crate::promote_types(x, y);
            Some(if t.is_signed_integer() {
                DType::I32
            } else {
                DType::U32
            })
        }
        _ => None,
    }
}

/// Bytes of one chunk's products in [`exact_matmul`].
const EXACT_CHUNK_BYTES: usize = 32 << 20;

/// `a @ b` for integer and f64 operands, exactly in `acc` (i32 or u32
/// wrapping, as NumPy's int32 matmul; f64): the products `a[.., m, k, 1] *
/// b[.., 1, k, n]` of a chunk of `k` (at most [`EXACT_CHUNK_BYTES`] of
/// them) summed along `k` by the reduction kernel, the chunks added. Work
/// and traffic are those of the naive triple loop: a reference path for
/// quantised weights and scientific code, not the tiled GEMM.
#[track_caller]
fn exact_matmul(p: Plan, acc: DType) -> Result<Array> {
    let (a, b) = (
        p.a.astype(acc)?.expand_dims(-1)?,
        p.b.astype(acc)?.expand_dims(-3)?,
    );
    let k = p.a.shape()[p.a.ndim() - 1];
    let per_k: usize = p.out.iter().product::<usize>() * acc.size_in_bytes();
    let chunk = (EXACT_CHUNK_BYTES / per_k.max(1)).max(1);
    let mut total: Option<Array> = None;
    for start in (0..k).step_by(chunk) {
        let end = (start + chunk).min(k);
        let part = along(&a, a.ndim() - 2, start, end)
            .multiply(along(&b, b.ndim() - 2, start, end))?
            .sum(-2, false)?;
        total = Some(match total {
            None => part,
            Some(t) => t.add(&part)?,
        });
    }
    let c = match total {
        Some(c) => c,
        None => Array::full(&p.out, 0.0, acc, a.device())?,
    };
    Ok(c.reshape_to(&p.result))
}

impl Array {
    /// NumPy `matmul`: `[..., m, k] @ [..., k, n] -> [..., m, n]`.
    ///
    /// A 1-D left operand is a row `[1, k]` and a 1-D right operand a column
    /// `[k, 1]`; the added dimension is removed from the result. Batch
    /// dimensions (up to four) broadcast. Operands are read through their
    /// strides, so strided or broadcast views are not copied.
    ///
    /// Dtypes: both operands f32, f16 (needs `SHADER_F16`) or bf16 (any
    /// adapter: bf16 is unpacked from `u32` words). Products are accumulated
    /// in f32 whatever the input dtype; the result has the input dtype (f16
    /// and bf16 results are rounded once, from the f32 sum).
    ///
    /// Algorithm: a register-blocked tiled GEMM (`wgsl/gemm.wgsl`) whose tile
    /// is chosen by shape: a matrix-vector tile for `m == 1`, small tiles for
    /// small or skinny outputs, large register blocks otherwise.
    ///
    /// Integer operands (any of i8 to u32, mixed widths allowed: int8
    /// quantised weights) multiply and accumulate in 32 bits, wrapping as
    /// NumPy's int32 matmul does: the result is i32 when either operand is
    /// signed, else u32. f64 operands (where the adapter has `SHADER_F64`)
    /// accumulate in f64. Both take an exact reference path (products of a
    /// chunk of `k` summed by the reduction kernel, no f32 anywhere), with
    /// the work of the naive triple loop.
    ///
    /// # Errors
    /// In this order, as every op: [`Error::DeviceMismatch`]; shapes:
    /// [`Error::InvalidArgument`] for 0-d operands or more than four batch
    /// dimensions, [`Error::ShapeMismatch`] when the inner dimensions differ
    /// or batch dimensions do not broadcast; dtypes: [`Error::DType`] for
    /// bool, mixed float dtypes or a float with an integer; features:
    /// [`Error::MissingFeature`] for f16 without `SHADER_F16`. So an empty
    /// f32 @ f16 is a dtype error on every backend. Last, [`Error::TooLarge`]
    /// when the result passes the adapter's largest storage binding.
    #[track_caller]
    pub fn matmul(&self, other: &Array) -> Result<Array> {
        let p = plan("matmul", self, other)?;
        check_dtypes("matmul", &[self, other])?;
        let exact = exact_dtype(self.dtype(), other.dtype());
        let out_dtype = exact.unwrap_or(self.dtype());
        self.device().check_array("matmul", &p.out, out_dtype)?;
        if let Some(acc) = exact {
            return exact_matmul(p, acc);
        }
        Ok(record(
            p,
            Primitive::Matmul {
                alpha: 1.0,
                beta: 0.0,
            },
            None,
        ))
    }

    /// `beta * self + alpha * (a @ b)` (PyTorch `addmm`, generalised to
    /// NumPy matmul shapes), with `self` the bias `c`.
    ///
    /// `a @ b` follows [`Array::matmul`] (1-D, 2-D and batched operands,
    /// dtypes and accumulation); `c` must have the same dtype and broadcast
    /// to the result's shape: a bias vector `[n]`, a column `[m, 1]`, a full
    /// `[.., m, n]`. The bias is added in the GEMM's epilogue, in f32, before
    /// the one rounding to the output dtype: no separate kernel, no
    /// intermediate array. The result has the shape of `a @ b`.
    ///
    /// `alpha` and `beta` are any [`Scalar`] (`2.0`, `0.5f32`, `1`),
    /// applied in f32.
    ///
    /// # Errors
    /// As [`Array::matmul`], in its order; [`Error::ShapeMismatch`] when `c`
    /// does not broadcast to the result (with the shapes); [`Error::OpDType`]
    /// for integer and f64 operands `a` and `b`; [`Error::DType`] when `c`'s
    /// dtype differs (with the dtypes).
    #[track_caller]
    pub fn addmm(
        &self,
        a: &Array,
        b: &Array,
        alpha: impl Scalar,
        beta: impl Scalar,
    ) -> Result<Array> {
        super::same_device("addmm", self, a)?;
        let p = plan("addmm", a, b)?;
        let mismatch = || Error::ShapeMismatch {
            op: "addmm",
            lhs: self.shape().to_vec(),
            rhs: p.result.clone(),
        };
        if self.ndim() > p.result.len() {
            return Err(mismatch());
        }
        // Bring c to the kernel's output rank: left-pad to the result's rank,
        // then put back the unit dimensions a 1-D operand removed.
        let mut c_shape = vec![1; p.result.len() - self.ndim()];
        c_shape.extend_from_slice(self.shape());
        if a.ndim() == 1 {
            let at = c_shape.len() - usize::from(b.ndim() > 1);
            c_shape.insert(at, 1);
        }
        if b.ndim() == 1 {
            c_shape.push(1);
        }
        match broadcast_shapes("addmm", &c_shape, &p.out) {
            Ok(s) if s == p.out => {}
            _ => return Err(mismatch()),
        }
        if exact_dtype(a.dtype(), b.dtype()).is_some() {
            return Err(Error::OpDType {
                op: "addmm",
                dtype: a.dtype(),
                takes: "float32, float16 and bfloat16 operands (integer and float64 \
                        operands: matmul, then add)",
            });
        }
        check_dtypes("addmm", &[a, b, self])?;
        self.device().check_array("addmm", &p.out, a.dtype())?;
        let (alpha, beta) = (alpha.value().to_f64() as f32, beta.value().to_f64() as f32);
        let c = self.reshape_to(&c_shape);
        Ok(record(p, Primitive::Matmul { alpha, beta }, Some(c)))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Array, DType, Device};

    fn data(len: usize, seed: u32) -> Vec<f32> {
        (0..len)
            .map(|i| {
                ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) as f32
                    / (1u32 << 24) as f32
                    - 0.5
            })
            .collect()
    }

    /// The relative Frobenius error of `got` against `want`.
    fn rel_error(got: &[f32], want: &[f64]) -> f64 {
        let num: f64 = got
            .iter()
            .zip(want)
            .map(|(g, w)| (*g as f64 - w).powi(2))
            .sum();
        let den: f64 = want.iter().map(|w| w * w).sum();
        (num / den).sqrt()
    }

    /// Transposed and offset operands (every load mode of the GEMM: vec4
    /// along the inner or the outer dimension, and scalar) against a dense
    /// host product, made with the public `slice`, `reshape` and `transpose`.
    #[test]
    fn strided_operands_need_no_copy() {
        let device = Device::new_default().expect("a GPU adapter");
        for (m, k, n) in [(8, 12, 16), (13, 7, 9), (64, 36, 130), (1, 16, 20)] {
            let x = data(m * k, 1); // A, row-major
            let y = data(k * n, 2); // B, row-major
            let mut want = vec![0.0f64; m * n];
            for i in 0..m {
                for j in 0..n {
                    want[i * n + j] = (0..k)
                        .map(|t| x[i * k + t] as f64 * y[t * n + j] as f64)
                        .sum();
                }
            }
            // A^T and B^T stored row-major with 4 elements of padding in front.
            let mut xt = vec![9.0f32; 4 + m * k];
            for i in 0..m {
                for t in 0..k {
                    xt[4 + t * m + i] = x[i * k + t];
                }
            }
            let mut yt = vec![9.0f32; 4 + k * n];
            for t in 0..k {
                for j in 0..n {
                    yt[4 + j * k + t] = y[t * n + j];
                }
            }
            let at = Array::from_slice(&xt, &[xt.len()], &device).unwrap();
            let bt = Array::from_slice(&yt, &[yt.len()], &device).unwrap();
            let a_dense = Array::from_slice(&x, &[m, k], &device).unwrap();
            let b_dense = Array::from_slice(&y, &[k, n], &device).unwrap();
            // Column-major views of A and B, at offset 4 (vec4-aligned) and
            // at offset 4 of a buffer read with odd strides (scalar).
            let col_major = |t: &Array, shape: [usize; 2]| {
                let view = t.slice(&[(4..).into()]).unwrap();
                view.reshape(&shape).unwrap().transpose()
            };
            let (a_cm, b_cm) = (col_major(&at, [k, m]), col_major(&bt, [n, k]));
            for (a, b) in [(&a_cm, &b_cm), (&a_cm, &b_dense), (&a_dense, &b_cm)] {
                let got = a.matmul(b).unwrap().to_vec::<f32>().unwrap();
                assert_eq!(got.len(), m * n);
                let e = rel_error(&got, &want);
                assert!(e < 1e-5, "{m}x{k}x{n}: {e}");
            }
            // An unaligned offset forces scalar loads.
            let mut xs = vec![9.0f32; 1];
            xs.extend_from_slice(&x);
            let a_off = Array::from_slice(&xs, &[xs.len()], &device)
                .unwrap()
                .slice(&[(1..).into()])
                .unwrap()
                .reshape(&[m, k])
                .unwrap();
            let got = a_off.matmul(&b_cm).unwrap().to_vec::<f32>().unwrap();
            let e = rel_error(&got, &want);
            assert!(e < 1e-5, "{m}x{k}x{n} offset: {e}");
            assert_eq!(a_off.dtype(), DType::F32);
        }
    }
}
