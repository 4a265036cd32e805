//! Four numerical faults, each tested over its kind: every float dtype,
//! the edges, on the backend WGARRAY_BACKEND picks (scripts/test.sh runs
//! both).
//!
//! - softmax and log_softmax subtract the maximum: equal values give
//!   exactly `1/n` and `-ln n` however large they are;
//! - log1p and expm1 are within 2 ulp of the true value (f64 `ln_1p`,
//!   `exp_m1`) over the whole f32 range, swept through every binade;
//! - float to integer casts saturate at the integer type's own limits;
//! - reductions without an identity refuse empty axes.

mod common;

use common::arrays::{of_dtype, round_to};
use common::reference::{every_half_value, max_error};
use wgarray::{Array, Axes, DType, Error, Slice};

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Distance of `got` from the true value `want` in units in the last place
/// of `dtype` at `want` (0 when `got` is `want` correctly rounded, which
/// covers infinities, NaN and signed zeros).
fn ulps(got: f64, want: f64, dtype: DType) -> f64 {
    let rounded = round_to(want, dtype);
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if got.to_bits() == rounded.to_bits() {
        return 0.0;
    }
    if got.is_infinite() || rounded.is_infinite() || (got == 0.0 && rounded == 0.0) {
        // An infinity where a finite value belongs (or the reverse), or a
        // zero of the wrong sign.
        return f64::INFINITY;
    }
    let (mantissa, min_exp) = match dtype {
        DType::F32 => (23, -126),
        DType::F16 => (10, -14),
        DType::BF16 => (7, -126),
        _ => unreachable!(),
    };
    let e = (want.abs().log2().floor() as i32).max(min_exp);
    (got - want).abs() / 2f64.powi(e - mantissa)
}

/// [`ulps`] in f32.
fn f32_ulps(got: f64, want: f64) -> f64 {
    ulps(got, want, DType::F32)
}

// ---- softmax ----

/// Every float dtype; values far from 0 (where `exp(x - logsumexp(x))`
/// lost the low bits of `x`); rows of powers of two give exactly `1/n`,
/// other lengths within 1 ulp; `log_softmax` is `-ln n` within 1 ulp.
#[test]
fn softmax_of_equal_values_is_exactly_one_over_n() {
    let d = common::device();
    for dtype in FLOATS {
        let big = if dtype == DType::F16 { 6e4 } else { 1e30 };
        for value in [500.0, -500.0, 0.0, 88.0, -3e4, big, -big, 1e-3] {
            for n in [1usize, 2, 4, 7, 8, 33, 64, 1024, 1025] {
                let x = of_dtype(&d, &vec![value; n], &[n], dtype);
                let s = x.softmax(0).unwrap().to_f64_vec().unwrap();
                let l = x.log_softmax(0).unwrap().to_f64_vec().unwrap();
                let want_s = 1.0 / n as f64;
                // 0 - ln n: +0 for one element, as PyTorch.
                let want_l = 0.0 - (n as f64).ln();
                for (i, (&s, &l)) in s.iter().zip(&l).enumerate() {
                    let tol = if n.is_power_of_two() { 0.0 } else { 1.0 };
                    assert!(
                        ulps(s, want_s, dtype) <= tol,
                        "{dtype} softmax([{value}; {n}])[{i}] = {s}, want {want_s}"
                    );
                    assert!(
                        ulps(l, want_l, dtype) <= 1.0,
                        "{dtype} log_softmax([{value}; {n}])[{i}] = {l}, want {want_l}"
                    );
                }
            }
        }
    }
}

/// The case, on its own: `softmax([500; 4])` is exactly 0.25.
#[test]
fn softmax_of_four_fives_hundreds_is_a_quarter() {
    let d = common::device();
    let x = Array::from_slice(&[500.0f32; 4], &[4], &d).unwrap();
    assert_eq!(
        x.softmax(0).unwrap().to_vec::<f32>().unwrap(),
        vec![0.25; 4]
    );
    let l = x.log_softmax(0).unwrap().to_vec::<f32>().unwrap();
    for v in l {
        assert!(ulps(v as f64, -(4f64.ln()), DType::F32) <= 1.0, "{v}");
    }
}

