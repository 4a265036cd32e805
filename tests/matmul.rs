//! Matmul and addmm against f64 references on random data.
//!
//! Error bounds (relative Frobenius error against an f64 product of the
//! *same* rounded inputs, so input rounding is not counted):
//! - f32: 1e-5. The kernel accumulates in f32; with inputs in [-1, 1) the
//!   measured error is about 1e-7 (sqrt(k) * 2^-24 growth for random signs).
//! - f16: 2e-3. The f32 sum is rounded once to f16 (unit roundoff 2^-11 =
//!   4.9e-4, relative to each element, so at most that in the Frobenius
//!   norm); the accumulation adds ~1e-7. 2e-3 leaves 4x headroom.
//! - bf16: 1.6e-2. Same argument with unit roundoff 2^-8 = 3.9e-3.
//!
//! Outputs land in a pool poisoned with NaN first, so an element the kernel
//! leaves unwritten fails the finiteness check in `rel_frobenius`.
//!
//! Also: empty M, N and K, view operands, and K long enough to cross
//! llvmpipe's 65535-iteration loop limit.
//!
//! A test whose comment starts with a severity (HIGH, MEDIUM, LOW) pins a
//! bug an adversarial review found; the comment says what went wrong and on
//! which backend. All are fixed.

mod common;

use common::arrays::{self, f};
use common::{R, Rng, assert_empty, device, is_gl, matmul_ref, poison_pool, rel_frobenius};
use half::{bf16, f16};
use wgarray::{Array, DType, Device, Error, Slice};

const F32_TOL: f64 = 1e-5;
const F16_TOL: f64 = 2e-3;
const BF16_TOL: f64 = 1.6e-2;

/// Random `[batch, m, k] @ [batch, k, n]` in f32 with its reference.
fn check_f32(device: &Device, rng: &mut Rng, batch: usize, m: usize, k: usize, n: usize) {
    let x = rng.vec_f32(batch * m * k);
    let y = rng.vec_f32(batch * k * n);
    let a = Array::from_slice(&x, &[batch, m, k], device).unwrap();
    let b = Array::from_slice(&y, &[batch, k, n], device).unwrap();
    let c = a.matmul(&b).unwrap();
    assert_eq!(c.shape(), &[batch, m, n]);
    assert_eq!(c.dtype(), DType::F32);
    let got = c.to_vec::<f32>().unwrap();
    let err = rel_frobenius(&got, &matmul_ref(&x, &y, batch, m, k, n));
    assert!(err < F32_TOL, "{batch}x{m}x{k}x{n}: error {err:e}");
}

#[test]
fn f32_odd_sizes_every_shape_class() {
    let device = device();
    poison_pool(&device, 1 << 20);
    let mut rng = Rng::new(1);
    let sizes = [1, 7, 33];
    for &m in &sizes {
        for &k in &sizes {
            for &n in &sizes {
                check_f32(&device, &mut rng, 1, m, k, n);
            }
        }
    }
    // 1025 in each position (the others small, to keep the f64 reference
    // fast), plus sizes around the large tile (64 x 128).
    for (m, k, n) in [
        (1025, 7, 33),
        (33, 1025, 7),
        (7, 33, 1025),
        (1, 1025, 33),
        (1, 33, 1025),
        (65, 64, 129),
        (128, 36, 256),
        (130, 19, 131),
    ] {
        check_f32(&device, &mut rng, 1, m, k, n);
    }
}

#[test]
fn f32_outer_product_4097x1x4097() {
    let device = device();
    poison_pool(&device, 1 << 20);
    let mut rng = Rng::new(2);
    check_f32(&device, &mut rng, 1, 4097, 1, 4097);
}

#[test]
fn f32_matrix_vector_path() {
    // m = 1 (decode steps): the matrix-vector tile, aligned and not.
    let device = device();
    poison_pool(&device, 1 << 20);
    let mut rng = Rng::new(3);
    for (k, n) in [(384, 1152), (1024, 3072), (383, 1151), (5, 3)] {
        check_f32(&device, &mut rng, 1, 1, k, n);
    }
    // Batched decode: [b, 1, k] @ [b, k, n].
    check_f32(&device, &mut rng, 3, 1, 64, 96);
}

#[test]
fn f32_square_512() {
    let device = device();
    poison_pool(&device, 1 << 20);
    let mut rng = Rng::new(4);
    check_f32(&device, &mut rng, 1, 256, 256, 256);
    check_f32(&device, &mut rng, 2, 130, 100, 70);
}

#[test]
fn matmul_matches_the_reference() {
    let d = device();
    let mut rng = Rng::new(3);
    for &(b, m, k, n) in &[
        (1, 1, 1, 1),
        (1, 7, 33, 5),
        (1, 33, 7, 65),
        (3, 17, 9, 33),
        (1, 64, 1025, 3),
    ] {
        poison_pool(&d, b * m * n);
        let x = rng.vec_f32(b * m * k);
        let y = rng.vec_f32(b * k * n);
        let (xs, ys): (Vec<usize>, Vec<usize>) = if b == 1 {
            (vec![m, k], vec![k, n])
        } else {
            (vec![b, m, k], vec![b, k, n])
        };
        let a = Array::from_slice(&x, &xs, &d).unwrap();
        let w = Array::from_slice(&y, &ys, &d).unwrap();
        let c = a.matmul(&w).unwrap();
        let want = matmul_ref(&x, &y, b, m, k, n);
        let err = rel_frobenius(&c.to_vec::<f32>().unwrap(), &want);
        assert!(err < 1e-5, "b={b} m={m} k={k} n={n}: rel err {err}");
    }
}

