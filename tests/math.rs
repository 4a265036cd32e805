//! The math of issue 21 against f64: log2, log10, tan, sinh, cosh, arcsin,
//! arccos, arctan, arcsinh, arccosh, arctanh, erfinv, degrees, radians,
//! arctan2, logaddexp, in ulp over sweeps of every binade and their
//! special values (on the bits); the float predicates (isnan, isinf,
//! isfinite, isposinf, isneginf); nan_to_num, isclose, allclose,
//! array_equal and round with decimals. Every float dtype, integer input,
//! strided and broadcast views, empty arrays. The measured maxima are
//! printed (`-- --nocapture`) for docs/OPS.md.

mod common;

use common::reference::{every_half_value, max_error};
use common::{Rng, assert_empty, device, matmul_ref};
use half::{bf16, f16};
use wgarray::testing::accuracy::{erfinv64, round_to, ulp_error as ulps};
use wgarray::{Array, DType, Device, Error, Slice};

type Op = fn(&Array) -> wgarray::Result<Array>;
type Truth = fn(f64) -> f64;

/// Every `step`-th f32 bit pattern of both signs (NaN and inf included),
/// without subnormals: WGSL lets a GPU flush subnormal inputs to zero.
fn sweep(step: u32) -> Vec<f32> {
    (0..=u32::MAX)
        .step_by(step as usize)
        .map(f32::from_bits)
        .filter(|x| !x.is_subnormal())
        .collect()
}

/// The functions, their f64 truth and the ulp bound each is held to.
fn functions() -> Vec<(&'static str, Op, Truth, f64)> {
    vec![
        ("log2", Array::log2, f64::log2, 2.0),
        ("log10", Array::log10, f64::log10, 2.0),
        ("tan", Array::tan, f64::tan, 2.0),
        ("sinh", Array::sinh, f64::sinh, 3.0),
        ("cosh", Array::cosh, f64::cosh, 3.0),
        ("arcsin", Array::arcsin, f64::asin, 2.0),
        ("arccos", Array::arccos, f64::acos, 2.0),
        ("arctan", Array::arctan, f64::atan, 2.0),
        ("arcsinh", Array::arcsinh, f64::asinh, 3.0),
        ("arccosh", Array::arccosh, f64::acosh, 3.0),
        ("arctanh", Array::arctanh, f64::atanh, 3.0),
        ("erfinv", Array::erfinv, erfinv64, 4.0),
        // One multiplication by the constant rounded to f32: within half
        // an ulp of the product with that constant.
        (
            "degrees",
            Array::degrees,
            |x| x * (180.0 / std::f64::consts::PI) as f32 as f64,
            0.5,
        ),
        (
            "radians",
            Array::radians,
            |x| x * (std::f64::consts::PI / 180.0) as f32 as f64,
            0.5,
        ),
    ]
}

/// Each function over every binade of f32 (every 4099th bit pattern, both
/// signs) and the neighbourhood of its thresholds, within its ulp bound.
#[test]
fn unary_math_is_within_its_ulp_bound_over_the_f32_range() {
    let d = device();
    let mut xs = sweep(4099);
    // Thresholds of the reductions and near the poles/edges.
    for c in [
        0.5f32,
        1.0,
        2.0,
        0.4375,
        0.6875,
        1.1875,
        2.4375,
        0.6744,
        0.975,
        88.72,
        89.4,
        std::f32::consts::FRAC_PI_4,
        std::f32::consts::FRAC_PI_2,
        std::f32::consts::PI,
        1e4,
        1e8,
        3.4e38,
        2f32.powi(-12),
        2f32.powi(-26),
    ] {
        let b = c.to_bits();
        for k in 0..512u32 {
            for s in [0u32, 0x8000_0000] {
                xs.push(f32::from_bits((b - 256 + k) | s));
            }
        }
    }
    // The whole approach to 1 of arcsin/arccos/arctanh/erfinv.
    xs.extend((0x3f7f_0000u32..0x3f80_0000).step_by(7).map(f32::from_bits));
    for (name, op, truth, bound) in functions() {
        let (u, x, _) = max_error(&d, &xs, op, truth, |g, w| ulps(g, w, DType::F32));
        eprintln!("{name} on {}: max {u:.3} ulp (at x = {x:e})", d.backend());
        assert!(
            u <= bound,
            "{name}({x:e}): {u} ulp from {:e}",
            truth(x as f64)
        );
    }
}