fn softmax_ref(row: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = row.iter().map(|x| (x - m).exp()).sum();
    (
        row.iter().map(|x| (x - m).exp() / s).collect(),
        row.iter().map(|x| (x - m) - s.ln()).collect(),
    )
}

/// Random rows of large spread, odd lengths, along either axis of a 2-D
/// array (the first axis is strided) and of a transposed view, against an
/// f64 reference computed from the rounded inputs.
#[test]
fn softmax_matches_f64_on_random_rows_along_any_axis() {
    let d = common::device();
    let mut rng = common::Rng::new(21);
    for dtype in FLOATS {
        for (rows, cols) in [(1usize, 1usize), (3, 7), (5, 33), (2, 1025)] {
            let scale = if dtype == DType::F16 { 30.0 } else { 200.0 };
            let raw: Vec<f64> = (0..rows * cols).map(|_| rng.f32() as f64 * scale).collect();
            let vals: Vec<f64> = raw.iter().map(|&x| round_to(x, dtype)).collect();
            let x = of_dtype(&d, &vals, &[rows, cols], dtype);
            let xt = x.transpose();
            // (array, axis, rows of the reference as index lists)
            let row_major: Vec<Vec<usize>> = (0..rows)
                .map(|r| (0..cols).map(|c| r * cols + c).collect())
                .collect();
            let col_major: Vec<Vec<usize>> = (0..cols)
                .map(|c| (0..rows).map(|r| r * cols + c).collect())
                .collect();
            let cases = [
                (&x, 1isize, &row_major, false),
                (&x, 0, &col_major, false),
                (&xt, 0, &row_major, true),
            ];
            for (a, axis, groups, transposed) in cases {
                let s = a.softmax(axis).unwrap().to_f64_vec().unwrap();
                let l = a.log_softmax(axis).unwrap().to_f64_vec().unwrap();
                let out_cols = a.shape()[1];
                for g in groups.iter() {
                    let row: Vec<f64> = g.iter().map(|&i| vals[i]).collect();
                    let (ws, wl) = softmax_ref(&row);
                    for (j, &i) in g.iter().enumerate() {
                        // Position of input element i in the output.
                        let (r, c) = (i / cols, i % cols);
                        let o = if transposed { c * out_cols + r } else { i };
                        let eps = match dtype {
                            DType::F32 => 2e-6,
                            DType::F16 => 2e-3,
                            _ => 1.6e-2,
                        };
                        assert!(
                            (s[o] - ws[j]).abs() <= eps * ws[j] + 1e-7,
                            "{dtype} softmax axis {axis} ({rows}x{cols}): {} vs {}",
                            s[o],
                            ws[j]
                        );
                        assert!(
                            (l[o] - wl[j]).abs() <= eps * (1.0 + wl[j].abs()),
                            "{dtype} log_softmax axis {axis} ({rows}x{cols}): {} vs {}",
                            l[o],
                            wl[j]
                        );
                    }
                }
            }
        }
    }
}

/// Integer input gives f32; -inf entries give 0 (and -inf); an empty
/// array stays empty.
#[test]
fn softmax_edges() {
    let d = common::device();
    let i = Array::from_slice(&[1i32, 1, 1, 1], &[4], &d).unwrap();
    let s = i.softmax(0).unwrap();
    assert_eq!(s.dtype(), DType::F32);
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![0.25; 4]);
    let x = Array::from_slice(&[f32::NEG_INFINITY, 2.0, 2.0], &[3], &d).unwrap();
    assert_eq!(
        x.softmax(0).unwrap().to_vec::<f32>().unwrap(),
        vec![0.0, 0.5, 0.5]
    );
    let l = x.log_softmax(0).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(l[0], f32::NEG_INFINITY);
    let e = Array::zeros(&[3, 0], DType::F32, &d).unwrap();
    for axis in [0, 1] {
        assert_eq!(e.softmax(axis).unwrap().shape(), &[3, 0]);
        assert_eq!(e.log_softmax(axis).unwrap().shape(), &[3, 0]);
    }
    assert!(matches!(x.softmax(1), Err(Error::InvalidAxis { .. })));
}

// ---- log1p and expm1 ----

