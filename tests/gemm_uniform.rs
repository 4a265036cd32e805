//! The uniform-window matrix-vector family (`GemmKernel::Uniform`), forced
//! with `Device::set_gemm_kernel`, against an f64 reference on random
//! inputs: one and several windows, one and several dispatches (the later
//! ones add to the output), the last window of a buffer, strided and
//! offset views, a bias with alpha and beta, and every product it must
//! hand to the register family (those give the same answers through it).
//!
//! Both kernels of the family are covered: the column kernel (B row-major)
//! and the row kernel (B unit-stride along K, `x @ w.T`).
//!
//! Which path ran is checked by the dispatch count: the column kernel runs
//! `ceil(K / (rows per window * windows))` dispatches, the row kernel
//! `ceil(N / (columns per window * (windows - 1)))` (A takes one binding),
//! the register tile one. For a B at offset 0 whose lines (rows of a
//! row-major B, W's rows for `w.T`) are whole multiples of 256 bytes, a
//! window holds `65536 / (4 line)` of them: the models below, written apart
//! from the kernel's placement code.

mod common;

use common::{Rng, assert_empty, device, matmul_ref, poison_pool, rel_frobenius};
use wgarray::tuning::{GemmKernel, ShapeClass};
use wgarray::{Array, DType, Device, Error, Slice};

const KERNELS: [&str; 2] = ["uniform 8 8", "uniform 8 4"];

/// f32 products over K of up to a few thousand random terms in [-1, 1).
const TOL: f64 = 2e-6;

/// The tuning reports this binary logged (`wgarray: tuned the ...`).
static TUNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

struct Recorder;

impl log::Log for Recorder {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }
    fn log(&self, r: &log::Record<'_>) {
        let line = r.args().to_string();
        if line.starts_with("wgarray: tuned the") {
            TUNINGS.lock().unwrap().push(line);
        }
    }
    fn flush(&self) {}
}

static RECORDER: Recorder = Recorder;

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

/// Dispatches of the row kernel for `x @ w.T`, `w` a dense `[n, k]` at
/// offset 0 with `4 k` a multiple of 256 bytes.
fn expected_row_dispatches(d: &Device, k: usize, n: usize) -> u64 {
    assert_eq!(4 * k % 256, 0, "the model's precondition");
    let cols = 65536 / (4 * k);
    n.div_ceil(cols * (windows(d) - 1)) as u64
}

/// `w.T` for a `[n, k]` `w` as a row-major `[k, n]` (the reference's B).
fn transposed_of(w: &[f32], n: usize, k: usize) -> Vec<f32> {
    (0..k)
        .flat_map(|i| (0..n).map(move |j| w[j * k + i]))
        .collect()
}

/// Rows `r0 .. r0 + rows` and columns `c0 .. c0 + cols` of a random
/// `[stored_rows, stored_cols]` f32 matrix on `d`: the view, and its
/// elements row-major on the host.
fn view_of(
    d: &Device,
    rng: &mut Rng,
    (rows, cols): (usize, usize),
    (r0, c0): (usize, usize),
    (stored_rows, stored_cols): (usize, usize),
) -> (Array, Vec<f32>) {
    let stored = rng.vec_f32(stored_rows * stored_cols);
    let view = Array::from_slice(&stored, &[stored_rows, stored_cols], d)
        .unwrap()
        .slice(&[
            Slice::new(Some(r0 as isize), Some((r0 + rows) as isize), 1),
            Slice::new(Some(c0 as isize), Some((c0 + cols) as isize), 1),
        ])
        .unwrap();
    let host = (r0..r0 + rows)
        .flat_map(|r| stored[r * stored_cols + c0..r * stored_cols + c0 + cols].to_vec())
        .collect();
    (view, host)
}

/// `x @ b` evaluated, with the dispatches it took.
fn run(d: &Device, x: &Array, b: &Array) -> (Vec<f32>, u64) {
    let before = d.dispatches();
    let y = x.matmul(b).unwrap();
    y.eval().unwrap();
    let used = d.dispatches() - before;
    (y.to_vec::<f32>().unwrap(), used)
}

