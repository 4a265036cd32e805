//! The uniform-window matrix-vector family (`GemmKernel::Uniform`), forced
//! with `Device::set_gemm_kernel`, against an f64 reference on random
//! inputs: one and several windows, one and several dispatches (the later
//! ones add to the output), the last window of a buffer, strided and
//! offset views, a bias with alpha and beta, and every product it must
//! hand to the register family (those give the same answers through it).
//!
//! Which path ran is checked by the dispatch count: the family runs
//! `ceil(K / (rows per window * windows))` dispatches, the register tile
//! one. For a row-major B at offset 0 whose rows are whole multiples of
//! 256 bytes, a window holds `65536 / (4 n)` rows: the model below, written
//! apart from the kernel's placement code.

mod common;

use common::{Rng, assert_empty, device, matmul_ref, poison_pool, rel_frobenius};
use wgarray::tuning::{GemmKernel, ShapeClass};
use wgarray::{Array, DType, Device, Error, Slice};

const KERNELS: [&str; 2] = ["uniform 8 8", "uniform 8 4"];

/// f32 products over K of up to a few thousand random terms in [-1, 1).
const TOL: f64 = 2e-6;

/// Force `kernel` on `d` and say whether the family runs there: on a
/// software adapter it must; on any other the forcing must fail with
/// `InvalidArgument`, and the caller's test has nothing more to check.
fn forced(d: &Device, kernel: &str) -> bool {
    let k: GemmKernel = kernel.parse().unwrap();
    let result = d.set_gemm_kernel(Some(k));
    if d.info().device_type == wgarray::wgpu::DeviceType::Cpu {
        result.expect("a software adapter runs the uniform family");
        true
    } else {
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{result:?}"
        );
        false
    }
}

/// Windows per dispatch on `d`: 14, or fewer where the adapter binds fewer
/// uniform buffers per stage (one is the parameter block).
fn windows(d: &Device) -> usize {
    (d.limits().max_uniform_buffers_per_shader_stage as usize)
        .saturating_sub(1)
        .min(14)
}

/// Dispatches of the family for a dense `[k, n]` B at offset 0 with `4 n` a
/// multiple of 256 bytes.
fn expected_dispatches(d: &Device, k: usize, n: usize) -> u64 {
    assert_eq!(4 * n % 256, 0, "the model's precondition");
    let rows = 65536 / (4 * n);
    k.div_ceil(rows * windows(d)) as u64
}

/// `x @ b` evaluated, with the dispatches it took.
fn run(d: &Device, x: &Array, b: &Array) -> (Vec<f32>, u64) {
    let before = d.dispatches();
    let y = x.matmul(b).unwrap();
    y.eval().unwrap();
    let used = d.dispatches() - before;
    (y.to_vec::<f32>().unwrap(), used)
}

#[test]
fn matches_the_reference_in_one_and_many_dispatches() {
    let d = device();
    let mut rng = Rng::new(11);
    for kernel in KERNELS {
        if !forced(&d, kernel) {
            return;
        }
        // (k, n): one window; one dispatch of several windows; several
        // dispatches (6 and 7 at 14 windows), the last windows of the
        // buffer shifted back to end at its end; two rows per window; odd K.
        for (k, n) in [
            (4, 4096),
            (33, 1152),
            (1025, 1152),
            (300, 4096),
            (7, 8192),
            (197, 384),
        ] {
            poison_pool(&d, 1 << 16);
            let xs = rng.vec_f32(k);
            let ws = rng.vec_f32(k * n);
            let x = Array::from_slice(&xs, &[1, k], &d).unwrap();
            let w = Array::from_slice(&ws, &[k, n], &d).unwrap();
            let (got, used) = run(&d, &x, &w);
            let err = rel_frobenius(&got, &matmul_ref(&xs, &ws, 1, 1, k, n));
            assert!(err < TOL, "{kernel} 1x{k}x{n}: error {err}");
            assert_eq!(
                used,
                expected_dispatches(&d, k, n),
                "{kernel} 1x{k}x{n}: dispatches"
            );
        }
    }
    d.set_gemm_kernel(None).unwrap();
    assert_empty(&d);
}

#[test]
fn the_bias_alpha_and_beta_apply_once_across_dispatches() {
    let d = device();
    let mut rng = Rng::new(12);
    if !forced(&d, "uniform 8 8") {
        return;
    }
    let (k, n) = (300, 1152);
    let xs = rng.vec_f32(k);
    let ws = rng.vec_f32(k * n);
    let cs = rng.vec_f32(n);
    let x = Array::from_slice(&xs, &[1, k], &d).unwrap();
    let w = Array::from_slice(&ws, &[k, n], &d).unwrap();
    let c = Array::from_slice(&cs, &[n], &d).unwrap();
    let before = d.dispatches();
    let y = c.addmm(&x, &w, 0.5, -2.0).unwrap();
    y.eval().unwrap();
    assert_eq!(d.dispatches() - before, expected_dispatches(&d, k, n));
    assert!(
        expected_dispatches(&d, k, n) > 1,
        "the test needs several dispatches"
    );
    let want: Vec<f64> = matmul_ref(&xs, &ws, 1, 1, k, n)
        .iter()
        .zip(&cs)
        .map(|(p, &c)| 0.5 * p - 2.0 * c as f64)
        .collect();
    let err = rel_frobenius(&y.to_vec::<f32>().unwrap(), &want);
    assert!(err < TOL, "error {err}");
}

