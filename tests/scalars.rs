//! Operators for every operand mix and scalars as NumPy 2 (NEP 50) and MLX
//! take them: `a + b`, `&a + &b`, `a + &b`, `&a + b`, `&a * 2.0`,
//! `2.0 * &a`, `&a + 1i32`, for `+ - * / %` and unary `-`; scalar
//! comparisons (`a.greater(0.0)`); a scalar's dtype from its Rust type,
//! never its value; no buffer for a scalar. Values against f64 host
//! references on random data, odd sizes and strided views.

mod common;

use common::{R, Rng, assert_empty, device};
use half::{bf16, f16};
use wgarray::{Array, DType, Device, Error, Slice, where_};

/// A random f32 vector in `[-4, 4)`, no zeros (so `/` and `%` are finite).
fn data(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let x = rng.f32() * 8.0 - 4.0;
            if x.abs() < 0.25 { 0.5 } else { x }
        })
        .collect()
}

fn floor_rem(a: f64, b: f64) -> f64 {
    a - b * (a / b).floor()
}

/// The five operators as host functions on f64.
type HostOp = fn(f64, f64) -> f64;

const OPS: [(&str, HostOp); 5] = [
    ("+", |a, b| a + b),
    ("-", |a, b| a - b),
    ("*", |a, b| a * b),
    ("/", |a, b| a / b),
    ("%", floor_rem),
];

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-6 * w.abs().max(1.0);
        assert!((g - w).abs() <= tol, "{what}[{k}]: got {g}, want {w}");
    }
}

/// `a op b` through every array-array operand mix, for one operator.
fn array_mixes(a: &Array, b: &Array, op: usize) -> Vec<Array> {
    let (ao, bo) = (a.clone(), b.clone());
    let r = match op {
        0 => [
            a + b,
            ao.clone() + bo.clone(),
            ao.clone() + b,
            a + bo.clone(),
        ],
        1 => [
            a - b,
            ao.clone() - bo.clone(),
            ao.clone() - b,
            a - bo.clone(),
        ],
        2 => [
            a * b,
            ao.clone() * bo.clone(),
            ao.clone() * b,
            a * bo.clone(),
        ],
        3 => [
            a / b,
            ao.clone() / bo.clone(),
            ao.clone() / b,
            a / bo.clone(),
        ],
        _ => [
            a % b,
            ao.clone() % bo.clone(),
            ao.clone() % b,
            a % bo.clone(),
        ],
    };
    r.into_iter().map(|x| x.unwrap()).collect()
}

#[test]
fn every_array_operand_mix_matches_the_reference() -> R {
    let d = device();
    let mut rng = Rng::new(5);
    for (rows, cols) in [(1, 1), (7, 33), (33, 31)] {
        let n = rows * cols;
        let (x, y) = (data(&mut rng, n), data(&mut rng, n));
        // `a` a transposed view, `b` dense: the mixes read strided operands.
        let a = Array::from_slice(&x, &[cols, rows], &d)?.transpose();
        let b = Array::from_slice(&y, &[rows, cols], &d)?;
        let xt: Vec<f64> = (0..n)
            .map(|k| x[(k % cols) * rows + k / cols] as f64)
            .collect();
        for (op, (name, f)) in OPS.iter().enumerate() {
            let want: Vec<f64> = xt.iter().zip(&y).map(|(&p, &q)| f(p, q as f64)).collect();
            for (mix, r) in array_mixes(&a, &b, op).iter().enumerate() {
                assert_eq!(r.shape(), &[rows, cols]);
                close(
                    &r.to_f64_vec()?,
                    &want,
                    &format!("{rows}x{cols} {name} mix {mix}"),
                );
            }
        }
        let neg: Vec<f64> = xt.iter().map(|v| -v).collect();
        close(&(-&a)?.to_f64_vec()?, &neg, "-&a");
        close(&(-a.clone())?.to_f64_vec()?, &neg, "-a");
    }
    Ok(())
}

/// `x op s` (borrowed and owned) for one scalar type, against the
/// reference, each of dtype `want_dtype(op)`.
macro_rules! scalar_right {
    ($a:expr, $host:expr, $s:expr, $want_dtype:expr) => {
        scalar_right!($a, $host, $s, $s as f64, $want_dtype)
    };
    ($a:expr, $host:expr, $s:expr, $value:expr, $want_dtype:expr) => {{
        let a: &Array = $a;
        let s = $s;
        let got: [(&str, Array, usize); 10] = [
            ("&a + s", (a + s)?, 0),
            ("a + s", (a.clone() + s)?, 0),
            ("&a - s", (a - s)?, 1),
            ("a - s", (a.clone() - s)?, 1),
            ("&a * s", (a * s)?, 2),
            ("a * s", (a.clone() * s)?, 2),
            ("&a / s", (a / s)?, 3),
            ("a / s", (a.clone() / s)?, 3),
            ("&a % s", (a % s)?, 4),
            ("a % s", (a.clone() % s)?, 4),
        ];
        check_mixes(got, &$host, $value, false, $want_dtype, &format!("{s:?}"))?;
    }};
}