#[test]
fn matmul_broadcasts_batches_and_takes_vectors() {
    let d = device();
    let mut rng = Rng::new(4);
    let (m, k, n) = (5, 7, 3);
    let x = rng.vec_f32(2 * m * k);
    let y = rng.vec_f32(k * n);
    let a = Array::from_slice(&x, &[2, m, k], &d).unwrap();
    let w = Array::from_slice(&y, &[k, n], &d).unwrap();
    let c = a.matmul(&w).unwrap();
    assert_eq!(c.shape(), &[2, m, n]);
    let mut yy = y.clone();
    yy.extend_from_slice(&y);
    let want = matmul_ref(&x, &yy, 2, m, k, n);
    assert!(rel_frobenius(&c.to_vec::<f32>().unwrap(), &want) < 1e-5);
    // 1-D @ 2-D and 2-D @ 1-D
    let v = Array::from_slice(&x[..k], &[k], &d).unwrap();
    let r = v.matmul(&w).unwrap();
    assert_eq!(r.shape(), &[n]);
    assert!(
        rel_frobenius(
            &r.to_vec::<f32>().unwrap(),
            &matmul_ref(&x[..k], &y, 1, 1, k, n)
        ) < 1e-5
    );
    let col = Array::from_slice(&y[..n], &[n], &d).unwrap();
    let a2 = Array::from_slice(&x[..m * n], &[m, n], &d).unwrap();
    let r = a2.matmul(&col).unwrap();
    assert_eq!(r.shape(), &[m]);
    assert!(
        rel_frobenius(
            &r.to_vec::<f32>().unwrap(),
            &matmul_ref(&x[..m * n], &y[..n], 1, m, n, 1)
        ) < 1e-5
    );
    let dot = v.matmul(&v).unwrap();
    assert_eq!(dot.shape(), &[] as &[usize]);
    let want: f64 = x[..k].iter().map(|&t| t as f64 * t as f64).sum();
    assert!((dot.item::<f32>().unwrap() as f64 - want).abs() < 1e-5);
}

#[test]
fn batched_with_broadcast_batch_dimensions() {
    let device = device();
    poison_pool(&device, 1 << 20);
    let mut rng = Rng::new(5);
    let (m, k, n) = (9, 13, 11);
    // a: [2, 3, m, k], b: [3, k, n] -> [2, 3, m, n]; b is shared by the 2.
    let x = rng.vec_f32(2 * 3 * m * k);
    let y = rng.vec_f32(3 * k * n);
    let a = Array::from_slice(&x, &[2, 3, m, k], &device).unwrap();
    let b = Array::from_slice(&y, &[3, k, n], &device).unwrap();
    let got = a.matmul(&b).unwrap();
    assert_eq!(got.shape(), &[2, 3, m, n]);
    let got = got.to_vec::<f32>().unwrap();
    let mut yy = y.clone();
    yy.extend_from_slice(&y);
    let err = rel_frobenius(&got, &matmul_ref(&x, &yy, 6, m, k, n));
    assert!(err < F32_TOL, "error {err:e}");
    // a: [2, 1, m, k] against b: [3, k, n]: a broadcasts along the 3.
    let x = rng.vec_f32(2 * m * k);
    let a = Array::from_slice(&x, &[2, 1, m, k], &device).unwrap();
    let got = a.matmul(&b).unwrap();
    assert_eq!(got.shape(), &[2, 3, m, n]);
    let got = got.to_vec::<f32>().unwrap();
    let mut xx = Vec::new();
    for bi in 0..2 {
        for _ in 0..3 {
            xx.extend_from_slice(&x[bi * m * k..(bi + 1) * m * k]);
        }
    }
    let err = rel_frobenius(&got, &matmul_ref(&xx, &yy, 6, m, k, n));
    assert!(err < F32_TOL, "error {err:e}");
    // A 2-D matrix against a batch: [m, k] @ [4, k, n].
    let x = rng.vec_f32(m * k);
    let y = rng.vec_f32(4 * k * n);
    let a = Array::from_slice(&x, &[m, k], &device).unwrap();
    let b = Array::from_slice(&y, &[4, k, n], &device).unwrap();
    let got = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
    let xx: Vec<f32> = (0..4).flat_map(|_| x.iter().copied()).collect();
    let err = rel_frobenius(&got, &matmul_ref(&xx, &y, 4, m, k, n));
    assert!(err < F32_TOL, "error {err:e}");
}