/// Bit patterns from `lo` up to (not including) `hi`, every `step`-th.
fn sweep(lo: u32, hi: u32, step: u32) -> impl Iterator<Item = f32> {
    (lo..hi).step_by(step as usize).map(f32::from_bits)
}

/// Inputs around each bit pattern in `at`: 2048 either side.
fn around(at: &[u32]) -> Vec<f32> {
    at.iter()
        .flat_map(|&b| (b - 2048..b + 2048).map(f32::from_bits))
        .collect()
}

/// An op under test and its f64 truth.
type UnaryOp = fn(&Array) -> wgarray::Result<Array>;
type Truth = fn(f64) -> f64;

fn log1p_inputs() -> Vec<f32> {
    let mut v: Vec<f32> = sweep(0, 0x7f80_0000, 0x800).collect();
    v.extend(sweep(0x8000_0000, 0xbf80_0000, 0x800));
    // The reduction's thresholds (sqrt(2) - 1, 1 - sqrt(2)/2), |x| = 2^-24,
    // and just above -1.
    v.extend(around(&[
        0x3ed4_13d0,
        0xbe95_f619,
        0x3380_0000,
        0xb380_0000,
    ]));
    v.extend(sweep(0xbf7f_f000, 0xbf80_0000, 1));
    v
}

fn expm1_inputs() -> Vec<f32> {
    let mut v: Vec<f32> = sweep(0, 0x42b1_7218, 0x400).collect();
    v.extend(sweep(0x8000_0000, 0xff80_0000, 0x800));
    // Thresholds: ln 2 / 2, 3 ln 2 / 2, 27 ln 2 (both signs), |x| = 2^-25,
    // and the top just below ln(f32::MAX).
    v.extend(around(&[
        0x3eb1_7218,
        0xbeb1_7218,
        0x3f85_1592,
        0xbf85_1592,
        0x4195_b844,
        0xc195_b844,
        0x3300_0000,
        0xb300_0000,
    ]));
    v.extend(sweep(0x42b1_6218, 0x42b1_7218, 1));
    v
}

/// Within 2 ulp of f64's `ln_1p` over a sweep of every binade of
/// (-1, f32::MAX], the reduction's thresholds, and the approach to -1.
#[test]
fn log1p_is_within_2_ulp_over_the_whole_f32_range() {
    let d = common::device();
    let (u, x, g) = max_error(&d, &log1p_inputs(), Array::log1p, f64::ln_1p, f32_ulps);
    eprintln!("log1p on {}: max {u:.3} ulp (at x = {x:e})", d.backend());
    assert!(
        u <= 2.0,
        "log1p({x:e}) = {g:e}: {u} ulp from {:e}",
        (x as f64).ln_1p()
    );
}

/// Within 2 ulp of f64's `exp_m1` over a sweep of every binade up to
/// ln(f32::MAX), of the negative half line, and the reduction's thresholds.
#[test]
fn expm1_is_within_2_ulp_over_the_whole_f32_range() {
    let d = common::device();
    let (u, x, g) = max_error(&d, &expm1_inputs(), Array::expm1, f64::exp_m1, f32_ulps);
    eprintln!("expm1 on {}: max {u:.3} ulp (at x = {x:e})", d.backend());
    assert!(
        u <= 2.0,
        "expm1({x:e}) = {g:e}: {u} ulp from {:e}",
        (x as f64).exp_m1()
    );
}

/// Special values, exactly, on the bits (signed zeros included).
#[test]
fn log1p_and_expm1_special_values() {
    let d = common::device();
    let inf = f32::INFINITY;
    let cases: [(f32, f32, f32); 12] = [
        // (x, log1p(x), expm1(x))
        (0.0, 0.0, 0.0),
        (-0.0, -0.0, -0.0),
        (-1.0, -inf, (-1f64).exp_m1() as f32),
        (inf, inf, inf),
        (-inf, f32::NAN, -1.0),
        (f32::NAN, f32::NAN, f32::NAN),
        (-1.5, f32::NAN, (-1.5f64).exp_m1() as f32),
        (1e-30, 1e-30, 1e-30),
        (f32::from_bits(1), f32::from_bits(1), f32::from_bits(1)),
        (f32::MAX, (f32::MAX as f64).ln_1p() as f32, inf),
        (89.0, 89f64.ln_1p() as f32, inf),
        (-200.0, f32::NAN, -1.0),
    ];
    let xs: Vec<f32> = cases.iter().map(|c| c.0).collect();
    let x = Array::from_slice(&xs, &[xs.len()], &d).unwrap();
    let l = x.log1p().unwrap().to_vec::<f32>().unwrap();
    let e = x.expm1().unwrap().to_vec::<f32>().unwrap();
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    for (i, &(x, wl, we)) in cases.iter().enumerate() {
        assert!(same(l[i], wl), "log1p({x:e}) = {:e}, want {wl:e}", l[i]);
        assert!(same(e[i], we), "expm1({x:e}) = {:e}, want {we:e}", e[i]);
    }
}

