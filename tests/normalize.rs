//! The one-pass normalisations over the last axis (softmax, log_softmax,
//! layer_norm with and without weight and bias, rms_norm: one kernel that
//! folds each row's statistics and writes the row) against f64 host loops:
//! rows of 1, 7, 33, 1025, 4099 and 65536 elements (the longest one pass
//! takes) and 65537, in 256 rows or more (one pass) and fewer (one pass
//! up to 4096 elements a row, else composed from a reduction and an
//! elementwise kernel), transposed,
//! strided and reversed views, a leading axis, f16, poisoned outputs, and
//! the dispatch counts that say which path ran.

mod common;

use common::host::{Host, dense, layouts};
use common::{R, Rng, device, is_gl, poison_pool};
use wgarray::{Array, DType, Device};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Softmax,
    LogSoftmax,
    /// With weight, with bias.
    LayerNorm(bool, bool),
    /// With weight.
    RmsNorm(bool),
}

const KINDS: [Kind; 8] = [
    Kind::Softmax,
    Kind::LogSoftmax,
    Kind::LayerNorm(false, false),
    Kind::LayerNorm(true, false),
    Kind::LayerNorm(false, true),
    Kind::LayerNorm(true, true),
    Kind::RmsNorm(false),
    Kind::RmsNorm(true),
];

const EPS: f64 = 1e-5;

/// `kind` of one row in f64 (`w`, `b` the weight and bias rows).
fn host_row(kind: Kind, r: &[f64], w: &[f64], b: &[f64]) -> Vec<f64> {
    let n = r.len() as f64;
    match kind {
        Kind::Softmax | Kind::LogSoftmax => {
            let m = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
            r.iter()
                .map(|v| {
                    if kind == Kind::Softmax {
                        (v - m).exp() / s
                    } else {
                        v - m - s.ln()
                    }
                })
                .collect()
        }
        Kind::LayerNorm(hw, hb) => {
            let mean = r.iter().sum::<f64>() / n;
            let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            let inv = 1.0 / (var + EPS).sqrt();
            r.iter()
                .enumerate()
                .map(|(j, v)| {
                    (v - mean) * inv * if hw { w[j] } else { 1.0 } + if hb { b[j] } else { 0.0 }
                })
                .collect()
        }
        Kind::RmsNorm(hw) => {
            let ms = r.iter().map(|v| v * v).sum::<f64>() / n;
            let inv = 1.0 / (ms + EPS).sqrt();
            r.iter()
                .enumerate()
                .map(|(j, v)| v * inv * if hw { w[j] } else { 1.0 })
                .collect()
        }
    }
}

/// `kind` of `x` over its last axis on the device.
fn run(kind: Kind, x: &Array, w: &Array, b: &Array) -> wgarray::Result<Array> {
    match kind {
        Kind::Softmax => x.softmax(-1),
        Kind::LogSoftmax => x.log_softmax(-1),
        Kind::LayerNorm(hw, hb) => x.layer_norm(hw.then_some(w), hb.then_some(b), EPS),
        Kind::RmsNorm(hw) => x.rms_norm(hw.then_some(w), EPS),
    }
}

/// Compare `got` with `kind` of the rows of `h` (last axis), relative
/// `tol` with a floor of `tol` (absolute for the logs).
fn check(what: &str, kind: Kind, h: &Host, wv: &[f64], bv: &[f64], got: &[f64], tol: f64) {
    let cols = *h.shape.last().unwrap();
    let want: Vec<f64> = h
        .data
        .chunks(cols)
        .flat_map(|r| host_row(kind, r, wv, bv))
        .collect();
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what} {kind:?}: element {i} (column {}): got {g}, want {w}",
            i % cols
        );
    }
}

/// Random f32-exact values in [-4, 4) (and `offset` added).
fn random_host(shape: &[usize], rng: &mut Rng, offset: f64) -> Host {
    Host::from_fn(shape, |_| offset + (rng.f32() as f64) * 4.0)
}