#[test]
fn one_dimensional_operands() {
    let device = device();
    poison_pool(&device, 1 << 16);
    let mut rng = Rng::new(6);
    let (m, k, n) = (5, 37, 6);
    let v = rng.vec_f32(k);
    let w = rng.vec_f32(k * n);
    let mt = rng.vec_f32(m * k);
    let vv = Array::from_slice(&v, &[k], &device).unwrap();
    let ww = Array::from_slice(&w, &[k, n], &device).unwrap();
    let mm = Array::from_slice(&mt, &[m, k], &device).unwrap();
    // vector @ matrix -> [n]
    let got = vv.matmul(&ww).unwrap();
    assert_eq!(got.shape(), &[n]);
    let err = rel_frobenius(
        &got.to_vec::<f32>().unwrap(),
        &matmul_ref(&v, &w, 1, 1, k, n),
    );
    assert!(err < F32_TOL);
    // matrix @ vector -> [m]
    let got = mm.matmul(&vv).unwrap();
    assert_eq!(got.shape(), &[m]);
    let err = rel_frobenius(
        &got.to_vec::<f32>().unwrap(),
        &matmul_ref(&mt, &v, 1, m, k, 1),
    );
    assert!(err < F32_TOL);
    // vector @ vector -> []
    let got = vv.matmul(&vv).unwrap();
    assert_eq!(got.shape(), &[] as &[usize]);
    let want: f64 = v.iter().map(|&x| x as f64 * x as f64).sum();
    assert!((got.item::<f32>().unwrap() as f64 - want).abs() < 1e-5 * want);
    // batch @ vector -> [2, m]
    let bt = rng.vec_f32(2 * m * k);
    let bb = Array::from_slice(&bt, &[2, m, k], &device).unwrap();
    let got = bb.matmul(&vv).unwrap();
    assert_eq!(got.shape(), &[2, m]);
    let vv2: Vec<f32> = v.iter().chain(&v).copied().collect();
    let err = rel_frobenius(
        &got.to_vec::<f32>().unwrap(),
        &matmul_ref(&bt, &vv2, 2, m, k, 1),
    );
    assert!(err < F32_TOL);
}

/// Rounded inputs as f32 (what the device sees) and their device arrays.
/// `x` rounded to `dtype` (f16, bf16, or f32 unchanged), as the device
/// will see it.
fn round_to(dtype: DType, x: &[f32]) -> Vec<f32> {
    x.iter()
        .map(|&v| arrays::round_to(v as f64, dtype) as f32)
        .collect()
}

/// An array of `dtype` (f16, bf16 or f32) holding `x` rounded to it.
fn upload(device: &Device, dtype: DType, x: &[f32], shape: &[usize]) -> Array {
    let wide: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    arrays::of_dtype(device, &wide, shape, dtype)
}

fn half_inputs(
    device: &Device,
    rng: &mut Rng,
    dtype: DType,
    len: usize,
    shape: &[usize],
) -> (Vec<f32>, Array) {
    let x = rng.vec_f32(len);
    (round_to(dtype, &x), upload(device, dtype, &x, shape))
}

fn check_half(device: &Device, dtype: DType, tol: f64) {
    poison_pool(device, 1 << 20);
    let mut rng = Rng::new(7);
    for (batch, m, k, n) in [
        (1, 1, 7, 1),
        (1, 7, 33, 5),
        (1, 33, 7, 33),
        (2, 65, 40, 130),
        (1, 1, 384, 1152),
        (1, 128, 64, 256),
    ] {
        let (x, a) = half_inputs(device, &mut rng, dtype, batch * m * k, &[batch, m, k]);
        let (y, b) = half_inputs(device, &mut rng, dtype, batch * k * n, &[batch, k, n]);
        let c = a.matmul(&b).unwrap();
        assert_eq!(c.dtype(), dtype);
        let got: Vec<f32> = c.to_f64_vec().unwrap().iter().map(|&v| v as f32).collect();
        let err = rel_frobenius(&got, &matmul_ref(&x, &y, batch, m, k, n));
        assert!(err < tol, "{dtype} {batch}x{m}x{k}x{n}: error {err:e}");
    }
}

#[test]
fn f16_inputs_accumulate_in_f32() {
    let device = device();
    if !device.features().contains(wgpu::Features::SHADER_F16) {
        let a = Array::from_slice(&[f16::ONE; 4], &[2, 2], &device).unwrap();
        assert!(matches!(
            a.matmul(&a),
            Err(Error::MissingFeature {
                feature: "SHADER_F16",
                ..
            })
        ));
        return;
    }
    check_half(&device, DType::F16, F16_TOL);
}

#[test]
fn bf16_inputs_accumulate_in_f32_on_every_adapter() {
    let device = device();
    check_half(&device, DType::BF16, BF16_TOL);
}

