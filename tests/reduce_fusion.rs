//! Elementwise prologues fused into reductions (`kernels::prologue`):
//! `sum(x * y)`, `mean((x - m)^2)`, `max(abs(x))`, a layer norm's residual
//! add, each against the unfused path and an f64 reference on odd sizes
//! and non-contiguous views, with dispatch counts that the unfused path
//! cannot meet, and a held intermediate that stays readable.

mod common;

use common::Rng;
use common::device;
use common::host::{Host, layouts};
use wgarray::{Array, DType, Device};

/// Dispatches and values of one eval of `build`'s result on `d`, with
/// fusion on or off.
fn run(d: &Device, fusion: bool, build: &dyn Fn() -> Array) -> (u64, Vec<f32>) {
    d.set_fusion(fusion);
    let y = build();
    let n = common::eval_dispatches(d, &y);
    (n, y.to_vec::<f32>().unwrap())
}

/// Row-major reduction of `h` (shape `[r, c]`) over `axis` with `f` per
/// element and `fold` from `init`.
fn fold_axis(
    h: &Host,
    axis: usize,
    f: impl Fn(f64, usize) -> f64,
    init: f64,
    fold: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let (r, c) = (h.shape[0], h.shape[1]);
    let (outer, inner) = if axis == 1 { (r, c) } else { (c, r) };
    (0..outer)
        .map(|o| {
            (0..inner).fold(init, |acc, i| {
                let (row, col) = if axis == 1 { (o, i) } else { (i, o) };
                fold(acc, f(h.data[row * c + col], row * c + col))
            })
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-5 * w.abs().max(1.0);
        assert!(
            (g as f64 - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn prologues_agree_with_the_unfused_path_in_one_dispatch() {
    let d = device();
    let mut rng = Rng::new(19);
    for (r, c) in [(1, 1), (7, 33), (33, 7), (3, 1025), (1025, 1)] {
        let hx = Host::small(&[r, c], &mut rng);
        let hy = Host::small(&[r, c], &mut rng);
        let hm = Host::small(&[1, c], &mut rng);
        let m = common::host::dense(&d, &hm, DType::F32);
        m.eval().unwrap();
        for ((lx, x), (ly, y)) in layouts(&d, &hx, DType::F32)
            .into_iter()
            .zip(layouts(&d, &hy, DType::F32).into_iter().rev())
        {
            x.eval().unwrap();
            y.eval().unwrap();
            let what = |case: &str| format!("{case} on [{r}, {c}], x {lx}, y {ly}");
            // sum(x * y) over the last axis.
            let dot = || (&x * &y).unwrap().sum(-1, false).unwrap();
            let want = fold_axis(&hx, 1, |v, i| v * hy.data[i], 0.0, |a, b| a + b);
            let (fused, a) = run(&d, true, &dot);
            let (unfused, b) = run(&d, false, &dot);
            assert_eq!((fused, unfused), (1, 2), "{}", what("sum(x * y)"));
            assert_close(&a, &want, &what("sum(x * y), fused"));
            assert_eq!(a, b, "{}: fused and unfused", what("sum(x * y)"));
            // mean((x - m)^2) over the first axis, m a broadcast row.
            let centred = || {
                let t = (&x - &m).unwrap();
                (&t * &t).unwrap().mean(0, true).unwrap()
            };
            let want: Vec<f64> = fold_axis(
                &hx,
                0,
                |v, i| (v - hm.data[i % c]).powi(2),
                0.0,
                |a, b| a + b,
            )
            .iter()
            .map(|s| s / r as f64)
            .collect();
            let (fused, a) = run(&d, true, &centred);
            let (unfused, b) = run(&d, false, &centred);
            assert_eq!((fused, unfused), (1, 3), "{}", what("mean((x - m)^2)"));
            assert_close(&a, &want, &what("mean((x - m)^2), fused"));
            assert_eq!(a, b, "{}: fused and unfused", what("mean((x - m)^2)"));
            // max(abs(x)) over every axis.
            let peak = || x.abs().unwrap().max(None, false).unwrap();
            let want = hx.data.iter().fold(f64::MIN, |a, &v| a.max(v.abs()));
            let (fused, a) = run(&d, true, &peak);
            let (unfused, b) = run(&d, false, &peak);
            assert_eq!((fused, unfused), (1, 2), "{}", what("max(abs(x))"));
            assert_close(&a, &[want], &what("max(abs(x)), fused"));
            assert_eq!(a, b, "{}: fused and unfused", what("max(abs(x))"));
        }
    }
    d.set_fusion(true);
}

#[test]
fn a_held_intermediate_of_a_prologue_is_written_and_stays_readable() {
    let d = device();
    d.set_fusion(true); // whatever WGARRAY_FUSION says
    let mut rng = Rng::new(7);
    let (r, c) = (7, 33);
    let hx = Host::small(&[r, c], &mut rng);
    let x = common::host::dense(&d, &hx, DType::F32);
    x.eval().unwrap();
    // The user holds `p`; the sum reads `p + 1`.
    let p = (&x * 2.0).unwrap();
    let s = (&p + 1.0).unwrap().sum(-1, false).unwrap();
    let before = d.dispatches();
    s.eval().unwrap();
    let n = d.dispatches() - before;
    assert_eq!(n, 1, "p written by the reduction that reads it");
    let want_p: Vec<f64> = hx.data.iter().map(|v| 2.0 * v).collect();
    let want_s = fold_axis(&hx, 1, |v, _| 2.0 * v + 1.0, 0.0, |a, b| a + b);
    assert_close(&s.to_vec::<f32>().unwrap(), &want_s, "sum(p + 1)");
    let before = d.dispatches();
    assert_close(&p.to_vec::<f32>().unwrap(), &want_p, "held p");
    assert_eq!(d.dispatches() - before, 0, "p was written by that eval");
}

#[test]
fn a_residual_add_before_a_layer_norm_and_softmax_is_two_kernels() {
    let d = device();
    let mut rng = Rng::new(11);
    let (rows, cols) = (256, 1025);
    let a = Array::from_slice(&rng.vec_f32(rows * cols), &[rows, cols], &d).unwrap();
    let b = Array::from_slice(&rng.vec_f32(rows * cols), &[rows, cols], &d).unwrap();
    let w = Array::from_slice(&rng.vec_f32(cols), &[cols], &d).unwrap();
    let bias = Array::from_slice(&rng.vec_f32(cols), &[cols], &d).unwrap();
    let ln = || {
        (&a + &b)
            .unwrap()
            .layer_norm(Some(&w), Some(&bias), 1e-5)
            .unwrap()
    };
    let (fused, x) = run(&d, true, &ln);
    let (unfused, y) = run(&d, false, &ln);
    assert_eq!(
        fused, 2,
        "layer_norm(a + b): the sum, then the one-pass layer norm"
    );
    assert_eq!(unfused, 2, "layer_norm(a + b) unfused: the add, the norm");
    for (i, (p, q)) in x.iter().zip(&y).enumerate() {
        assert!((p - q).abs() <= 1e-4 * q.abs().max(1.0), "{i}: {p} vs {q}");
    }
    // softmax of a scaled, biased input: one kernel computes it, the
    // one-pass softmax reads it.
    let sm = || (&(&a * 0.5).unwrap() + &bias).unwrap().softmax(-1).unwrap();
    let (fused, x) = run(&d, true, &sm);
    let (_, y) = run(&d, false, &sm);
    assert_eq!(fused, 2, "softmax(a * 0.5 + bias)");
    for (i, (p, q)) in x.iter().zip(&y).enumerate() {
        assert!((p - q).abs() <= 1e-6, "{i}: {p} vs {q}");
    }
    d.set_fusion(true);
}

#[test]
fn packed_and_f64_prologues_fall_back_correctly() {
    let d = device();
    if common::is_gl(&d) {
        // GL has neither f16 arithmetic nor f64 here; the f32 paths above
        // run there.
        return;
    }
    let mut rng = Rng::new(23);
    let (r, c) = (33, 7);
    let hx = Host::small(&[r, c], &mut rng);
    let x = common::host::dense(&d, &hx, DType::F32);
    x.eval().unwrap();
    let want = fold_axis(&hx, 1, |v, _| 2.0 * v, 0.0, |a, b| a + b);
    // An f16 value inside the prologue (rounded as a store would round it)
    // and held by the user: 2-byte, so written by a kernel of its own.
    let h = (&x.astype(DType::F16).unwrap() * 2.0).unwrap();
    let s = h.astype(DType::F32).unwrap().sum(-1, false).unwrap();
    d.set_fusion(true);
    let before = d.dispatches();
    s.eval().unwrap();
    assert_eq!(
        d.dispatches() - before,
        2,
        "f16 held: its kernel, then the sum"
    );
    assert_close(&s.to_vec::<f32>().unwrap(), &want, "sum(f16 * 2)");
    let held: Vec<f32> = h.astype(DType::F32).unwrap().to_vec().unwrap();
    let want_h: Vec<f64> = hx.data.iter().map(|v| 2.0 * v).collect();
    assert_close(&held, &want_h, "held f16");
    // An f64 prologue: the reduction kernel has no f64 op helpers, so the
    // value is written first and reduced as usual (two dispatches).
    let x64 = x.astype(DType::F64).unwrap();
    x64.eval().unwrap();
    let dot = || (&x64 * 2.0).unwrap().sum(-1, false).unwrap();
    let y = dot();
    let before = d.dispatches();
    y.eval().unwrap();
    assert_eq!(d.dispatches() - before, 2, "f64 falls back");
    let got: Vec<f64> = y.to_vec().unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

#[test]
fn a_gemm_epilogue_keeps_the_adds_before_a_layer_norm() {
    let d = device();
    let mut rng = Rng::new(29);
    let (m, k, n) = (256, 33, 65);
    let x = Array::from_slice(&rng.vec_f32(m * k), &[m, k], &d).unwrap();
    let w = Array::from_slice(&rng.vec_f32(n * k), &[n, k], &d).unwrap();
    let b = Array::from_slice(&rng.vec_f32(n), &[n], &d).unwrap();
    let r = Array::from_slice(&rng.vec_f32(m * n), &[m, n], &d).unwrap();
    let g = Array::from_slice(&rng.vec_f32(n), &[n], &d).unwrap();
    let block = || {
        let y = (&(&x.matmul(&w.transpose()).unwrap() + &b).unwrap() + &r).unwrap();
        y.layer_norm(Some(&g), Some(&b), 1e-5).unwrap()
    };
    d.set_fusion(true);
    let text = wgarray::explain(&[&block()]).unwrap();
    assert!(text.contains("fused [matmul, add, add]"), "{text}");
    let (fused, p) = run(&d, true, &block);
    let (unfused, q) = run(&d, false, &block);
    assert_eq!(fused, 2, "the GEMM with its adds, the one-pass layer norm");
    assert!(unfused > fused);
    for (i, (a, c)) in p.iter().zip(&q).enumerate() {
        assert!((a - c).abs() <= 1e-4 * c.abs().max(1.0), "{i}: {a} vs {c}");
    }
    d.set_fusion(true);
}

/// A held value that a reduction's prologue writes is listed in the memory
/// snapshot under its own op and call site, as it is unfused (found by an
/// adversarial pass: it was listed under the reduction).
#[test]
fn memory_snapshot_names_a_value_written_by_a_reduction() {
    let mut rng = Rng::new(139);
    let hx = Host::small(&[9, 33], &mut rng);
    let mut seen = Vec::new();
    for fusion in [true, false] {
        let d = device();
        d.set_fusion(fusion);
        d.record_memory_history(true);
        let x = common::host::dense(&d, &hx, DType::F32);
        x.eval().unwrap();
        let p = (&x * 2.0).unwrap();
        let line = line!() - 1;
        let s = (&p + 1.0).unwrap().sum(-1, false).unwrap();
        wgarray::eval(&[&s, &p]).unwrap();
        let snap = d.memory_snapshot();
        let b = snap
            .buffers
            .iter()
            .find(|b| {
                b.arrays
                    .iter()
                    .any(|a| a.shape == vec![9, 33] && a.origin.is_some_and(|o| o.op == "multiply"))
            })
            .map(|b| {
                let o = b.origin.expect("origin");
                (o.op, o.location.line() == line)
            });
        seen.push(b);
        drop((x, p, s));
        common::assert_empty(&d);
    }
    assert_eq!(
        seen[0], seen[1],
        "fused vs unfused: (buffer origin op, at p's line)"
    );
    assert_eq!(seen[0], Some(("multiply", true)));
}