/// Each `(k, n)` of `shapes` through both kernels of [`KERNELS`] on a
/// poisoned pool, B dense (the column kernel) or, when `transposed`, `w.T`
/// (the row kernel, each case in more than one dispatch): the reference's
/// result in the dispatches the model gives; the pool empty afterwards.
fn dispatch_sweep(seed: u64, shapes: &[(usize, usize)], transposed: bool) {
    let d = device();
    let mut rng = Rng::new(seed);
    let what = if transposed { " w.T" } else { "" };
    for kernel in KERNELS {
        if !forced(&d, kernel) {
            return;
        }
        for &(k, n) in shapes {
            poison_pool(&d, 1 << 16);
            let (got, want, used) = product(&d, &mut rng, (k, n), transposed, false);
            let err = rel_frobenius(&got, &want);
            assert!(err < TOL, "{kernel} 1x{k}x{n}{what}: error {err}");
            let expected = if transposed {
                expected_row_dispatches(&d, k, n)
            } else {
                expected_dispatches(&d, k, n)
            };
            assert_eq!(used, expected, "{kernel} 1x{k}x{n}{what}: dispatches");
            if transposed {
                assert!(used > 1, "{kernel} 1x{k}x{n}{what}: the case's premise");
            }
        }
    }
    d.set_gemm_kernel(None).unwrap();
    assert_empty(&d);
}

/// A device with `kernel` forced and a generator seeded with `seed`, or
/// `None` where the family does not run (see [`forced`]): how each test of
/// one kernel starts.
fn start(seed: u64, kernel: &str) -> Option<(Device, Rng)> {
    let d = device();
    forced(&d, kernel).then(|| (d, Rng::new(seed)))
}

/// A random `[1, k]` x times B `[k, n]`, B dense or (`transposed`) `w.T` of
/// a dense random `[n, k]` `w`; with `bias`, `0.5 (x @ B) - 2 c` for a
/// random `c` `[n]` (`addmm`). The result, the f64 reference, and the
/// dispatches it took.
fn product(
    d: &Device,
    rng: &mut Rng,
    (k, n): (usize, usize),
    transposed: bool,
    bias: bool,
) -> (Vec<f32>, Vec<f64>, u64) {
    let xs = rng.vec_f32(k);
    let ws = rng.vec_f32(k * n);
    let cs = if bias { rng.vec_f32(n) } else { Vec::new() };
    let x = Array::from_slice(&xs, &[1, k], d).unwrap();
    let (b, host_b) = if transposed {
        let w = Array::from_slice(&ws, &[n, k], d).unwrap();
        (w.transpose(), transposed_of(&ws, n, k))
    } else {
        (Array::from_slice(&ws, &[k, n], d).unwrap(), ws)
    };
    let c = Array::from_slice(&cs, &[cs.len()], d).unwrap();
    let before = d.dispatches();
    let y = if bias {
        c.addmm(&x, &b, 0.5, -2.0)
    } else {
        x.matmul(&b)
    };
    let y = y.unwrap();
    y.eval().unwrap();
    let used = d.dispatches() - before;
    let mut want = matmul_ref(&xs, &host_b, 1, 1, k, n);
    for (w, &c) in want.iter_mut().zip(&cs) {
        *w = 0.5 * *w - 2.0 * c as f64;
    }
    (y.to_vec::<f32>().unwrap(), want, used)
}

#[test]
fn matches_the_reference_in_one_and_many_dispatches() {
    // (k, n): one window; one dispatch of several windows; several
    // dispatches (6 and 7 at 14 windows), the last windows of the
    // buffer shifted back to end at its end; two rows per window; odd K.
    let shapes = [
        (4, 4096),
        (33, 1152),
        (1025, 1152),
        (300, 4096),
        (7, 8192),
        (197, 384),
    ];
    dispatch_sweep(11, &shapes, false);
}

#[test]
fn the_bias_alpha_and_beta_apply_once_across_dispatches() {
    let Some((d, mut rng)) = start(12, "uniform 8 8") else {
        return;
    };
    let (k, n) = (300, 1152);
    let (got, want, used) = product(&d, &mut rng, (k, n), false, true);
    assert_eq!(used, expected_dispatches(&d, k, n));
    assert!(used > 1, "the test needs several dispatches");
    let err = rel_frobenius(&got, &want);
    assert!(err < TOL, "error {err}");
}