#[test]
fn mixed_dtypes_bool_and_integer_addmm_are_rejected() {
    let device = device();
    let a = Array::zeros(&[2, 2], DType::F32, &device).unwrap();
    let b = Array::zeros(&[2, 2], DType::BF16, &device).unwrap();
    let i = Array::zeros(&[2, 2], DType::I32, &device).unwrap();
    let t = Array::zeros(&[2, 2], DType::Bool, &device).unwrap();
    assert!(matches!(a.matmul(&b), Err(Error::DType { .. })));
    // Integers take the exact path (tests/dtypes.rs), but not with floats.
    assert!(matches!(i.matmul(&a), Err(Error::DType { .. })));
    assert!(matches!(t.matmul(&t), Err(Error::DType { .. })));
    assert!(matches!(
        i.addmm(&i, &i, 1.0, 1.0),
        Err(Error::OpDType { op: "addmm", .. })
    ));
    assert!(matches!(
        b.addmm(&a, &a, 1.0, 1.0),
        Err(Error::DType { .. })
    ));
}

/// `beta * c + alpha * (a @ b)` in f64, c broadcast by the closure.
fn addmm_ref(
    x: &[f32],
    y: &[f32],
    (batch, m, k, n): (usize, usize, usize, usize),
    c: impl Fn(usize, usize, usize) -> f32,
    alpha: f64,
    beta: f64,
) -> Vec<f64> {
    let mut r = matmul_ref(x, y, batch, m, k, n);
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let o = &mut r[(bi * m + i) * n + j];
                *o = alpha * *o + beta * c(bi, i, j) as f64;
            }
        }
    }
    r
}

#[test]
fn addmm_fuses_a_broadcast_bias() {
    let device = device();
    poison_pool(&device, 1 << 20);
    let mut rng = Rng::new(8);
    let (batch, m, k, n) = (2, 37, 29, 70);
    let x = rng.vec_f32(batch * m * k);
    let y = rng.vec_f32(batch * k * n);
    let a = Array::from_slice(&x, &[batch, m, k], &device).unwrap();
    let b = Array::from_slice(&y, &[batch, k, n], &device).unwrap();
    let (alpha, beta) = (0.5f32, -2.0f32);
    // A bias vector [n].
    let bias = rng.vec_f32(n);
    let c = Array::from_slice(&bias, &[n], &device).unwrap();
    let got = c.addmm(&a, &b, alpha, beta).unwrap();
    assert_eq!(got.shape(), &[batch, m, n]);
    let want = addmm_ref(
        &x,
        &y,
        (batch, m, k, n),
        |_, _, j| bias[j],
        alpha as f64,
        beta as f64,
    );
    let err = rel_frobenius(&got.to_vec::<f32>().unwrap(), &want);
    assert!(err < F32_TOL, "bias [n]: {err:e}");
    // A column [m, 1].
    let col = rng.vec_f32(m);
    let c = Array::from_slice(&col, &[m, 1], &device).unwrap();
    let got = c.addmm(&a, &b, 1.0, 1.0).unwrap();
    let want = addmm_ref(&x, &y, (batch, m, k, n), |_, i, _| col[i], 1.0, 1.0);
    let err = rel_frobenius(&got.to_vec::<f32>().unwrap(), &want);
    assert!(err < F32_TOL, "bias [m, 1]: {err:e}");
    // A full, batched bias [batch, m, n].
    let full = rng.vec_f32(batch * m * n);
    let c = Array::from_slice(&full, &[batch, m, n], &device).unwrap();
    let got = c.addmm(&a, &b, -1.0, 0.25).unwrap();
    let want = addmm_ref(
        &x,
        &y,
        (batch, m, k, n),
        |bi, i, j| full[(bi * m + i) * n + j],
        -1.0,
        0.25,
    );
    let err = rel_frobenius(&got.to_vec::<f32>().unwrap(), &want);
    assert!(err < F32_TOL, "bias [b, m, n]: {err:e}");
    // A bias that does not broadcast.
    let c = Array::zeros(&[m + 1], DType::F32, &device).unwrap();
    assert!(matches!(
        c.addmm(&a, &b, 1.0, 1.0),
        Err(Error::ShapeMismatch { .. })
    ));
}

#[test]
fn addmm_decode_step_and_vector_operands() {
    // x [k] @ W [k, n] + bias [n]: the m = 1 path with a bias, and 1-D a.
    let device = device();
    poison_pool(&device, 1 << 20);
    let mut rng = Rng::new(9);
    let (k, n) = (384, 1152);
    let x = rng.vec_f32(k);
    let w = rng.vec_f32(k * n);
    let bias = rng.vec_f32(n);
    let xa = Array::from_slice(&x, &[k], &device).unwrap();
    let wa = Array::from_slice(&w, &[k, n], &device).unwrap();
    let c = Array::from_slice(&bias, &[n], &device).unwrap();
    let got = c.addmm(&xa, &wa, 1.0, 1.0).unwrap();
    assert_eq!(got.shape(), &[n]);
    let want = addmm_ref(&x, &w, (1, 1, k, n), |_, _, j| bias[j], 1.0, 1.0);
    let err = rel_frobenius(&got.to_vec::<f32>().unwrap(), &want);
    assert!(err < F32_TOL, "{err:e}");
}