/// `s op x` (borrowed and owned), for the scalar types the left side takes.
macro_rules! scalar_left {
    ($a:expr, $host:expr, $s:expr, $want_dtype:expr) => {
        scalar_left!($a, $host, $s, $s as f64, $want_dtype)
    };
    ($a:expr, $host:expr, $s:expr, $value:expr, $want_dtype:expr) => {{
        let a: &Array = $a;
        let s = $s;
        let got: [(&str, Array, usize); 10] = [
            ("s + &a", (s + a)?, 0),
            ("s + a", (s + a.clone())?, 0),
            ("s - &a", (s - a)?, 1),
            ("s - a", (s - a.clone())?, 1),
            ("s * &a", (s * a)?, 2),
            ("s * a", (s * a.clone())?, 2),
            ("s / &a", (s / a)?, 3),
            ("s / a", (s / a.clone())?, 3),
            ("s % &a", (s % a)?, 4),
            ("s % a", (s % a.clone())?, 4),
        ];
        check_mixes(got, &$host, $value, true, $want_dtype, &format!("{s:?}"))?;
    }};
}

fn check_mixes(
    got: [(&str, Array, usize); 10],
    host: &[f64],
    s: f64,
    flipped: bool,
    want_dtype: impl Fn(&str) -> DType,
    scalar: &str,
) -> R {
    for (what, r, op) in got {
        assert_eq!(r.dtype(), want_dtype(what), "{what} with {scalar}");
        let f = OPS[op].1;
        let want: Vec<f64> = host
            .iter()
            .map(|&v| if flipped { f(s, v) } else { f(v, s) })
            .collect();
        close(&r.to_f64_vec()?, &want, &format!("{what} with {scalar}"));
    }
    Ok(())
}

#[test]
fn scalars_of_every_type_on_either_side() -> R {
    let d = device();
    let mut rng = Rng::new(6);
    for n in [1, 7, 33] {
        // A float array (a stepped view) with f32, f64, i32, u32 scalars:
        // the array's dtype throughout.
        let x = data(&mut rng, 2 * n);
        let a = Array::from_slice(&x, &[2 * n], &d)?.slice(&[Slice::step(2)])?;
        let host: Vec<f64> = x.iter().step_by(2).map(|&v| v as f64).collect();
        let f32_all = |_: &str| DType::F32;
        scalar_right!(&a, host, 2.5f32, f32_all);
        scalar_right!(&a, host, -0.75f64, f32_all);
        scalar_right!(&a, host, 3i32, f32_all);
        scalar_right!(&a, host, 3u32, f32_all);
        scalar_left!(&a, host, 2.5, f32_all);
        scalar_left!(&a, host, -3, f32_all);
        // An integer array: integer scalars keep i32 (but `/` is true
        // division, f32); float scalars give f32, whatever their value.
        let xi: Vec<i32> = (0..n as i32)
            .map(|k| if k * 7 == 20 { 3 } else { k * 7 - 20 })
            .collect();
        let ai = Array::from_slice(&xi, &[n], &d)?;
        let hi: Vec<f64> = xi.iter().map(|&v| v as f64).collect();
        let int_ops = |what: &str| {
            if what.contains('/') {
                DType::F32
            } else {
                DType::I32
            }
        };
        scalar_right!(&ai, hi, 3i32, int_ops);
        scalar_right!(&ai, hi, 3u32, int_ops);
        scalar_right!(&ai, hi, 2.0f64, f32_all);
        scalar_right!(&ai, hi, 2.5f32, f32_all);
        scalar_left!(&ai, hi, 5, int_ops);
        scalar_left!(&ai, hi, 2.0, f32_all);
    }
    // Bool scalars take the array's dtype (true is 1).
    let a = Array::from_slice(&[1.5f32, -2.0], &[2], &d)?;
    assert_eq!((&a + true)?.to_vec::<f32>()?, vec![2.5, -1.0]);
    assert_eq!((false * &a)?.to_vec::<f32>()?, vec![0.0, -0.0]);
    // f16 and bf16 scalars are floats like the others.
    assert_eq!((&a * f16::from_f32(2.0))?.to_vec::<f32>()?, vec![3.0, -4.0]);
    assert_eq!(
        (&a - bf16::from_f32(1.0))?.to_vec::<f32>()?,
        vec![0.5, -3.0]
    );
    Ok(())
}