fn params(d: &Device, cols: usize, rng: &mut Rng) -> (Vec<f64>, Vec<f64>, Array, Array) {
    let wv: Vec<f64> = (0..cols).map(|_| 0.5 + rng.f32() as f64).collect();
    let bv: Vec<f64> = (0..cols).map(|_| rng.f32() as f64).collect();
    let w = common::host::upload(d, &wv, &[cols], DType::F32);
    let b = common::host::upload(d, &bv, &[cols], DType::F32);
    (wv, bv, w, b)
}

/// Every kind at every row length, dense f32, poisoned pool, with the
/// dispatch count: one kernel up to 65536 elements a row in 256 rows or
/// more, and up to 4096 in fewer rows; two or more beyond.
#[test]
fn every_kind_at_odd_row_lengths_in_one_dispatch() -> R {
    let d = device();
    let mut rng = Rng::new(71);
    for (rows, cols) in [
        (5, 1),
        (300, 1),
        (3, 7),
        (256, 7),
        (9, 33),
        (300, 33),
        (4, 1025),
        (257, 1025),
        (256, 4099),
        (2, 65536),
        (2, 65537),
    ] {
        let h = random_host(&[rows, cols], &mut rng, 0.0);
        let x = dense(&d, &h, DType::F32);
        let (wv, bv, w, b) = params(&d, cols, &mut rng);
        x.eval()?;
        w.eval()?;
        b.eval()?;
        for kind in KINDS {
            poison_pool(&d, rows * cols);
            let y = run(kind, &x, &w, &b)?;
            let before = d.dispatches();
            y.eval()?;
            let n = d.dispatches() - before;
            let what = format!("[{rows}, {cols}]");
            if (2..=65536).contains(&cols) && (rows >= 256 || cols <= 4096) {
                assert_eq!(n, 1, "{what} {kind:?}: one kernel");
            } else {
                assert!(n >= 2, "{what} {kind:?}: the composed path ({n})");
            }
            check(&what, kind, &h, &wv, &bv, &y.to_f64_vec()?, 2e-5);
        }
    }
    Ok(())
}

/// Views that are not dense rows (transposed: the row is strided in
/// memory; every axis stepped; axis 0 reversed) and a 3-d array.
#[test]
fn views_and_three_dimensions() -> R {
    let d = device();
    let mut rng = Rng::new(73);
    for shape in [vec![257usize, 33], vec![5, 1025], vec![3, 100, 9]] {
        let h = random_host(&shape, &mut rng, 0.0);
        let cols = *shape.last().unwrap();
        let (wv, bv, w, b) = params(&d, cols, &mut rng);
        for (name, x) in layouts(&d, &h, DType::F32) {
            for kind in KINDS {
                poison_pool(&d, 2 * h.size());
                let y = run(kind, &x, &w, &b)?;
                check(
                    &format!("{name} {shape:?}"),
                    kind,
                    &h,
                    &wv,
                    &bv,
                    &y.to_f64_vec()?,
                    2e-5,
                );
            }
        }
        // A weight read through a view (stepped) and a broadcast [1] one.
        let wbig: Vec<f64> = wv.iter().flat_map(|&v| [v, -9.0]).collect();
        let ws = common::host::upload(&d, &wbig, &[2 * cols], DType::F32)
            .slice(&[wgarray::Slice::new(None, None, 2)])?;
        let x = dense(&d, &h, DType::F32);
        let y = x.rms_norm(Some(&ws), EPS)?;
        check(
            "stepped weight",
            Kind::RmsNorm(true),
            &h,
            &wv,
            &bv,
            &y.to_f64_vec()?,
            2e-5,
        );
        let one = common::host::upload(&d, &[1.5], &[1], DType::F32);
        let y = x.layer_norm(Some(&one), None, EPS)?;
        let w15 = vec![1.5; cols];
        check(
            "weight [1]",
            Kind::LayerNorm(true, false),
            &h,
            &w15,
            &bv,
            &y.to_f64_vec()?,
            2e-5,
        );
    }
    Ok(())
}