/// Special values exactly, on the bits (signed zeros, infinities, NaN,
/// the domain edges).
#[test]
fn unary_math_special_values() {
    let d = device();
    let inf = f32::INFINITY;
    let nan = f32::NAN;
    let xs = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        inf,
        -inf,
        nan,
        2.0,
        -2.0,
        1e-30,
        f32::MAX,
    ];
    let x = Array::from_slice(&xs, &[xs.len()], &d).unwrap();
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    for (name, op, truth, bound) in functions() {
        let got = op(&x).unwrap().to_vec::<f32>().unwrap();
        for (&x, &g) in xs.iter().zip(&got) {
            let want = truth(x as f64);
            if x == 0.0 || !x.is_finite() {
                assert!(same(g, want as f32), "{name}({x:e}) = {g:e}, want {want:e}");
            } else {
                // The domain edges (+-1) and the rest: within the bound
                // (`ulps` is exact about infinities and NaN).
                let u = ulps(g as f64, want, DType::F32);
                assert!(u <= bound, "{name}({x:e}) = {g:e}, want {want:e}: {u} ulp");
            }
        }
    }
}

/// f16 and bf16: every one of their 65536 values, computed in f32 and
/// rounded once, so within 1 ulp of their type; integer input gives f32;
/// a reversed (strided) view and an empty array.
#[test]
fn unary_math_on_every_half_and_bfloat_and_on_views() {
    let d = device();
    for dtype in [DType::F16, DType::BF16] {
        let values = every_half_value(dtype);
        let x = common::host::upload(&d, &values, &[values.len()], dtype);
        for (name, op, truth, _) in functions() {
            let got = op(&x).unwrap();
            assert_eq!(got.dtype(), dtype);
            for (&v, &g) in values.iter().zip(&got.to_f64_vec().unwrap()) {
                if (v as f32).is_subnormal() {
                    // bf16 subnormals are f32 subnormals, which a GPU may
                    // flush to zero.
                    continue;
                }
                let u = ulps(g, truth(v), dtype);
                assert!(
                    u <= 1.0,
                    "{dtype} {name}({v:e}) = {g:e}: {u} ulp from {:e}",
                    truth(v)
                );
            }
        }
    }
    let v: Vec<f32> = (0..1025).map(|i| i as f32 * 0.0019 - 0.97).collect();
    let x = Array::from_slice(&v, &[1025], &d).unwrap();
    let rev = x.slice(&[Slice::new(None, None, -1)]).unwrap();
    let ints = Array::from_slice(&[1i32, 2, 7, 33], &[4], &d).unwrap();
    let empty = Array::zeros(&[0, 3], DType::F32, &d).unwrap();
    for (name, op, truth, bound) in functions() {
        let got = op(&rev).unwrap().to_vec::<f32>().unwrap();
        for (i, &g) in got.iter().enumerate() {
            let want = truth(v[1024 - i] as f64);
            assert!(
                ulps(g as f64, want, DType::F32) <= bound,
                "{name}(rev)[{i}] = {g}"
            );
        }
        let got = op(&ints).unwrap();
        assert_eq!(got.dtype(), DType::F32, "{name} of i32");
        for (&i, &g) in [1, 2, 7, 33].iter().zip(&got.to_vec::<f32>().unwrap()) {
            assert!(
                ulps(g as f64, truth(i as f64), DType::F32) <= bound,
                "{name}({i})"
            );
        }
        assert_eq!(op(&empty).unwrap().shape(), &[0, 3]);
    }
}