/// Issue 37: every scalar type on the right of every operator, and on the
/// left the five types that can be there without making an unsuffixed
/// literal ambiguous (f64, i32, bool, f16, bf16; see `wgarray::Scalar`).
/// A compile-pass test too: the literal forms at the end stop compiling
/// if a second float or integer type is added on the left.
#[test]
fn every_scalar_type_on_the_right_and_the_literal_safe_ones_on_the_left() -> R {
    let d = device();
    let mut rng = Rng::new(37);
    for n in [1, 7, 33] {
        let x = data(&mut rng, 2 * n);
        // A stepped view of an f32 array: every scalar takes its dtype.
        let a = Array::from_slice(&x, &[2 * n], &d)?.slice(&[Slice::step(2)])?;
        let host: Vec<f64> = x.iter().step_by(2).map(|&v| v as f64).collect();
        let f32_all = |_: &str| DType::F32;
        scalar_right!(&a, host, 1.5f32, f32_all);
        scalar_right!(&a, host, 1.5f64, f32_all);
        scalar_right!(&a, host, f16::from_f32(1.5), 1.5, f32_all);
        scalar_right!(&a, host, bf16::from_f32(1.5), 1.5, f32_all);
        scalar_right!(&a, host, 3i32, f32_all);
        scalar_right!(&a, host, 3i64, f32_all);
        scalar_right!(&a, host, 3isize, f32_all);
        scalar_right!(&a, host, 3u32, f32_all);
        scalar_right!(&a, host, 3u64, f32_all);
        scalar_right!(&a, host, 3usize, f32_all);
        scalar_left!(&a, host, 1.5f64, f32_all);
        scalar_left!(&a, host, 3i32, f32_all);
        scalar_left!(&a, host, f16::from_f32(1.5), 1.5, f32_all);
        scalar_left!(&a, host, bf16::from_f32(-2.5), -2.5, f32_all);
        let t = true;
        let got = [(t + &a)?, (t * a.clone())?, (t - &a)?];
        let want: [Vec<f64>; 3] = [
            host.iter().map(|v| 1.0 + v).collect(),
            host.clone(),
            host.iter().map(|v| 1.0 - v).collect(),
        ];
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.dtype(), DType::F32);
            close(&g.to_f64_vec()?, w, "bool on the left");
        }
    }
    // The forms an unsuffixed literal on the left must keep compiling:
    // the result's type is known before `?` and the method after it.
    let a = Array::from_slice(&[0.5f32, 1.0], &[2], &d)?;
    let e = (2.0 * &a)?.exp()?;
    close(
        &e.to_f64_vec()?,
        &[1.0f64.exp(), 2.0f64.exp()],
        "(2.0 * &a)?.exp()",
    );
    let u = Array::from_slice(&[1u32, 2], &[2], &d)?;
    assert!((-5 + &u).is_err());
    assert_eq!(
        (&(&(2.0 * &a)? + 1)? - 0.5f32)?.to_vec::<f32>()?,
        vec![1.5, 2.5]
    );
    Ok(())
}