/// A leading axis (and several axes) take the composed path, correct.
#[test]
fn a_leading_axis_is_composed() -> R {
    let d = device();
    let mut rng = Rng::new(79);
    let h = random_host(&[33, 7], &mut rng, 0.0);
    let x = dense(&d, &h, DType::F32);
    let t = h.permute(&[1, 0]);
    for kind in [Kind::Softmax, Kind::LogSoftmax] {
        let y = match kind {
            Kind::Softmax => x.softmax(0)?,
            _ => x.log_softmax(0)?,
        };
        let before = d.dispatches();
        y.eval()?;
        assert_eq!(d.dispatches() - before, 2, "{kind:?} over axis 0");
        // The reference over the transposed host array, transposed back.
        let yt = Host {
            shape: vec![33, 7],
            data: y.to_f64_vec()?,
        }
        .permute(&[1, 0]);
        check("axis 0", kind, &t, &[], &[], &yt.data, 2e-5);
    }
    Ok(())
}

/// A large mean against a small spread: the two-pass variance keeps
/// layer_norm accurate (`E[x^2] - E[x]^2` in f32 would lose every digit).
#[test]
fn layer_norm_of_rows_with_a_large_mean() -> R {
    let d = device();
    let mut rng = Rng::new(83);
    // f32-exact values: 1000 plus multiples of 2^-13 in [-1, 1). (The
    // f32 mean itself is within half an ulp of 1000, 3e-5: the result's
    // error floor against a spread of 0.6.)
    let h = Host::from_fn(&[6, 1025], |_| {
        1000.0 + ((rng.f32() as f64) * 8192.0).round() / 8192.0
    });
    let x = dense(&d, &h, DType::F32);
    let (wv, bv, w, b) = params(&d, 1025, &mut rng);
    let y = x.layer_norm(Some(&w), Some(&b), EPS)?;
    check(
        "mean 1000",
        Kind::LayerNorm(true, true),
        &h,
        &wv,
        &bv,
        &y.to_f64_vec()?,
        2e-3,
    );
    Ok(())
}

/// f16 and bf16 rows (Vulkan: f16 storage; GL has no f16), the result
/// rounded once to the input's dtype.
#[test]
fn half_precision_rows() -> R {
    let d = device();
    let mut rng = Rng::new(89);
    let dtypes: &[DType] = if is_gl(&d) {
        &[DType::BF16]
    } else {
        &[DType::F16, DType::BF16]
    };
    for &dt in dtypes {
        for (rows, cols) in [(3, 7), (4, 1025), (300, 64)] {
            let h0 = random_host(&[rows, cols], &mut rng, 0.0);
            let x = dense(&d, &h0, dt);
            // The reference reads the values the array holds.
            let h = Host {
                shape: h0.shape.clone(),
                data: x.to_f64_vec()?,
            };
            let (wv, bv, w, b) = params(&d, cols, &mut rng);
            for kind in KINDS {
                poison_pool(&d, rows * cols);
                let y = run(kind, &x, &w, &b)?;
                assert_eq!(y.dtype(), dt);
                let tol = if dt == DType::F16 { 2e-3 } else { 1.6e-2 };
                check(
                    &format!("{dt:?} [{rows}, {cols}]"),
                    kind,
                    &h,
                    &wv,
                    &bv,
                    &y.to_f64_vec()?,
                    tol,
                );
            }
        }
    }
    Ok(())
}

/// Infinities and NaN in a row: softmax as the composed path gives it
/// (a row with NaN or an infinity is NaN); -inf alone is 0.
#[test]
fn non_finite_rows() -> R {
    let d = device();
    let inf = f32::INFINITY;
    let x = Array::from_slice(
        &[
            1.0,
            2.0,
            f32::NAN,
            0.0,
            inf,
            1.0,
            0.0,
            0.0,
            -inf,
            0.0,
            0.0,
            0.0,
        ],
        &[3, 4],
        &d,
    )?;
    let s = x.softmax(-1)?.to_vec::<f32>()?;
    assert!(s[..8].iter().all(|v| v.is_nan()), "{s:?}");
    assert_eq!(&s[8..], &[0.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]);
    Ok(())
}