#[test]
fn addmm_in_bf16_rounds_once() {
    let device = device();
    poison_pool(&device, 1 << 20);
    let mut rng = Rng::new(10);
    let (m, k, n) = (19, 33, 21); // odd n: the lone-element store path
    let (x, a) = half_inputs(&device, &mut rng, DType::BF16, m * k, &[m, k]);
    let (y, b) = half_inputs(&device, &mut rng, DType::BF16, k * n, &[k, n]);
    let (bias, c) = half_inputs(&device, &mut rng, DType::BF16, n, &[n]);
    let got = c.addmm(&a, &b, 2.0, 1.0).unwrap();
    assert_eq!(got.dtype(), DType::BF16);
    let got: Vec<f32> = got
        .to_f64_vec()
        .unwrap()
        .iter()
        .map(|&v| v as f32)
        .collect();
    let want = addmm_ref(&x, &y, (1, m, k, n), |_, _, j| bias[j], 2.0, 1.0);
    let err = rel_frobenius(&got, &want);
    assert!(err < BF16_TOL, "{err:e}");
}

#[test]
fn naive_reference_kernel_agrees() {
    let device = device();
    let mut rng = Rng::new(11);
    let (m, k, n) = (33, 65, 17);
    let x = rng.vec_f32(m * k);
    let y = rng.vec_f32(k * n);
    let a = Array::from_slice(&x, &[m, k], &device).unwrap();
    let b = Array::from_slice(&y, &[k, n], &device).unwrap();
    let fast = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
    let naive = wgarray::baseline::matmul_naive(&a, &b)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let want = matmul_ref(&x, &y, 1, m, k, n);
    assert!(rel_frobenius(&fast, &want) < F32_TOL);
    assert!(rel_frobenius(&naive, &want) < F32_TOL);
}

/// How a test operand of logical shape `[rows, cols]` is laid out in memory.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// Dense row-major.
    RowMajor,
    /// Row-major inside a wider array whose row stride is a multiple of
    /// four: vec4 loads along the inner dimension, whatever `cols` is.
    PaddedRows,
    /// A transposed view of such a padded `[cols, rows]` array: vec4 loads
    /// along the outer dimension.
    PaddedTransposed,
    /// Every other column of a `[rows, 2 cols]` array, walked backwards:
    /// scalar loads through a negative stride.
    ReversedSteps,
}

/// An operand of `dtype` with the given logical values (already exact in
/// `dtype`) and layout. Stored elements outside the view are NaN, so reading
/// one fails the test.
fn laid_out(
    device: &Device,
    values: &[f32],
    rows: usize,
    cols: usize,
    layout: Layout,
    dtype: DType,
) -> Array {
    use wgarray::Slice;
    let pad = |x: usize| x.next_multiple_of(4) + 4;
    let (stored, shape) = match layout {
        Layout::RowMajor => (values.to_vec(), [rows, cols]),
        Layout::PaddedRows => {
            let ld = pad(cols);
            let mut s = vec![f32::NAN; rows * ld];
            for i in 0..rows {
                s[i * ld..i * ld + cols].copy_from_slice(&values[i * cols..(i + 1) * cols]);
            }
            (s, [rows, ld])
        }
        Layout::PaddedTransposed => {
            let ld = pad(rows);
            let mut t = vec![f32::NAN; cols * ld];
            for i in 0..rows {
                for j in 0..cols {
                    t[j * ld + i] = values[i * cols + j];
                }
            }
            (t, [cols, ld])
        }
        Layout::ReversedSteps => {
            // Logical column j lives at stored column 2 (cols - 1 - j).
            let mut s = vec![f32::NAN; rows * 2 * cols];
            for i in 0..rows {
                for j in 0..cols {
                    s[i * 2 * cols + 2 * (cols - 1 - j)] = values[i * cols + j];
                }
            }
            (s, [rows, 2 * cols])
        }
    };
    let base = upload(device, dtype, &stored, &shape);
    let prefix = |n: usize| Slice::new(None, Some(n as isize), 1);
    match layout {
        Layout::RowMajor => base,
        Layout::PaddedRows => base.slice(&[Slice::FULL, prefix(cols)]).unwrap(),
        Layout::PaddedTransposed => base
            .slice(&[Slice::FULL, prefix(rows)])
            .unwrap()
            .transpose(),
        Layout::ReversedSteps => base
            .slice(&[
                Slice::FULL,
                Slice::new(Some(2 * cols as isize - 2), None, -2),
            ])
            .unwrap(),
    }
}

/// Every layout of A against every layout of B in each of `shapes`.
fn check_every_load_mode(
    device: &Device,
    dtype: DType,
    tol: f64,
    shapes: &[(usize, usize, usize)],
) {
    poison_pool(device, 1 << 22);
    let mut rng = Rng::new(19);
    let layouts = [
        Layout::RowMajor,
        Layout::PaddedRows,
        Layout::PaddedTransposed,
        Layout::ReversedSteps,
    ];
    // Values exact in the dtype, so the reference sees what the kernel sees.
    for &(m, k, n) in shapes {
        let x = round_to(dtype, &rng.vec_f32(m * k));
        let y = round_to(dtype, &rng.vec_f32(k * n));
        let want = matmul_ref(&x, &y, 1, m, k, n);
        for la in layouts {
            for lb in layouts {
                let a = laid_out(device, &x, m, k, la, dtype);
                let b = laid_out(device, &y, k, n, lb, dtype);
                let got = a
                    .matmul(&b)
                    .unwrap()
                    .astype(DType::F32)
                    .unwrap()
                    .to_vec::<f32>()
                    .unwrap();
                let err = rel_frobenius(&got, &want);
                assert!(
                    err < tol,
                    "{dtype:?} {m}x{k}x{n}, A {la:?}, B {lb:?}: {err:e}"
                );
            }
        }
    }
}