/// NEP 50: the result's dtype from the array and the scalar's Rust type,
/// never from the scalar's value.
#[test]
fn a_scalars_dtype_comes_from_its_type_not_its_value() -> R {
    let d = device();
    let i = Array::from_slice(&[1i32, 2], &[2], &d)?;
    // The issue's example: `i32 [1, 2] * 1.0` was i32, `* 1.5` f32.
    assert_eq!((&i * 1.0)?.dtype(), DType::F32);
    assert_eq!((&i * 1.5)?.dtype(), DType::F32);
    assert_eq!((&i * 1.0)?.to_vec::<f32>()?, vec![1.0, 2.0]);
    assert_eq!((&i * 1)?.dtype(), DType::I32);
    type Op<'a> = &'a dyn Fn(&Array) -> wgarray::Result<Array>;
    let table: [(DType, Op, DType); 14] = [
        (DType::F32, &|a| a + 1, DType::F32),
        (DType::F16, &|a| a + 1, DType::F16),
        (DType::BF16, &|a| a + 1u32, DType::BF16),
        (DType::F16, &|a| a + 1.0, DType::F16),
        (DType::BF16, &|a| a * 2.0f32, DType::BF16),
        (DType::I32, &|a| a + 1u32, DType::I32),
        (DType::U32, &|a| a + 1i32, DType::U32),
        (DType::U32, &|a| a + 1.0f32, DType::F32),
        (DType::I32, &|a| a + true, DType::I32),
        (DType::Bool, &|a| a + 1i32, DType::I32),
        (DType::Bool, &|a| a + 1u32, DType::U32),
        (DType::Bool, &|a| a + 1usize, DType::U32),
        (DType::Bool, &|a| a + 1.0, DType::F32),
        (DType::Bool, &|a| a.logical_or(true), DType::Bool),
    ];
    for (k, (dtype, op, want)) in table.iter().enumerate() {
        let a = Array::ones(&[3], *dtype, &d)?;
        let r = op(&a)?;
        assert_eq!(r.dtype(), *want, "row {k}: {dtype} array");
        let v = r.to_f64_vec()?;
        assert!(v.iter().all(|&x| x == v[0] && x >= 1.0), "row {k}: {v:?}");
    }
    // Values convert to the array's dtype: rounded into f16, exact in i32.
    let h = Array::zeros(&[1], DType::F16, &d)?;
    assert_eq!(
        (&h + 1.0009765625f64)?.to_vec::<f16>()?,
        vec![f16::from_f64(1.0009765625)]
    );
    let big = Array::zeros(&[1], DType::I32, &d)?;
    assert_eq!((&big + i32::MAX)?.to_vec::<i32>()?, vec![i32::MAX]);
    assert_eq!((&big + (i32::MIN as i64))?.to_vec::<i32>()?, vec![i32::MIN]);
    Ok(())
}

#[test]
fn comparisons_and_other_binary_ops_take_scalars() -> R {
    let d = device();
    let mut rng = Rng::new(7);
    let x = data(&mut rng, 33);
    let a = Array::from_slice(&x, &[33], &d)?;
    type Pred = fn(f32) -> bool;
    let cmp: [(&str, Array, Pred); 6] = [
        ("greater", a.greater(0.0)?, |v| v > 0.0),
        ("greater_equal", a.greater_equal(1)?, |v| v >= 1.0),
        ("less", a.less(-1.5f32)?, |v| v < -1.5),
        ("less_equal", a.less_equal(2u32)?, |v| v <= 2.0),
        ("equal", a.equal(0.5)?, |v| v == 0.5),
        ("not_equal", a.not_equal(0.5)?, |v| v != 0.5),
    ];
    for (name, r, f) in cmp {
        assert_eq!(r.dtype(), DType::Bool, "{name}");
        let want: Vec<bool> = x.iter().map(|&v| f(v)).collect();
        assert_eq!(r.to_vec::<bool>()?, want, "{name}");
    }
    let relu: Vec<f32> = x.iter().map(|&v| v.max(0.0)).collect();
    assert_eq!(a.maximum(0.0)?.to_vec::<f32>()?, relu);
    let capped: Vec<f32> = x.iter().map(|&v| v.min(1.0)).collect();
    assert_eq!(a.minimum(1)?.to_vec::<f32>()?, capped);
    let sq: Vec<f64> = x.iter().map(|&v| (v as f64).powi(2)).collect();
    close(&a.power(2)?.to_f64_vec()?, &sq, "power 2");
    let (q, r) = a.divmod(0.75)?;
    let wq: Vec<f64> = x.iter().map(|&v| (v as f64 / 0.75).floor()).collect();
    let wr: Vec<f64> = x.iter().map(|&v| floor_rem(v as f64, 0.75)).collect();
    close(&q.to_f64_vec()?, &wq, "divmod q");
    close(&r.to_f64_vec()?, &wr, "divmod r");
    let fd: Vec<f64> = x.iter().map(|&v| (v as f64 / 2.0).floor()).collect();
    close(&a.floor_divide(2)?.to_f64_vec()?, &fd, "floor_divide");
    // Logical ops take a scalar's truth.
    let nz: Vec<bool> = x.iter().map(|&v| v != 0.0).collect();
    assert_eq!(a.logical_and(7)?.to_vec::<bool>()?, nz);
    assert_eq!(a.logical_or(0.0)?.to_vec::<bool>()?, nz);
    // where_ with scalars on either side, and both.
    let m = a.greater(0.0)?;
    let w: Vec<f32> = x.iter().map(|&v| if v > 0.0 { v } else { -1.0 }).collect();
    assert_eq!(where_(&m, &a, -1.0)?.to_vec::<f32>()?, w);
    let w: Vec<i32> = x.iter().map(|&v| if v > 0.0 { 1 } else { 0 }).collect();
    let both = where_(&m, 1, 0)?;
    assert_eq!(both.dtype(), DType::I32);
    assert_eq!(both.to_vec::<i32>()?, w);
    assert_eq!(where_(&m, 1.0, 0)?.dtype(), DType::F32);
    Ok(())
}