#[test]
fn views_of_a_and_b_read_through_unaligned_windows() {
    let d = device();
    let mut rng = Rng::new(13);
    if !forced(&d, "uniform 8 8") {
        return;
    }
    let (k, n) = (500, 1000);
    // B: rows 3 .. 3 + k and columns 64 .. 64 + n of a [k + 5, n + 132]
    // matrix (row stride n + 132, offset 3 (n + 132) + 64: windows start
    // inside a row). A: every other element of a [1, 2k] row.
    let wide = n + 132;
    let stored = rng.vec_f32((k + 5) * wide);
    let xs2 = rng.vec_f32(2 * k);
    let big = Array::from_slice(&stored, &[k + 5, wide], &d).unwrap();
    let b = big
        .slice(&[
            Slice::new(Some(3), Some(3 + k as isize), 1),
            Slice::new(Some(64), Some(64 + n as isize), 1),
        ])
        .unwrap();
    let xrow = Array::from_slice(&xs2, &[1, 2 * k], &d).unwrap();
    let x = xrow
        .slice(&[Slice::FULL, Slice::new(None, None, 2)])
        .unwrap();
    let ws: Vec<f32> = (0..k)
        .flat_map(|i| stored[(3 + i) * wide + 64..(3 + i) * wide + 64 + n].to_vec())
        .collect();
    let xs: Vec<f32> = xs2.iter().step_by(2).copied().collect();
    let (got, used) = run(&d, &x, &b);
    let err = rel_frobenius(&got, &matmul_ref(&xs, &ws, 1, 1, k, n));
    assert!(err < TOL, "error {err}");
    // 4 (n + 132) bytes per row: 14 rows per window at most, so at least
    // ceil(500 / (14 * windows)) dispatches; the register tile takes one.
    assert!(
        used >= k.div_ceil(14 * windows(&d)) as u64 && used > 1,
        "{used} dispatches"
    );
}

#[test]
fn what_the_family_cannot_run_takes_the_register_tile() {
    let d = device();
    let mut rng = Rng::new(14);
    if !forced(&d, "uniform 8 8") {
        return;
    }
    let check = |what: &str, got: Vec<f32>, want: Vec<f64>, used: u64| {
        let err = rel_frobenius(&got, &want);
        assert!(err < TOL, "{what}: error {err}");
        assert_eq!(used, 1, "{what}: one register dispatch");
    };
    // n not a multiple of four; a B under one window (64 KiB); a row
    // over one window; two rows of A.
    for (m, k, n) in [(1, 300, 1150), (1, 7, 8), (1, 3, 16384), (2, 300, 1152)] {
        poison_pool(&d, 1 << 16);
        let xs = rng.vec_f32(m * k);
        let ws = rng.vec_f32(k * n);
        let x = Array::from_slice(&xs, &[m, k], &d).unwrap();
        let w = Array::from_slice(&ws, &[k, n], &d).unwrap();
        let (got, used) = run(&d, &x, &w);
        check(
            &format!("{m}x{k}x{n}"),
            got,
            matmul_ref(&xs, &ws, 1, m, k, n),
            used,
        );
    }
    // B transposed (x @ W^T: unit stride along k).
    let (k, n) = (300, 1152);
    let xs = rng.vec_f32(k);
    let wt = rng.vec_f32(n * k);
    let x = Array::from_slice(&xs, &[1, k], &d).unwrap();
    let w = Array::from_slice(&wt, &[n, k], &d).unwrap().transpose();
    let ws: Vec<f32> = (0..k)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .map(|(i, j)| wt[j * k + i])
        .collect();
    let (got, used) = run(&d, &x, &w);
    check("B transposed", got, matmul_ref(&xs, &ws, 1, 1, k, n), used);
    // A batch of two.
    let xs = rng.vec_f32(2 * k);
    let ws = rng.vec_f32(2 * k * n);
    let x = Array::from_slice(&xs, &[2, 1, k], &d).unwrap();
    let w = Array::from_slice(&ws, &[2, k, n], &d).unwrap();
    let (got, used) = run(&d, &x, &w);
    check("batch", got, matmul_ref(&xs, &ws, 2, 1, k, n), used);
    // f16 operands.
    let xs = rng.vec_f32(k);
    let ws = rng.vec_f32(k * n);
    let round =
        |v: &[f32]| -> Vec<f32> { v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect() };
    if d.features().contains(wgarray::wgpu::Features::SHADER_F16) {
        let x = Array::from_slice(&xs, &[1, k], &d)
            .unwrap()
            .astype(DType::F16)
            .unwrap();
        let w = Array::from_slice(&ws, &[k, n], &d)
            .unwrap()
            .astype(DType::F16)
            .unwrap();
        x.eval().unwrap();
        w.eval().unwrap();
        let before = d.dispatches();
        let y = x.matmul(&w).unwrap().astype(DType::F32).unwrap();
        y.eval().unwrap();
        let got = y.to_vec::<f32>().unwrap();
        let err = rel_frobenius(&got, &matmul_ref(&round(&xs), &round(&ws), 1, 1, k, n));
        assert!(err < 2e-3, "f16: error {err}");
        assert!(
            d.dispatches() - before <= 2,
            "f16: the register tile and a cast"
        );
    }
    // A fused epilogue (`relu(x @ w)` in one kernel).
    let xs = rng.vec_f32(k);
    let ws = rng.vec_f32(k * n);
    let x = Array::from_slice(&xs, &[1, k], &d).unwrap();
    let w = Array::from_slice(&ws, &[k, n], &d).unwrap();
    let before = d.dispatches();
    let y = x.matmul(&w).unwrap().relu().unwrap();
    y.eval().unwrap();
    let used = d.dispatches() - before;
    let want = matmul_ref(&xs, &ws, 1, 1, k, n)
        .iter()
        .map(|v| v.max(0.0))
        .collect();
    check("fused epilogue", y.to_vec::<f32>().unwrap(), want, used);
    d.set_gemm_kernel(None).unwrap();
}