/// Pairs over a grid of magnitudes, every sign combination, against f64;
/// broadcasting; special values; integer input.
#[test]
fn arctan2_and_logaddexp_against_f64() {
    let d = device();
    let mut rng = Rng::new(2);
    let mut ys = Vec::new();
    let mut xs = Vec::new();
    while ys.len() < 200_000 {
        let a = f32::from_bits(rng.next_u64() as u32);
        let b = f32::from_bits(rng.next_u64() as u32);
        if !(a.is_subnormal() || b.is_subnormal()) {
            ys.push(a);
            xs.push(b);
        }
    }
    let special = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        -f32::INFINITY,
        f32::NAN,
        3.0,
        -1e-30,
    ];
    for &a in &special {
        for &b in &special {
            ys.push(a);
            xs.push(b);
        }
    }
    let n = ys.len();
    let y = Array::from_slice(&ys, &[n], &d).unwrap();
    let x = Array::from_slice(&xs, &[n], &d).unwrap();
    let got = y.arctan2(&x).unwrap().to_vec::<f32>().unwrap();
    let mut worst = 0.0f64;
    for i in 0..n {
        let want = (ys[i] as f64).atan2(xs[i] as f64);
        let u = ulps(got[i] as f64, want, DType::F32);
        worst = worst.max(u);
        assert!(
            u <= 2.0,
            "arctan2({:e}, {:e}) = {:e}, want {want:e}",
            ys[i],
            xs[i],
            got[i]
        );
    }
    eprintln!("arctan2 on {}: max {worst:.3} ulp", d.backend());
    // logaddexp: moderate values (where the result is representable), the
    // error measured against the larger argument's ulp (the result may
    // cancel to near 0, as NumPy's does).
    let a: Vec<f32> = (0..100_000).map(|_| rng.f32() * 200.0).collect();
    let b: Vec<f32> = a.iter().map(|&v| v - rng.f32() * 40.0).collect();
    let got = Array::from_slice(&a, &[a.len()], &d)
        .unwrap()
        .logaddexp(Array::from_slice(&b, &[b.len()], &d).unwrap())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let mut worst = 0.0f64;
    for i in 0..a.len() {
        let (p, q) = (a[i] as f64, b[i] as f64);
        let want = p.max(q) + (-(p - q).abs()).exp().ln_1p();
        let m = p.abs().max(q.abs()).max(want.abs());
        let err =
            (got[i] as f64 - want).abs() / 2f64.powi((m.log2().floor() as i32).max(-126) - 23);
        worst = worst.max(err);
        assert!(err <= 3.0, "logaddexp({p}, {q}) = {}, want {want}", got[i]);
    }
    eprintln!(
        "logaddexp on {}: max {worst:.3} ulp of max(|a|, |b|, |result|)",
        d.backend()
    );
    // Specials: equal infinities, -inf with a finite, NaN.
    let inf = f32::INFINITY;
    let p = Array::from_slice(&[inf, -inf, -inf, f32::NAN, 0.0, 5.0], &[6], &d).unwrap();
    let q = Array::from_slice(&[inf, -inf, 2.0, 1.0, 0.0, -inf], &[6], &d).unwrap();
    let got = p.logaddexp(&q).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got[0], inf);
    assert_eq!(got[1], -inf);
    assert_eq!(got[2], 2.0);
    assert!(got[3].is_nan());
    assert_eq!(got[4], std::f32::consts::LN_2);
    assert_eq!(got[5], 5.0);
    // Broadcasting, integer input (f32), f16 (computed in f32).
    let col = Array::from_slice(&[1i32, 2, 3], &[3, 1], &d).unwrap();
    let row = Array::from_slice(&[0i32, -1], &[1, 2], &d).unwrap();
    let g = col.arctan2(&row).unwrap();
    assert_eq!((g.dtype(), g.shape()), (DType::F32, &[3usize, 2][..]));
    for (i, &v) in g.to_vec::<f32>().unwrap().iter().enumerate() {
        let want = ((i / 2 + 1) as f64).atan2(-((i % 2) as f64));
        assert!(ulps(v as f64, want, DType::F32) <= 2.0);
    }
    let h = Array::from_slice(&[f16::from_f32(1.0), f16::from_f32(2.0)], &[2], &d).unwrap();
    let l = h.logaddexp(&h).unwrap();
    assert_eq!(l.dtype(), DType::F16);
    let want: Vec<f64> = [1.0f64, 2.0]
        .iter()
        .map(|v| round_to(v + 2f64.ln(), DType::F16))
        .collect();
    assert_eq!(l.to_f64_vec().unwrap(), want);
    // A scalar operand is weak: it takes the array's dtype (f16 stays
    // f16, an integer array computes in f32), as the array would.
    let ls = h.logaddexp(1.0).unwrap();
    assert_eq!(ls.dtype(), DType::F16);
    let one = Array::full(&[2], 1.0, DType::F16, &d).unwrap();
    assert_eq!(
        ls.to_f64_vec().unwrap(),
        h.logaddexp(&one).unwrap().to_f64_vec().unwrap()
    );
    let gs = col.arctan2(-1).unwrap();
    assert_eq!((gs.dtype(), gs.shape()), (DType::F32, &[3usize, 1][..]));
    for (i, &v) in gs.to_vec::<f32>().unwrap().iter().enumerate() {
        let want = ((i + 1) as f64).atan2(-1.0);
        assert!(ulps(v as f64, want, DType::F32) <= 2.0);
    }
    assert!(matches!(
        col.arctan2(Array::zeros(&[2, 1], DType::F32, &d).unwrap()),
        Err(Error::ShapeMismatch { op: "arctan2", .. })
    ));
}