/// An integer scalar the array's integer dtype cannot hold: arithmetic is
/// refused (NumPy 2 raises OverflowError), comparisons are answered.
#[test]
fn out_of_range_integer_scalars() -> R {
    let d = device();
    let u = Array::from_slice(&[0u32, 5, u32::MAX], &[3], &d)?;
    let i = Array::from_slice(&[i32::MIN, 0, i32::MAX], &[3], &d)?;
    for (r, op) in [
        (&u + -1, "add"),
        (&u - -1i64, "subtract"),
        (u.maximum(-1), "maximum"),
        (&i * 3_000_000_000u32, "multiply"),
    ] {
        match r {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.starts_with(&format!("{op}: ")), "{m}");
                assert!(m.contains("out of range"), "{m}");
            }
            r => panic!("{op}: expected InvalidArgument, got {r:?}"),
        }
    }
    assert_eq!(u.greater(-1)?.to_vec::<bool>()?, vec![true; 3]);
    assert_eq!(u.less(-1)?.to_vec::<bool>()?, vec![false; 3]);
    assert_eq!(u.equal(-1)?.to_vec::<bool>()?, vec![false; 3]);
    assert_eq!(u.not_equal(-1)?.to_vec::<bool>()?, vec![true; 3]);
    assert_eq!(i.less(3_000_000_000u32)?.to_vec::<bool>()?, vec![true; 3]);
    assert_eq!(i.greater_equal(i64::MIN)?.to_vec::<bool>()?, vec![true; 3]);
    assert_eq!(i.less_equal(i64::MIN)?.to_vec::<bool>()?, vec![false; 3]);
    // In range, the extremes are exact.
    assert_eq!(
        u.equal(u32::MAX)?.to_vec::<bool>()?,
        vec![false, false, true]
    );
    assert_eq!(
        i.equal(i32::MIN)?.to_vec::<bool>()?,
        vec![true, false, false]
    );
    drop((u, i));
    assert_empty(&d);
    Ok(())
}

/// A scalar is a lazy constant: recording `&a * 2.0` uploads nothing and
/// allocates nothing (before the fusion planner it was a 4-byte upload).
#[test]
fn a_scalar_operand_allocates_nothing_when_recorded() -> R {
    let d = device();
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3], &d)?;
    let before = d.active_memory();
    let y = (&(&(2.0 * &a)? + 1)? - 0.5f32)?;
    let c = a.greater(1.5)?;
    let w = where_(&c, &y, 0)?;
    assert_eq!(
        d.active_memory(),
        before,
        "recording scalars allocated memory"
    );
    assert_eq!(w.to_vec::<f32>()?, vec![0.0, 4.5, 6.5]);
    Ok(())
}

/// `addmm`, `layer_norm` and `rms_norm` take the operators' scalar types.
#[test]
fn matmul_and_norm_parameters_take_any_scalar() -> R {
    let d = device();
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &d)?;
    let c = Array::ones(&[2], DType::F32, &d)?;
    let want = vec![5.5f32, 7.0, 9.5, 13.0]; // 0.5 * a @ a + 2 * 1
    for r in [
        c.addmm(&a, &a, 0.5, 2.0)?,
        c.addmm(&a, &a, 0.5f32, 2)?,
        c.addmm(&a, &a, f16::from_f32(0.5), 2u32)?,
    ] {
        assert_eq!(r.to_vec::<f32>()?, want);
    }
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[1, 4], &d)?;
    let l64 = x.layer_norm(None, None, 1e-5)?.to_vec::<f32>()?;
    let l32 = x.layer_norm(None, None, 1e-5f32)?.to_vec::<f32>()?;
    assert_eq!(l64, l32);
    let r1 = x.rms_norm(None, 0)?.to_vec::<f32>()?;
    let rms = (7.5f64).sqrt();
    close(
        &r1.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        &[1.0 / rms, 2.0 / rms, 3.0 / rms, 4.0 / rms],
        "rms_norm eps 0",
    );
    Ok(())
}

/// Errors from a scalar mix leave nothing behind.
#[test]
fn scalar_errors_leak_nothing() -> R {
    let d = device();
    check_leaks(&d)?;
    assert_empty(&d);
    Ok(())
}

fn check_leaks(d: &Device) -> R {
    let u = Array::from_slice(&[1u32, 2], &[2], d)?;
    assert!((&u + -5).is_err());
    let r = -5 + &u;
    assert!(r.is_err());
    assert!(where_(&u, &u, -1).is_err());
    Ok(())
}