#[test]
fn views_of_a_and_b_read_through_unaligned_windows() {
    let Some((d, mut rng)) = start(13, "uniform 8 8") else {
        return;
    };
    let (k, n) = (500, 1000);
    // B: rows 3 .. 3 + k and columns 64 .. 64 + n of a [k + 5, n + 132]
    // matrix (row stride n + 132, offset 3 (n + 132) + 64: windows start
    // inside a row). A: every other element of a [1, 2k] row.
    let (b, ws) = view_of(&d, &mut rng, (k, n), (3, 64), (k + 5, n + 132));
    let xs2 = rng.vec_f32(2 * k);
    let xrow = Array::from_slice(&xs2, &[1, 2 * k], &d).unwrap();
    let x = xrow
        .slice(&[Slice::FULL, Slice::new(None, None, 2)])
        .unwrap();
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
    let Some((d, mut rng)) = start(14, "uniform 8 8") else {
        return;
    };
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
    // A batch of two.
    let (k, n) = (300, 1152);
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
fn the_row_kernel_matches_the_reference_in_one_and_many_dispatches() {
    // (k, n) of `x @ w.T`, w [n, k], each in more than one dispatch (so
    // the count tells the row kernel from the register tile): 256 columns
    // per window; MiniLM's three shapes (3 dispatches each at 13 windows
    // of B); odd n, 10 and 4 columns per window; one column per window at
    // the largest K whose rows are whole multiples of 256 bytes and fit in
    // a window beside its alignment.
    let shapes = [
        (64, 3329),
        (384, 1152),
        (384, 1536),
        (1536, 384),
        (1536, 131),
        (4096, 53),
        (1024, 3072),
        (4096, 1025),
        (16128, 14),
    ];
    dispatch_sweep(21, &shapes, true);
}

#[test]
fn the_row_kernel_applies_the_bias_alpha_and_beta_in_every_dispatch() {
    let Some((d, mut rng)) = start(22, "uniform 8 8") else {
        return;
    };
    // K = 300: rows of 1200 bytes, so windows start inside a row.
    let (k, n) = (300, 1153);
    poison_pool(&d, 1 << 16);
    let (got, want, used) = product(&d, &mut rng, (k, n), true, true);
    // At most 54 rows of 1200 bytes per window.
    assert!(
        used >= n.div_ceil(54 * (windows(&d) - 1)) as u64 && used > 1,
        "{used} dispatches"
    );
    let err = rel_frobenius(&got, &want);
    assert!(err < TOL, "error {err}");
}

// Alike in steps to `views_of_a_and_b_read_through_unaligned_windows`, but
// left apart: the views, the kernel and the bound on its dispatches differ.
#[test]
fn the_row_kernel_reads_views_of_a_and_w() {
    let Some((d, mut rng)) = start(23, "uniform 8 8") else {
        return;
    };
    let (k, n) = (512, 700);
    // W: rows 3 .. 3 + n and columns 8 .. 8 + k of a [n + 5, k + 36]
    // matrix (offset 3 (k + 36) + 8, row stride k + 36: both multiples of
    // four, not of a window's alignment). A: row 2 of a [3, k] matrix, at
    // byte 4096.
    let (w, ws) = view_of(&d, &mut rng, (n, k), (3, 8), (n + 5, k + 36));
    let (x, xs) = view_of(&d, &mut rng, (1, k), (2, 0), (3, k));
    poison_pool(&d, 1 << 16);
    let (got, used) = run(&d, &x, &w.transpose());
    let err = rel_frobenius(
        &got,
        &matmul_ref(&xs, &transposed_of(&ws, n, k), 1, 1, k, n),
    );
    assert!(err < TOL, "error {err}");
    // 4 (k + 36) bytes per row: at most 29 rows per window.
    assert!(
        used >= n.div_ceil(29 * (windows(&d) - 1)) as u64 && used > 1,
        "{used} dispatches"
    );
}

#[test]
fn what_the_row_kernel_cannot_run_takes_the_register_tile() {
    let Some((d, mut rng)) = start(24, "uniform 8 8") else {
        return;
    };
    // Each `x @ w.T` below, w [n, k] within a [n, ld] matrix, and x taken
    // from a [1, ax * k + a_off] row at element a_off with step ax:
    // K not a multiple of four; a row of W over one window; W's row stride
    // not a multiple of four; A strided; A at a byte offset (4) off the
    // alignment of uniform offsets.
    for (what, k, n, ld, ax, a_off) in [
        ("K % 4 != 0", 301, 1152, 301, 1, 0),
        (
            "a row and its alignment over one window",
            16384,
            14,
            16384,
            1,
            0,
        ),
        ("W's row stride", 300, 1152, 302, 1, 0),
        ("A strided", 300, 1152, 300, 2, 0),
        ("A's offset", 300, 1152, 300, 1, 1),
    ] {
        poison_pool(&d, 1 << 16);
        let (w, ws) = view_of(&d, &mut rng, (n, k), (0, 0), (n, ld));
        let xrow = rng.vec_f32(ax * k + a_off);
        let x = Array::from_slice(&xrow, &[1, ax * k + a_off], &d)
            .unwrap()
            .slice(&[
                Slice::FULL,
                Slice::new(Some(a_off as isize), None, ax as isize),
            ])
            .unwrap();
        let xs: Vec<f32> = xrow[a_off..].iter().step_by(ax).copied().collect();
        let (got, used) = run(&d, &x, &w.transpose());
        let err = rel_frobenius(
            &got,
            &matmul_ref(&xs, &transposed_of(&ws, n, k), 1, 1, k, n),
        );
        assert!(err < TOL, "{what}: error {err}");
        assert_eq!(used, 1, "{what}: one register dispatch");
    }
    // B one column broadcast to N (stride 0 along n, 1 along K) in a
    // buffer of more than one window: every column would share a window.
    let (k, n) = (300, 140_000);
    let big = rng.vec_f32(20_000);
    let xs = rng.vec_f32(k);
    let col = Array::from_slice(&big, &[20_000], &d)
        .unwrap()
        .slice(&[Slice::new(None, Some(k as isize), 1)])
        .unwrap()
        .reshape(&[k, 1])
        .unwrap()
        .broadcast_to(&[k, n])
        .unwrap();
    let x = Array::from_slice(&xs, &[1, k], &d).unwrap();
    let (got, used) = run(&d, &x, &col);
    let dot: f64 = xs
        .iter()
        .zip(&big)
        .map(|(a, b)| *a as f64 * *b as f64)
        .sum();
    let err = rel_frobenius(&got, &vec![dot; n]);
    assert!(err < TOL, "broadcast column: error {err}");
    assert_eq!(used, 1, "broadcast column: one register dispatch");
    d.set_gemm_kernel(None).unwrap();
}

#[test]
fn outside_its_limits_is_an_invalid_argument() {
    common::assert_not_kernels(&[
        "uniform 0 8",
        "uniform 8 0",
        "uniform 8 17",
        "uniform 257 1",
        "uniform 8",
    ]);
    let k: GemmKernel = "uniform 8 8".parse().unwrap();
    assert_eq!(k.family(), "uniform");
    assert_eq!(k.to_string(), "uniform 8 8");
}

/// The tuning of a matrix-vector class times the family (its parameter
/// block is larger than the others' 256 bytes, and every dispatch of a
/// timing run gets a slot of its own), B row-major and transposed: no
/// validation error, and the kernel chosen computes the right product.
#[test]
fn tuning_times_the_family_without_a_validation_error() {
    let _ = log::set_logger(&RECORDER).map(|()| log::set_max_level(log::LevelFilter::Info));
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
    // The class is timed on the device's background thread: wait for it.
    d.wait_warm_up();
    assert_eq!(d.take_uncaptured_errors(), Vec::<String>::new());
    assert!(
        d.gemm_kernel(DType::F32, ShapeClass::Gemv).is_some(),
        "tuned"
    );
    let err = rel_frobenius(&got, &matmul_ref(&xs, &ws, 1, 1, k, n));
    assert!(err < TOL, "error {err}");
    // The transposed class, whose proxy (K rounded to a multiple of four)
    // the row kernel runs; the product's own K of 1025 it cannot.
    assert_eq!(
        d.gemm_candidates(DType::F32, ShapeClass::GemvT)
            .iter()
            .any(|k| k.family() == "uniform"),
        software
    );
    let wt = Array::from_slice(&ws, &[n, k], &d).unwrap().transpose();
    let (got, _) = run(&d, &x, &wt);
    d.wait_warm_up();
    assert_eq!(d.take_uncaptured_errors(), Vec::<String>::new());
    assert!(
        d.gemm_kernel(DType::F32, ShapeClass::GemvT).is_some(),
        "tuned"
    );
    let err = rel_frobenius(
        &got,
        &matmul_ref(&xs, &transposed_of(&ws, n, k), 1, 1, k, n),
    );
    assert!(err < TOL, "w.T: error {err}");
    // The row kernel was timed (not skipped as unable to run the proxy).
    if software {
        let tunings = TUNINGS.lock().unwrap();
        let report = tunings
            .iter()
            .find(|t| t.contains("float32 gemvt GEMM"))
            .expect("a report of the gemvt tuning");
        let timed = report
            .split("uniform 8 8: ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
        assert!(timed, "{report}");
    }
}

/// K = 0 through views of a buffer large enough for the family: the
/// output is `beta * bias` (zeros without one), not what the pool held.
#[test]
fn an_empty_k_stores_the_bias_alone() {
    let Some((d, mut rng)) = start(16, "uniform 8 8") else {
        return;
    };
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