/// Every class of value in every float dtype, on the bits; integers and
/// bool give constants; a broadcast view.
#[test]
fn float_predicates() {
    let d = device();
    let vals = [
        0.0f64,
        -0.0,
        1.5,
        -2.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-40,
        6e4,
    ];
    type Predicate = (&'static str, Op, fn(f64) -> bool);
    let truth: [Predicate; 5] = [
        ("isnan", Array::isnan, f64::is_nan),
        ("isinf", Array::isinf, f64::is_infinite),
        ("isfinite", Array::isfinite, f64::is_finite),
        ("isposinf", Array::isposinf, |x| x == f64::INFINITY),
        ("isneginf", Array::isneginf, |x| x == f64::NEG_INFINITY),
    ];
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let stored: Vec<f64> = vals.iter().map(|&v| round_to(v, dtype)).collect();
        let x = common::host::upload(&d, &vals, &[vals.len()], dtype);
        let b = x.reshape(&[1, 9]).unwrap().broadcast_to(&[3, 9]).unwrap();
        for (name, op, f) in truth {
            let got = op(&x).unwrap();
            assert_eq!(got.dtype(), DType::Bool);
            let want: Vec<bool> = stored.iter().map(|&v| f(v)).collect();
            assert_eq!(got.to_vec::<bool>().unwrap(), want, "{name} {dtype}");
            let got = op(&b).unwrap().to_vec::<bool>().unwrap();
            assert_eq!(got, want.repeat(3), "{name} {dtype} broadcast");
        }
    }
    for dtype in [DType::I32, DType::U32, DType::Bool] {
        let x = Array::zeros(&[7], dtype, &d).unwrap();
        for (name, op, _) in truth {
            let want = name == "isfinite";
            assert_eq!(
                op(&x).unwrap().to_vec::<bool>().unwrap(),
                vec![want; 7],
                "{name} {dtype}"
            );
        }
    }
    assert_eq!(
        Array::zeros(&[0], DType::F32, &d)
            .unwrap()
            .isnan()
            .unwrap()
            .shape(),
        &[0]
    );
}

#[test]
fn nan_to_num_replaces_on_the_bits() {
    let d = device();
    let vals = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.5, -0.0];
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let max = match dtype {
            DType::F16 => f16::MAX.to_f64(),
            DType::BF16 => bf16::MAX.to_f64(),
            _ => f32::MAX as f64,
        };
        let x = common::host::upload(&d, &vals, &[5], dtype);
        let got = x.nan_to_num(0.0, None, None).unwrap();
        assert_eq!(got.dtype(), dtype);
        assert_eq!(got.to_f64_vec().unwrap(), vec![0.0, max, -max, 1.5, -0.0]);
        let got = x.nan_to_num(-1.0, Some(7.0), Some(-9.0)).unwrap();
        assert_eq!(got.to_f64_vec().unwrap(), vec![-1.0, 7.0, -9.0, 1.5, -0.0]);
        let t = x
            .reshape(&[5, 1])
            .unwrap()
            .broadcast_to(&[5, 2])
            .unwrap()
            .transpose();
        let got = t
            .nan_to_num(2.0, None, Some(0.0))
            .unwrap()
            .to_f64_vec()
            .unwrap();
        assert_eq!(got, [2.0, max, 0.0, 1.5, -0.0].repeat(2));
    }
    let i = Array::from_slice(&[1i32, -2], &[2], &d).unwrap();
    assert_eq!(
        i.nan_to_num(0.0, None, None)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![1, -2]
    );
}

/// NumPy's isclose, written out in f64: `|a - b| <= atol + rtol |b|` with
/// `b` finite, or `a == b`, or both NaN with `equal_nan`.
fn isclose_ref(a: f64, b: f64, rtol: f64, atol: f64, equal_nan: bool) -> bool {
    ((a - b).abs() <= atol + rtol * b.abs() && b.is_finite())
        || a == b
        || (equal_nan && a.is_nan() && b.is_nan())
}