#[test]
fn f32_every_load_mode_in_every_shape_class() {
    // The matrix-vector, small, medium and large classes, with K a multiple
    // of four and not, and edges in M and N.
    let shapes = [
        (1, 37, 70),
        (7, 33, 5),
        (65, 19, 130),
        (64, 20, 128),
        (130, 21, 131),
        (128, 24, 256),
    ];
    check_every_load_mode(&device(), DType::F32, F32_TOL, &shapes);
}

#[test]
fn half_types_every_load_mode() {
    // The half types differ from f32 only in their load and store
    // expressions: one shape per load pattern (matrix-vector, small tile,
    // large tile) keeps the number of compiled variants down.
    let shapes = [(1, 37, 70), (7, 33, 5), (130, 21, 131)];
    let device = device();
    check_every_load_mode(&device, DType::BF16, BF16_TOL, &shapes);
    if device
        .features()
        .contains(wgarray::wgpu::Features::SHADER_F16)
    {
        check_every_load_mode(&device, DType::F16, F16_TOL, &shapes);
    }
}

#[test]
fn grids_past_the_dispatch_limit_run_as_several_dispatches() {
    // 65535 workgroups per dimension is WebGPU's default limit (and
    // lavapipe's): a batch of 66000 matrices, and 2^21 + 5 rows (65537 row
    // tiles of the small class's 32 rows), each need two dispatches.
    let device = device();
    poison_pool(&device, 1 << 24);
    let max = device.limits().max_compute_workgroups_per_dimension as usize;
    let mut rng = Rng::new(23);
    check_f32(&device, &mut rng, max + 465, 2, 3, 2);
    check_f32(&device, &mut rng, 1, 32 * max + 37, 3, 2);
}

/// `None` when broadcast ones [m, k] @ ones [k, n] gives k everywhere, else
/// what went wrong.
fn gemv_check(d: &Device, m: usize, k: usize, n: usize) -> Option<String> {
    // a = broadcast ones [m, k] (no memory), b = ones [k, n] -> every output = k
    let a = Array::scalar(1.0, DType::F32, d)
        .unwrap()
        .broadcast_to(&[m, k])
        .unwrap();
    let b = Array::ones(&[k, n], DType::F32, d).unwrap();
    let c = a.matmul(&b).and_then(|c| c.to_vec::<f32>());
    match c {
        Ok(v) => {
            let bad = v.iter().filter(|e| **e != k as f32).count();
            if bad > 0 {
                Some(format!(
                    "matmul ({m},{k},{n}): {bad}/{} wrong, e.g. {}",
                    v.len(),
                    v.iter().find(|e| **e != k as f32).unwrap()
                ))
            } else {
                None
            }
        }
        Err(e) => Some(format!("matmul ({m},{k},{n}): error {e}")),
    }
}

#[test]
fn matmul_k0_gives_zeros() -> R {
    let d = device();
    poison_pool(&d, 1 << 12);
    {
        let a = Array::zeros(&[5, 0], DType::F32, &d).unwrap();
        let b = Array::zeros(&[0, 7], DType::F32, &d).unwrap();
        let c = a.matmul(&b)?;
        assert_eq!(c.to_vec::<f32>()?, vec![0.0; 35]);
        let c1 = Array::zeros(&[1, 0], DType::F32, &d)
            .unwrap()
            .matmul(&Array::zeros(&[0, 9], DType::F32, &d).unwrap())?;
        assert_eq!(c1.to_vec::<f32>()?, vec![0.0; 9]);
        let v = Array::zeros(&[0], DType::F32, &d).unwrap();
        assert_eq!(v.matmul(&v)?.item::<f32>()?, 0.0);
    }
    assert_empty(&d);
    Ok(())
}

#[test]
fn matmul_k0_bf16_gives_zeros() -> R {
    let d = device();
    poison_pool(&d, 1 << 12);
    let a = Array::zeros(&[5, 0], DType::BF16, &d).unwrap();
    let b = Array::zeros(&[0, 6], DType::BF16, &d).unwrap();
    let c = a.matmul(&b)?.astype(DType::F32)?;
    assert_eq!(c.to_vec::<f32>()?, vec![0.0; 30]);
    Ok(())
}

#[test]
fn matmul_m0_n0() -> R {
    let d = device();
    {
        let a = Array::ones(&[0, 4], DType::F32, &d).unwrap();
        let b = Array::ones(&[4, 3], DType::F32, &d).unwrap();
        assert_eq!(a.matmul(&b)?.shape(), &[0, 3]);
        a.matmul(&b)?.eval()?;
        let b0 = Array::ones(&[4, 0], DType::F32, &d).unwrap();
        assert_eq!(
            Array::ones(&[2, 4], DType::F32, &d)
                .unwrap()
                .matmul(&b0)?
                .to_vec::<f32>()?
                .len(),
            0
        );
        let bb = Array::ones(&[0, 2, 4], DType::F32, &d).unwrap();
        assert_eq!(bb.matmul(&b)?.shape(), &[0, 2, 3]);
        bb.matmul(&b)?.eval()?;
    }
    assert_empty(&d);
    Ok(())
}