/// f16 and bf16, every one of their 65536 values: computed in f32 and
/// rounded once, so within 1 ulp of the type. Also through a reversed
/// (strided) view, and integer input (computed in f32).
#[test]
fn log1p_and_expm1_on_every_half_and_bfloat_value_and_on_views() {
    let d = common::device();
    for dtype in [DType::F16, DType::BF16] {
        let values = every_half_value(dtype);
        let x = of_dtype(&d, &values, &[values.len()], dtype);
        let ops: [(&str, UnaryOp, Truth); 2] = [
            ("log1p", Array::log1p, f64::ln_1p),
            ("expm1", Array::expm1, f64::exp_m1),
        ];
        for (name, op, truth) in ops {
            let got = op(&x).unwrap();
            assert_eq!(got.dtype(), dtype);
            let got = got.to_f64_vec().unwrap();
            for (&v, &g) in values.iter().zip(&got) {
                let u = ulps(g, truth(v), dtype);
                assert!(
                    u <= 1.0,
                    "{dtype} {name}({v:e}) = {g:e}: {u} ulp from {:e}",
                    truth(v)
                );
            }
        }
    }
    // A reversed view of f32 values, and i32 input.
    let v: Vec<f32> = (0..1025).map(|i| i as f32 * 0.37 - 0.99).collect();
    let x = Array::from_slice(&v, &[1025], &d).unwrap();
    let rev = x.slice(&[Slice::new(None, None, -1)]).unwrap();
    let got = rev.log1p().unwrap().to_vec::<f32>().unwrap();
    for (i, &g) in got.iter().enumerate() {
        let want = (v[1024 - i] as f64).ln_1p();
        assert!(
            ulps(g as f64, want, DType::F32) <= 2.0,
            "log1p(rev)[{i}] = {g}"
        );
    }
    let ints: Vec<i32> = (0..33).map(|i| i * 7 - 10).collect();
    let xi = Array::from_slice(&ints, &[33], &d).unwrap();
    let got = xi.expm1().unwrap();
    assert_eq!(got.dtype(), DType::F32);
    for (&i, &g) in ints.iter().zip(&got.to_vec::<f32>().unwrap()) {
        assert!(
            ulps(g as f64, (i as f64).exp_m1(), DType::F32) <= 2.0,
            "expm1({i}) = {g}"
        );
    }
}

// ---- astype saturation ----

/// Float to i32 and u32 saturates at the integer type's limits (what Rust's
/// `as` does: NaN to 0, negative to 0 for u32), for every float dtype, on a
/// dense and a strided (reversed) operand.
#[test]
fn float_to_integer_casts_saturate_at_the_integer_limits() {
    let d = common::device();
    let values = [
        3e9,
        -3e9,
        5e9,
        -5e9,
        2147483648.0,
        2147483520.0,
        -2147483648.0,
        -2147483904.0,
        4294967296.0,
        4294967040.0,
        1e38,
        -1e38,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        65504.0,
        -65504.0,
        1.5,
        -1.5,
        -0.0,
        0.999,
        -0.999,
        16777217.0,
    ];
    for dtype in FLOATS {
        let rounded: Vec<f32> = values.iter().map(|&v| round_to(v, dtype) as f32).collect();
        let x = of_dtype(&d, &values, &[values.len()], dtype);
        let rev = x.slice(&[Slice::new(None, None, -1)]).unwrap();
        for (a, reversed) in [(&x, false), (&rev, true)] {
            let i = a.astype(DType::I32).unwrap().to_vec::<i32>().unwrap();
            let u = a.astype(DType::U32).unwrap().to_vec::<u32>().unwrap();
            for k in 0..values.len() {
                let v = rounded[if reversed { values.len() - 1 - k } else { k }];
                assert_eq!(
                    i[k], v as i32,
                    "{dtype} {v:e} as i32 (reversed: {reversed})"
                );
                assert_eq!(
                    u[k], v as u32,
                    "{dtype} {v:e} as u32 (reversed: {reversed})"
                );
            }
        }
    }
    // The two cases.
    let x = Array::from_slice(&[3e9f32, 5e9], &[2], &d).unwrap();
    assert_eq!(
        x.astype(DType::I32).unwrap().to_vec::<i32>().unwrap()[0],
        i32::MAX
    );
    assert_eq!(
        x.astype(DType::U32).unwrap().to_vec::<u32>().unwrap()[1],
        u32::MAX
    );
}