#[test]
fn isclose_allclose_array_equal() {
    let d = device();
    let mut rng = Rng::new(8);
    let mut a = Vec::new();
    let mut b = Vec::new();
    for i in 0..1025 {
        let x = rng.f32() * 10.0;
        let y = match i % 5 {
            0 => x,
            1 => x + x * 5e-6,
            2 => x + 1e-4,
            3 => rng.f32(),
            _ => x * (1.0 + 2e-5),
        };
        a.push(x);
        b.push(y);
    }
    for (x, y) in [
        (f32::NAN, f32::NAN),
        (f32::INFINITY, f32::INFINITY),
        (f32::INFINITY, -f32::INFINITY),
        (f32::INFINITY, f32::MAX),
        (0.0, 1e-9),
        (1.0, f32::NAN),
    ] {
        a.push(x);
        b.push(y);
    }
    let n = a.len();
    let xa = Array::from_slice(&a, &[n], &d).unwrap();
    let xb = Array::from_slice(&b, &[n], &d).unwrap();
    for equal_nan in [false, true] {
        for (rtol, atol) in [(1e-5, 1e-8), (0.0, 1e-3), (1e-3, 0.0)] {
            let got = xa
                .isclose(&xb, rtol, atol, equal_nan)
                .unwrap()
                .to_vec::<bool>()
                .unwrap();
            for i in 0..n {
                // The device compares in f32; the reference with the same
                // f32 tolerances.
                let want = isclose_ref(
                    a[i] as f64,
                    b[i] as f64,
                    rtol as f32 as f64,
                    atol as f32 as f64,
                    equal_nan,
                );
                let (da, db) = (a[i] as f64, b[i] as f64);
                let bound = (atol as f32 + rtol as f32 * b[i].abs()) as f64;
                let borderline = ((da - db).abs() - bound).abs() <= 1e-6 * bound.max(1e-30);
                assert!(
                    got[i] == want || borderline,
                    "isclose({}, {}, rtol={rtol}, atol={atol}, {equal_nan}) = {}",
                    a[i],
                    b[i],
                    got[i]
                );
            }
            let all = xa.allclose(&xb, rtol, atol, equal_nan).unwrap();
            assert_eq!(all.shape(), &[] as &[usize]);
            assert!(!all.item::<bool>().unwrap());
        }
    }
    // allclose over a broadcast and a strided view; f16 against f32.
    let base = Array::from_slice(&[1.0f32, 2.0, 3.0], &[3], &d).unwrap();
    let near = (&base + 1e-6)
        .unwrap()
        .reshape(&[1, 3])
        .unwrap()
        .broadcast_to(&[4, 3])
        .unwrap();
    assert!(
        base.allclose(&near, 1e-5, 1e-8, false)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    let h = base.astype(DType::F16).unwrap();
    assert!(
        h.allclose(&base, 1e-3, 0.0, false)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    let ints = Array::from_slice(&[1i32, 2, 3], &[3], &d).unwrap();
    assert!(
        ints.allclose(&base, 0.0, 0.0, false)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    // Empty arrays are all close and equal.
    let e = Array::zeros(&[0, 2], DType::F32, &d).unwrap();
    assert!(
        e.allclose(&e, 1e-5, 1e-8, false)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    assert!(e.array_equal(&e, false).unwrap().item::<bool>().unwrap());
    // array_equal: shapes, NaN, promotion, views.
    let nan = Array::from_slice(&[1.0f32, f32::NAN], &[2], &d).unwrap();
    assert!(
        !nan.array_equal(&nan, false)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    assert!(nan.array_equal(&nan, true).unwrap().item::<bool>().unwrap());
    assert!(
        !base
            .array_equal(&near, false)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    assert!(
        ints.array_equal(&base, false)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    let rev = base.slice(&[Slice::new(None, None, -1)]).unwrap();
    assert!(
        !rev.array_equal(&base, false)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    assert!(
        rev.array_equal(&rev.contiguous().unwrap(), false)
            .unwrap()
            .item::<bool>()
            .unwrap()
    );
    // Errors: a bad tolerance, shapes that do not broadcast; nothing left.
    drop((xa, xb, base, near, h, ints, e, nan, rev));
    {
        let x = Array::zeros(&[3], DType::F32, &d).unwrap();
        let y = Array::zeros(&[4], DType::F32, &d).unwrap();
        assert!(matches!(
            x.isclose(&y, 1e-5, 1e-8, false),
            Err(Error::ShapeMismatch { op: "isclose", .. })
        ));
        assert!(matches!(
            x.allclose(&x, -1.0, 0.0, false),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            x.isclose(&x, 0.0, f64::NAN, false),
            Err(Error::InvalidArgument(_))
        ));
        // Devices before shapes before the tolerances, each naming the op.
        assert!(matches!(
            x.allclose(&y, -1.0, 0.0, false),
            Err(Error::ShapeMismatch { op: "allclose", .. })
        ));
        // A scalar `other` is weak and broadcasts.
        let v = Array::from_slice(&[1.0f32, 1.0 + 1e-7, 1.1, f32::NAN], &[4], &d).unwrap();
        assert_eq!(
            v.isclose(1.0, 1e-5, 1e-8, false)
                .unwrap()
                .to_vec::<bool>()
                .unwrap(),
            vec![true, true, false, false]
        );
        assert!(
            !v.allclose(1, 1e-5, 1e-8, false)
                .unwrap()
                .item::<bool>()
                .unwrap()
        );
    }
    assert_empty(&d);
}

#[test]
fn round_with_decimals() {
    let d = device();
    let mut rng = Rng::new(4);
    let v: Vec<f32> = (0..1025).map(|_| rng.f32() * 1000.0).collect();
    let mut v = v;
    v.extend([2.5f32, -2.5, 0.125, 1e10, -3e38, f32::INFINITY, 1234.5678]);
    let n = v.len();
    let x = Array::from_slice(&v, &[n], &d).unwrap();
    for decimals in [0, 1, 2, 3, -1, -2, 40, -40] {
        let got = x.round_decimals(decimals).unwrap().to_vec::<f32>().unwrap();
        for (i, (&x, &g)) in v.iter().zip(&got).enumerate() {
            // NumPy's formula in f32 (one rounding per operation).
            let p = 10f32.powi(decimals.abs());
            let want = if decimals == 0 {
                x.round_ties_even()
            } else if decimals > 0 && (x.abs() >= 8388608.0 || !p.is_finite()) {
                x
            } else if !p.is_finite() {
                0.0 * x
            } else if decimals > 0 {
                (x * p).round_ties_even() / p
            } else {
                (x / p).round_ties_even() * p
            };
            let ok = g.to_bits() == want.to_bits()
                || (g.is_nan() && want.is_nan())
                || (g as f64 - want as f64).abs() <= (want.abs() * f32::EPSILON) as f64;
            assert!(ok, "round({x}, {decimals})[{i}] = {g}, want {want}");
        }
    }
    // f16 computes in f32 and rounds once.
    let h = Array::from_slice(&[f16::from_f32(1.2345), f16::from_f32(-2.675)], &[2], &d).unwrap();
    let r = h.round_decimals(2).unwrap();
    assert_eq!(r.dtype(), DType::F16);
    let want: Vec<f64> = [1.2345f32, -2.675]
        .iter()
        .map(|&x| {
            let x = f16::from_f32(x).to_f32();
            f16::from_f32((x * 100.0).round_ties_even() / 100.0).to_f64()
        })
        .collect();
    assert_eq!(r.to_f64_vec().unwrap(), want);
    // Integers: unchanged for d >= 0; half to even at multiples of 10^-d.
    let ints = [
        15i32,
        25,
        -15,
        -25,
        14,
        16,
        1234,
        -1251,
        i32::MAX,
        i32::MIN,
        0,
    ];
    let xi = Array::from_slice(&ints, &[ints.len()], &d).unwrap();
    assert_eq!(
        xi.round_decimals(2).unwrap().to_vec::<i32>().unwrap(),
        ints.to_vec()
    );
    for decimals in [-1, -2, -9] {
        let step = 10i64.pow((-decimals) as u32);
        let got = xi
            .round_decimals(decimals)
            .unwrap()
            .to_vec::<i32>()
            .unwrap();
        for (&x, &g) in ints.iter().zip(&got) {
            let q = (x as i64).div_euclid(step);
            let r = (x as i64).rem_euclid(step);
            let up = 2 * r > step || (2 * r == step && q % 2 != 0);
            let want = ((q + up as i64) * step) as i32; // wraps as int32 would
            assert_eq!(g, want, "round({x}, {decimals})");
        }
    }
    let u = Array::from_slice(&[15u32, 25, 4_000_000_000], &[3], &d).unwrap();
    assert_eq!(
        u.round_decimals(-1).unwrap().to_vec::<u32>().unwrap(),
        vec![20, 20, 4_000_000_000]
    );
    let b = Array::from_slice(&[true, false], &[2], &d).unwrap();
    assert_eq!(b.round_decimals(-1).unwrap().dtype(), DType::Bool);
}

/// The math functions inside fused programs: every unary function, then
/// arctan2 and logaddexp, summed in one graph (f32 and f16, on a strided
/// view) is fewer dispatches fused than unfused and gives the same bits;
/// the unfused result is within a few ulp of an f64 reference per term.
#[test]
fn math_fuses_with_the_bits_of_the_unfused_ops() {
    let d = device();
    let n = 1025;
    let v: Vec<f32> = Rng::new(9).vec_f32(2 * n);
    let base = Array::from_slice(&v, &[2 * n], &d).unwrap();
    let shifted = |name: &str| ["arccosh", "log2", "log10"].contains(&name);
    let build = |dtype: DType| -> Array {
        // A strided view (every other element), values in [-1, 1).
        let x = base
            .slice(&[Slice::step(2)])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let t = (&x * 0.45).unwrap();
        let mut acc = t.arctan2(&x).unwrap();
        acc = (&acc + &t.logaddexp(&x).unwrap()).unwrap();
        for (name, op, _, _) in functions() {
            // Inside each domain: arccosh and the logarithms on [1.05, 1.95).
            let arg = if shifted(name) {
                (&t + 1.5).unwrap()
            } else {
                t.clone()
            };
            acc = (&acc + &op(&arg).unwrap()).unwrap();
        }
        acc
    };
    for dtype in [DType::F32, DType::F16] {
        if dtype == DType::F16 && !d.features().contains(wgpu::Features::SHADER_F16) {
            continue;
        }
        let mut out = Vec::new();
        for fused in [true, false] {
            d.set_fusion(fused);
            let y = build(dtype);
            let before = d.dispatches();
            y.eval().unwrap();
            let count = d.dispatches() - before;
            out.push((
                count,
                y.astype(DType::F32).unwrap().to_vec::<f32>().unwrap(),
            ));
        }
        let (fused, unfused) = (&out[0], &out[1]);
        assert!(
            fused.0 < unfused.0,
            "{dtype}: {} dispatches fused, {} unfused",
            fused.0,
            unfused.0
        );
        for (i, (a, b)) in fused.1.iter().zip(&unfused.1).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{dtype}[{i}]: fused {a}, unfused {b}"
            );
        }
        if dtype == DType::F32 {
            for (i, &g) in unfused.1.iter().enumerate() {
                let x = v[2 * i] as f64;
                let t = (v[2 * i] * 0.45) as f64;
                let mut want = t.atan2(x) + (t.exp() + x.exp()).ln();
                for (name, _, truth, _) in functions() {
                    want += truth(if shifted(name) { t + 1.5 } else { t });
                }
                assert!(
                    (g as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "[{i}]: {g} vs {want}"
                );
            }
        }
    }
    d.set_fusion(true);
}

// tanh_f's own exp (d202884): special values, bit patterns around its
// thresholds, a sweep of every f32 bit pattern with a stride, the half
// types, and tanh fused into a reduction and a GEMM epilogue.

/// The distance of `got` from `want` in units of the f32 spacing at
/// `want`.
fn ulps_f32(got: f32, want: f64) -> f64 {
    let w = want.abs().max(f32::MIN_POSITIVE as f64);
    let e = w.log2().floor();
    let ulp = 2f64.powf(e - 23.0);
    (got as f64 - want).abs() / ulp
}

/// Assert that `got` (tanh of `x`, pairs `measured` picks) is within 1.5
/// ulp of f64's tanh; returns the largest error and where it is.
fn assert_tanh_within_1_5_ulp(
    x: &[f32],
    got: &[f32],
    measured: impl Fn(f32) -> bool,
) -> (f64, f32) {
    let mut worst = (0.0, 0.0f32);
    for (&xi, &g) in x.iter().zip(got) {
        let u = ulps_f32(g, (xi as f64).tanh());
        if measured(xi) && u > worst.0 {
            worst = (u, xi);
        }
    }
    assert!(
        worst.0 <= 1.5,
        "{} ulp at {:e} ({:#x})",
        worst.0,
        worst.1,
        worst.1.to_bits()
    );
    worst
}

fn tanh_of(d: &Device, x: &[f32]) -> Vec<f32> {
    Array::from_slice(x, &[x.len()], d)
        .unwrap()
        .tanh()
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
}

#[test]
fn tanh_special_values_and_thresholds() {
    let d = device();
    let mut x: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x807f_ffff),
        f32::MAX,
        f32::MIN,
        10.0,
        -10.0,
        9.0,
        20.0,
        1e-30,
    ];
    // Around the polynomial's threshold (0x3f0c9f54, log(3)/2), 10, 9.01
    // (where tanh rounds to 1), 2^-12, and ln2-multiples (k changes).
    for centre in [
        0x3f0c_9f54u32,
        10f32.to_bits(),
        9.01f32.to_bits(),
        0x3980_0000,
        (std::f32::consts::LN_2 / 2.0).to_bits(),
        (3.0 * std::f32::consts::LN_2 / 2.0).to_bits(),
        (23.0 * std::f32::consts::LN_2 / 2.0).to_bits(),
        0x0080_0000,
    ] {
        for dlt in -100i32..=100 {
            let b = (centre as i32 + dlt) as u32;
            x.push(f32::from_bits(b));
            x.push(f32::from_bits(b | 0x8000_0000));
        }
    }
    let got = tanh_of(&d, &x);
    for (&xi, &g) in x.iter().zip(&got) {
        let want = (xi as f64).tanh();
        if xi == 0.0 || xi.is_infinite() {
            assert_eq!(g.to_bits(), (want as f32).to_bits(), "tanh({xi:e})");
        } else if xi.is_subnormal() {
            assert_eq!(g.to_bits(), xi.to_bits(), "tanh({xi:e}) is itself");
        }
    }
    assert_tanh_within_1_5_ulp(&x, &got, |xi| {
        !(xi == 0.0 || xi.is_infinite() || xi.is_subnormal())
    });
    // NaN: NaN, its payload and sign kept.
    let nans = [
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xff80_0001),
    ];
    for (n, g) in nans.iter().zip(tanh_of(&d, &nans)) {
        assert!(g.is_nan(), "tanh({:#x}) = {g}", n.to_bits());
        assert_eq!(g.to_bits(), n.to_bits(), "NaN payload and sign");
    }
}

/// Every 4099th f32 bit pattern (about a million values, every binade):
/// within 1.5 ulp of f64's tanh, odd, and |tanh| <= 1.
#[test]
fn tanh_over_a_sweep_of_every_bit_pattern() {
    let d = device();
    let x: Vec<f32> = (0..(1u64 << 32))
        .step_by(4099)
        .map(|b| f32::from_bits(b as u32))
        .filter(|v| !v.is_nan())
        .collect();
    let got = tanh_of(&d, &x);
    for (&xi, &g) in x.iter().zip(&got) {
        assert!(g.abs() <= 1.0, "tanh({xi:e}) = {g}");
    }
    assert_tanh_within_1_5_ulp(&x, &got, |_| true);
}

/// Dense sweeps where the two formulas and the exp's reduction work:
/// every 37th f32 in [0.01, 10] (about 1.2 million), within 1.5 ulp.
#[test]
fn tanh_dense_over_its_working_range() {
    let d = device();
    let x: Vec<f32> = (0.01f32.to_bits()..=10f32.to_bits())
        .step_by(37)
        .map(f32::from_bits)
        .collect();
    let got = tanh_of(&d, &x);
    let worst = assert_tanh_within_1_5_ulp(&x, &got, |_| true);
    eprintln!("tanh worst {} ulp at {:e}", worst.0, worst.1);
}

#[test]
fn tanh_in_half_types_fused_reductions_and_gemm_epilogues() {
    let d = device();
    let mut rng = Rng::new(604);
    let x: Vec<f32> = (0..4099).map(|_| rng.f32() * 12.0).collect();
    // Half types: computed in f32, rounded once: within one unit of the
    // half type's spacing of f64's tanh.
    for dtype in [DType::BF16, DType::F16] {
        let a = match dtype {
            DType::F16 => Array::from_slice(
                &x.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>(),
                &[x.len()],
                &d,
            ),
            _ => Array::from_slice(
                &x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>(),
                &[x.len()],
                &d,
            ),
        };
        let a = match a {
            Ok(a) => a,
            Err(Error::MissingFeature { .. }) => continue,
            Err(e) => panic!("{dtype:?}: {e}"),
        };
        let got = match a
            .tanh()
            .and_then(|t| t.astype(DType::F32))
            .and_then(|t| t.to_vec::<f32>())
        {
            Ok(g) => g,
            Err(Error::MissingFeature { .. }) => continue,
            Err(e) => panic!("{dtype:?}: {e}"),
        };
        let held = a.astype(DType::F32).unwrap().to_vec::<f32>().unwrap();
        for (&h, &g) in held.iter().zip(&got) {
            let want = (h as f64).tanh();
            let (step, rounded) = match dtype {
                DType::F16 => (
                    2f64.powi(want.abs().max(6.1e-5).log2().floor() as i32 - 10),
                    f16::from_f64(want).to_f64(),
                ),
                _ => (
                    2f64.powi(want.abs().max(1e-38).log2().floor() as i32 - 7),
                    bf16::from_f64(want).to_f64(),
                ),
            };
            assert!(
                (g as f64 - want).abs() <= step,
                "{dtype:?} tanh({h}) = {g}, want {want} (rounded {rounded})"
            );
        }
    }
    // x.tanh().sum() over rows (a reduction with a fused prologue), and a
    // chain.
    let a = Array::from_slice(&x[..4096], &[4, 1024], &d).unwrap();
    let s = a
        .tanh()
        .unwrap()
        .sum(-1, false)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let c = ((a.tanh().unwrap() * 2.0f32).unwrap() + 1.0f32)
        .unwrap()
        .tanh()
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for r in 0..4 {
        let want: f64 = x[r * 1024..(r + 1) * 1024]
            .iter()
            .map(|&v| (v as f64).tanh())
            .sum();
        assert!(
            (s[r] as f64 - want).abs() < 1e-3,
            "row {r}: {} vs {want}",
            s[r]
        );
    }
    for (i, &g) in c.iter().enumerate() {
        let t = ((x[i] as f64).tanh() as f32 as f64 * 2.0 + 1.0) as f32 as f64;
        // The first tanh's 1.5 ulp (up to 1.8e-7) doubled, then the
        // second's: 5e-7 absolute.
        assert!(
            (g as f64 - t.tanh()).abs() <= 5e-7,
            "chain [{i}]: {g} vs {}",
            t.tanh()
        );
    }
    // A GEMM whose product's tanh runs in its epilogue.
    let (m, k, n) = (7, 33, 65);
    let xa = rng.vec_f32(m * k);
    let xb = rng.vec_f32(k * n);
    let p = Array::from_slice(&xa, &[m, k], &d)
        .unwrap()
        .matmul(&Array::from_slice(&xb, &[k, n], &d).unwrap())
        .unwrap()
        .tanh()
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let want = matmul_ref(&xa, &xb, 1, m, k, n);
    for (i, (&g, &w)) in p.iter().zip(&want).enumerate() {
        assert!(
            (g as f64 - w.tanh()).abs() < 1e-5,
            "[{i}]: {g} vs {}",
            w.tanh()
        );
    }
}