#[test]
fn f16_matmul_odd() -> R {
    let d = device();
    let a = Array::ones(&[3, 5], DType::F16, &d).unwrap();
    let b = Array::ones(&[5, 7], DType::F16, &d).unwrap();
    match a.matmul(&b) {
        Ok(c) => assert_eq!(c.to_vec::<f16>()?, vec![f16::from_f32(5.0); 21]),
        Err(Error::MissingFeature { .. }) => assert!(is_gl(&d)),
        Err(e) => panic!("{e}"),
    }
    Ok(())
}

#[test]
fn bf16_batched_odd_output_words() -> R {
    let d = device();
    let mut rng = Rng::new(5);
    let (bt, m, k, n) = (5usize, 3usize, 7usize, 3usize);
    let av = round_to(DType::BF16, &rng.vec_f32(bt * m * k));
    let bv = round_to(DType::BF16, &rng.vec_f32(bt * k * n));
    let want = matmul_ref(&av, &bv, bt, m, k, n);
    for _ in 0..5 {
        let a = f(&d, &av, &[bt, m, k]).astype(DType::BF16)?;
        let b = f(&d, &bv, &[bt, k, n]).astype(DType::BF16)?;
        let got = a.matmul(&b)?.to_vec::<bf16>()?;
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(*g, bf16::from_f64(*w), "element {j}");
        }
    }
    Ok(())
}

#[test]
fn matmul_with_view_operands() -> R {
    let d = device();
    let mut rng = Rng::new(7);
    for (m, k, n) in [
        (5usize, 7usize, 9usize),
        (33, 17, 65),
        (1, 40, 64),
        (64, 64, 64),
    ] {
        let a_big = rng.vec_f32((m + 1) * (k + 2));
        let b_big = rng.vec_f32((k + 1) * (n + 3));
        let ab = f(&d, &a_big, &[m + 1, k + 2]);
        let bb = f(&d, &b_big, &[k + 1, n + 3]);
        // a = ab[::-1][1:, 1:k+1] reversed rows with offset, b = bb[1:, :n:-1]... several views
        let a = ab.slice(&[
            Slice::new(Some(-2), None, -1),
            Slice::range(1, (k + 1) as isize),
        ])?;
        let b = bb.slice(&[
            Slice::range(1, (k + 1) as isize),
            Slice::new(Some(n as isize), Some(0), -1),
        ])?;
        assert_eq!(a.shape(), &[m, k]);
        assert_eq!(b.shape(), &[k, n]);
        let av = a.to_vec::<f32>()?;
        let bv = b.to_vec::<f32>()?;
        let want = matmul_ref(&av, &bv, 1, m, k, n);
        let got = a.matmul(&b)?.to_vec::<f32>()?;
        let err = rel_frobenius(&got, &want);
        assert!(
            err < 1e-5,
            "({m},{k},{n}) negative-stride views: rel err {err}"
        );
        // transposed views and broadcast operand
        let at = f(&d, &av, &[m, k]).transpose().contiguous()?.transpose();
        let got2 = at
            .matmul(&b.contiguous()?.transpose().contiguous()?.transpose())?
            .to_vec::<f32>()?;
        assert!(rel_frobenius(&got2, &want) < 1e-5, "transposed");
        // broadcast along k (stride 0 columns)
        let row = f(&d, &av[..k], &[1, k]).broadcast_to(&[m, k])?;
        let got3 = row.matmul(&b)?.to_vec::<f32>()?;
        let rows: Vec<f32> = (0..m).flat_map(|_| av[..k].to_vec()).collect();
        let want3 = matmul_ref(&rows, &bv, 1, m, k, n);
        assert!(rel_frobenius(&got3, &want3) < 1e-5, "broadcast");
    }
    Ok(())
}

#[test]
fn odd_offset_bf16_matmul_views() -> R {
    let d = device();
    let mut rng = Rng::new(3);
    let (m, k, n) = (9usize, 13usize, 11usize);
    let av = round_to(DType::BF16, &rng.vec_f32(m * (k + 1)));
    let bv = round_to(DType::BF16, &rng.vec_f32((k + 1) * n));
    let a = f(&d, &av, &[m, k + 1])
        .astype(DType::BF16)?
        .slice(&[Slice::FULL, Slice::range(1, (k + 1) as isize)])?;
    let b = f(&d, &bv, &[k + 1, n])
        .astype(DType::BF16)?
        .slice(&[Slice::range(1, (k + 1) as isize)])?;
    let a32 = a.astype(DType::F32)?.to_vec::<f32>()?;
    let b32 = b.astype(DType::F32)?.to_vec::<f32>()?;
    let want = matmul_ref(&a32, &b32, 1, m, k, n);
    let got = a.matmul(&b)?.astype(DType::F32)?.to_vec::<f32>()?;
    let err = rel_frobenius(&got, &want);
    assert!(err < 1e-2, "bf16 odd-offset views rel err {err}");
    // odd n: bf16 output with a lone half-word per row
    let got2 = a
        .matmul(&b.slice(&[Slice::FULL, Slice::range(0, 1)])?)?
        .astype(DType::F32)?
        .to_vec::<f32>()?;
    assert_eq!(got2.len(), m);
    Ok(())
}