// ---- empty reductions ----

/// max, min, argmax and argmin over an axis of length 0 are a typed
/// error for every dtype, however the axes are given; over non-empty axes of
/// an empty array they give an empty result; reductions with an identity
/// still work on empty axes.
#[test]
fn reductions_without_identity_refuse_empty_axes() {
    let d = common::device();
    // f64 where the adapter has it (tests/dtypes.rs checks the error).
    let f64_ok = d
        .features()
        .contains(wgarray::wgpu::Features::SHADER_F64 | wgarray::wgpu::Features::SHADER_INT64);
    for dtype in DType::ALL
        .into_iter()
        .filter(|&t| t != DType::F64 || f64_ok)
    {
        for (shape, axes) in [
            (vec![0usize], Axes::All),
            (vec![0], Axes::from(0isize)),
            (vec![3, 0], Axes::from(1isize)),
            (vec![3, 0], Axes::from(-1isize)),
            (vec![0, 3], Axes::from(0isize)),
            (vec![2, 0, 5], Axes::from([0isize, 1])),
            (vec![2, 0, 5], Axes::All),
        ] {
            let x = Array::zeros(&shape, dtype, &d).unwrap();
            for keepdims in [false, true] {
                for (name, r) in [
                    ("max", x.max(axes.clone(), keepdims)),
                    ("min", x.min(axes.clone(), keepdims)),
                ] {
                    match r {
                        Err(Error::EmptyReduction { op, shape: s, .. }) => {
                            assert_eq!((op, &s), (name, &shape));
                        }
                        other => panic!(
                            "{dtype} {name}{shape:?} over {axes:?}: {:?}",
                            other.map(|a| a.shape().to_vec())
                        ),
                    }
                }
            }
        }
        let x = Array::zeros(&[3, 0], dtype, &d).unwrap();
        for (name, r) in [
            ("argmax", x.argmax(1, false)),
            ("argmin", x.argmin(-1, true)),
            ("argmax", x.argmax(None, false)),
            ("argmin", x.argmin(None, false)),
        ] {
            assert!(
                matches!(r, Err(Error::EmptyReduction { op, .. }) if op == name),
                "{dtype} {name}: {:?}",
                r.map(|a| a.shape().to_vec())
            );
        }
        // Non-empty reduced axes of an empty array: an empty result.
        let y = Array::zeros(&[0, 3], dtype, &d).unwrap();
        assert_eq!(y.max(1, false).unwrap().shape(), &[0]);
        assert_eq!(
            y.argmin(1, false).unwrap().to_vec::<u32>().unwrap(),
            Vec::<u32>::new()
        );
    }
    // Reductions with an identity keep working on empty axes.
    let z = Array::zeros(&[3, 0], DType::F32, &d).unwrap();
    assert_eq!(
        z.sum(1, false).unwrap().to_vec::<f32>().unwrap(),
        vec![0.0; 3]
    );
    assert_eq!(
        z.prod(1, false).unwrap().to_vec::<f32>().unwrap(),
        vec![1.0; 3]
    );
    assert_eq!(
        z.all(1, false).unwrap().to_vec::<bool>().unwrap(),
        vec![true; 3]
    );
    let msg = z.max(1, false).unwrap_err().to_string();
    assert!(
        msg.contains("max of an empty sequence") && msg.contains("[3, 0]"),
        "{msg}"
    );
}