#[test]
fn outside_its_limits_is_an_invalid_argument() {
    for bad in [
        "uniform 0 8",
        "uniform 8 0",
        "uniform 8 17",
        "uniform 257 1",
        "uniform 8",
    ] {
        assert!(
            matches!(bad.parse::<GemmKernel>(), Err(Error::InvalidArgument(_))),
            "{bad}"
        );
    }
    let k: GemmKernel = "uniform 8 8".parse().unwrap();
    assert_eq!(k.family(), "uniform");
    assert_eq!(k.to_string(), "uniform 8 8");
}

/// The tuning of a matrix-vector class times the family (its parameter
/// block is larger than the others' 256 bytes, and every dispatch of a
/// timing run gets a slot of its own): no validation error, and the
/// kernel chosen computes the right product.
#[test]
fn tuning_times_the_family_without_a_validation_error() {
    let options = wgarray::DeviceOptions::from_env()
        .unwrap()
        .with_cache_dir(wgarray::tuning::CacheDir::Off);
    let d = Device::new(&options).unwrap();
    let software = d.info().device_type == wgarray::wgpu::DeviceType::Cpu;
    assert_eq!(
        d.gemm_candidates(DType::F32, ShapeClass::Gemv)
            .iter()
            .any(|k| k.family() == "uniform"),
        software
    );
    let mut rng = Rng::new(15);
    let (k, n) = (1025, 1152);
    let xs = rng.vec_f32(k);
    let ws = rng.vec_f32(k * n);
    let x = Array::from_slice(&xs, &[1, k], &d).unwrap();
    let w = Array::from_slice(&ws, &[k, n], &d).unwrap();
    let (got, _) = run(&d, &x, &w);
    assert_eq!(d.take_uncaptured_errors(), Vec::<String>::new());
    assert!(
        d.gemm_kernel(DType::F32, ShapeClass::Gemv).is_some(),
        "tuned"
    );
    let err = rel_frobenius(&got, &matmul_ref(&xs, &ws, 1, 1, k, n));
    assert!(err < TOL, "error {err}");
}

/// K = 0 through views of a buffer large enough for the family: the
/// output is `beta * bias` (zeros without one), not what the pool held.
#[test]
fn an_empty_k_stores_the_bias_alone() {
    let d = device();
    let mut rng = Rng::new(16);
    if !forced(&d, "uniform 8 8") {
        return;
    }
    let n = 1152;
    poison_pool(&d, 1 << 16);
    let big = Array::from_slice(&rng.vec_f32(300 * n), &[300, n], &d).unwrap();
    let w = big
        .slice(&[Slice::new(None, Some(0), 1), Slice::FULL])
        .unwrap();
    let xrow = Array::from_slice(&rng.vec_f32(300), &[1, 300], &d).unwrap();
    let x = xrow
        .slice(&[Slice::FULL, Slice::new(None, Some(0), 1)])
        .unwrap();
    let cs = rng.vec_f32(n);
    let c = Array::from_slice(&cs, &[n], &d).unwrap();
    let y = x.matmul(&w).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(y, vec![0.0; n]);
    let y = c.addmm(&x, &w, 1.0, 2.0).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(y, cs.iter().map(|v| 2.0 * v).collect::<Vec<_>>());
}