#[test]
fn addmm_bias_aliases_operand() -> R {
    let d = device();
    let a = f(&d, &[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let c = a.addmm(&a, &a, 1.0, 1.0)?.to_vec::<f32>()?;
    assert_eq!(c, vec![8.0, 12.0, 18.0, 26.0]);
    let t = a.transpose();
    let c2 = t.addmm(&a, &t, 2.0, -1.0)?.to_vec::<f32>()?;
    // a @ a.T = [[5,11],[11,25]]; 2x - t
    assert_eq!(c2, vec![9.0, 19.0, 20.0, 46.0]);
    Ok(())
}

// HIGH, both backends: llvmpipe loop limit in the m==1 GEMM tile: a plain 1-D dot product of length 100k is silently wrong
#[test]
fn dot_product_100k_real_data() -> R {
    // A plain 1-D dot product: [100000] @ [100000]; 400 KB each.
    let d = device();
    let n = 100_000usize;
    let mut rng = Rng::new(11);
    let a = rng.vec_f32(n);
    let b = rng.vec_f32(n);
    let want: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let got = f(&d, &a, &[n]).matmul(&f(&d, &b, &[n]))?.item::<f32>()?;
    assert!(
        (got as f64 - want).abs() < 1e-2,
        "dot of 100k: got {got}, want {want}"
    );
    Ok(())
}

// HIGH, both: [1,90000]@[90000,4] of ones gives 87380 (vulkan) / 87376 (gl)
#[test]
fn gemv_k_90000_n4() -> R {
    let d = device();
    let k = 90_000usize;
    let a = Array::ones(&[1, k], DType::F32, &d).unwrap();
    let b = Array::ones(&[k, 4], DType::F32, &d).unwrap();
    let got = a.matmul(&b)?.to_vec::<f32>()?;
    assert_eq!(got, vec![k as f32; 4]);
    Ok(())
}

// HIGH, both: the m==1 GEMM goes wrong between K=87000 and K=88000 (87380 = 65535*4/3 on vulkan, 87376 on gl)
#[test]
fn gemv_k_threshold() {
    // smallest K for which [1,K]@[K,1] of ones goes wrong
    let d = device();
    let mut bad = vec![];
    for k in [60_000usize, 80_000, 87_000, 88_000] {
        let a = Array::ones(&[1, k], DType::F32, &d).unwrap();
        let b = Array::ones(&[k, 1], DType::F32, &d).unwrap();
        let v = a.matmul(&b).unwrap().item::<f32>().unwrap();
        if v != k as f32 {
            bad.push(format!("K={k}: {v}"));
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}

// HIGH, both: m==1 gemv with K>=~87k silently wrong
#[test]
fn matmul_huge_k() {
    let d = device();
    let mut bad = vec![];
    for (m, k, n) in [
        (1, 70_000, 1),
        (1, 70_000, 64),
        (1, 300_000, 4),
        (2, 70_000, 3),
        (64, 70_000, 64),
        (1, 1 << 20, 1),
    ] {
        bad.extend(gemv_check(&d, m, k, n));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

// HIGH, both: small tile (m<32 or n<64) with K=300000 gives 262140 (vulkan) / 262120 (gl)
#[test]
fn gemm_huge_k_tiles() {
    let d = device();
    let mut bad = vec![];
    for (m, k, n) in [
        (2usize, 300_000usize, 3usize),
        (40, 300_000, 8),
        (64, 200_000, 64),
    ] {
        let a = Array::scalar(1.0, DType::F32, &d)
            .unwrap()
            .broadcast_to(&[m, k])
            .unwrap();
        let b = Array::scalar(1.0, DType::F32, &d)
            .unwrap()
            .broadcast_to(&[k, n])
            .unwrap();
        match a.matmul(&b).and_then(|c| c.to_vec::<f32>()) {
            Ok(v) => {
                if let Some(x) = v.iter().find(|e| **e != k as f32) {
                    bad.push(format!("({m},{k},{n}): got {x}"));
                }
            }
            Err(e) => bad.push(format!("({m},{k},{n}): {e}")),
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

// LOW, both: the naive reference kernel (wgarray::baseline) at K=70000 gave 65535/65530 (llvmpipe's loop limit)
#[test]
fn matmul_naive_huge_k() {
    let d = device();
    let k = 70_000;
    let a = Array::ones(&[1, k], DType::F32, &d).unwrap();
    let b = Array::ones(&[k, 1], DType::F32, &d).unwrap();
    let c = wgarray::baseline::matmul_naive(&a, &b)
        .unwrap()
        .item::<f32>()
        .unwrap();
    assert_eq!(c, k as f32);
}
