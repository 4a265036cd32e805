//! Elementwise ops against f64 references: random data, odd sizes,
//! non-contiguous inputs (transposed, broadcast, sliced with steps), every
//! dtype, poisoned pools; IEEE special values (NaN, infinities, -0.0),
//! integer overflow and division by zero, casts that saturate, take (gather)
//! with out-of-range and empty indices, and grids past 16M elements.
//!
//! A test whose comment starts with a severity (HIGH, MEDIUM, LOW) pins a
//! bug an adversarial review found; the comment says what went wrong and on
//! which backend. All are fixed.

mod common;

use common::arrays::{f, i, u};
use common::reference::all_close;
use common::{R, Rng, device, poison_pool};
use half::{bf16, f16};
use wgarray::{Array, DType, Device, Error, Slice};

const SIZES: [usize; 4] = [1, 7, 33, 1025];

fn close(got: f64, want: f64, rel: f64, abs: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got == want || (got - want).abs() <= abs + rel * want.abs()
}

fn check(name: &str, got: &[f64], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(close(g, w, rel, abs), "{name}[{i}]: got {g}, want {w}");
    }
}

type UnaryCase = (
    &'static str,
    fn(&Array) -> wgarray::Result<Array>,
    fn(f64) -> f64,
    f64,
);

fn erf(x: f64) -> f64 {
    // Abramowitz & Stegun 7.1.28 would do; use a high-precision series here.
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let y = 1.0
        - t * (-x * x - 1.26551223
            + t * (1.00002368
                + t * (0.37409196
                    + t * (0.09678418
                        + t * (-0.18628806
                            + t * (0.27886807
                                + t * (-1.13520398
                                    + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
            .exp();
    if x >= 0.0 { y } else { -y }
}

const UNARY: &[UnaryCase] = &[
    ("negative", Array::negative, |x| -x, 0.0),
    ("abs", Array::abs, f64::abs, 0.0),
    (
        "sign",
        Array::sign,
        |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        },
        0.0,
    ),
    ("exp", Array::exp, f64::exp, 2e-6),
    ("log", |a| a.abs()?.log(), |x| x.abs().ln(), 2e-6),
    ("log1p", |a| a.abs()?.log1p(), |x| x.abs().ln_1p(), 2e-6),
    ("sqrt", |a| a.abs()?.sqrt(), |x| x.abs().sqrt(), 2e-6),
    (
        "rsqrt",
        |a| a.abs()?.rsqrt(),
        |x| 1.0 / x.abs().sqrt(),
        2e-6,
    ),
    ("square", Array::square, |x| x * x, 1e-6),
    ("reciprocal", Array::reciprocal, |x| 1.0 / x, 1e-6),
    ("sin", Array::sin, f64::sin, 2e-6),
    ("cos", Array::cos, f64::cos, 2e-6),
    ("tanh", Array::tanh, f64::tanh, 2e-6),
    (
        "sigmoid",
        Array::sigmoid,
        |x| 1.0 / (1.0 + (-x).exp()),
        2e-6,
    ),
    ("relu", Array::relu, |x| x.max(0.0), 0.0),
    (
        "gelu",
        Array::gelu,
        |x| 0.5 * x * (1.0 + erf(x / 2f64.sqrt())),
        2e-6,
    ),
    (
        "gelu_approx",
        Array::gelu_approx,
        |x| {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        },
        2e-6,
    ),
    ("silu", Array::silu, |x| x / (1.0 + (-x).exp()), 2e-6),
    ("erf", Array::erf, erf, 2e-6),
    ("floor", Array::floor, f64::floor, 0.0),
    ("ceil", Array::ceil, f64::ceil, 0.0),
    ("round", Array::round, |x| x.round_ties_even(), 0.0),
];

fn random_f32(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.f32() * scale).collect()
}

#[test]
fn unary_ops_match_f64_at_odd_sizes() {
    let d = device();
    let mut rng = Rng::new(21);
    for &n in &SIZES {
        poison_pool(&d, n);
        let mut x = random_f32(&mut rng, n, 4.0);
        x[0] = 2.5; // a tie for round
        let a = Array::from_slice(&x, &[n], &d).unwrap();
        for (name, f, r, tol) in UNARY {
            let got = f(&a).unwrap().to_f64_vec().unwrap();
            let want: Vec<f64> = x.iter().map(|&v| r(v as f64)).collect();
            check(name, &got, &want, *tol, 1e-6);
        }
    }
}

/// Views that are not contiguous: a transpose, a broadcast, a reversed
/// stepped slice.
fn strided_views(d: &Device, x: &[f32], r: usize, c: usize) -> Vec<(String, Array, Vec<f32>)> {
    let a = Array::from_slice(x, &[r, c], d).unwrap();
    let mut out = Vec::new();
    // transpose: [c, r]
    let t: Vec<f32> = (0..c)
        .flat_map(|j| (0..r).map(move |i| (i, j)))
        .map(|(i, j)| x[i * c + j])
        .collect();
    out.push(("transpose".to_string(), a.transpose(), t));
    // broadcast row 0 to [3, c]
    let row = a.slice(&[(0..1).into()]).unwrap();
    let b: Vec<f32> = (0..3).flat_map(|_| x[..c].to_vec()).collect();
    out.push((
        "broadcast".to_string(),
        row.broadcast_to(&[3, c]).unwrap(),
        b,
    ));
    // x[::-2, 1::3]
    let s = a
        .slice(&[Slice::step(-2), Slice::new(Some(1), None, 3)])
        .unwrap();
    let rows: Vec<usize> = (0..r).rev().step_by(2).collect();
    let cols: Vec<usize> = (1..c).step_by(3).collect();
    let v: Vec<f32> = rows
        .iter()
        .flat_map(|&i| cols.iter().map(move |&j| (i, j)))
        .map(|(i, j)| x[i * c + j])
        .collect();
    assert_eq!(s.shape(), &[rows.len(), cols.len()]);
    out.push(("reversed stepped slice".to_string(), s, v));
    out
}

#[test]
fn ops_read_non_contiguous_views() {
    let d = device();
    let mut rng = Rng::new(22);
    for &(r, c) in &[(7, 33), (33, 7), (1, 1025)] {
        poison_pool(&d, r * c);
        let x = random_f32(&mut rng, r * c, 3.0);
        for (name, v, host) in strided_views(&d, &x, r, c) {
            // the view itself reads back right
            assert_eq!(v.to_vec::<f32>().unwrap(), host, "{name} {r}x{c}");
            let e = v.exp().unwrap().to_f64_vec().unwrap();
            let want: Vec<f64> = host.iter().map(|&h| (h as f64).exp()).collect();
            check(&format!("exp of {name}"), &e, &want, 2e-6, 0.0);
            // binary with a strided and a dense operand
            let dense = Array::from_slice(&host, v.shape(), &d).unwrap();
            let m = (&v * &dense).unwrap().to_f64_vec().unwrap();
            let want: Vec<f64> = host.iter().map(|&h| h as f64 * h as f64).collect();
            check(&format!("mul of {name}"), &m, &want, 1e-6, 0.0);
            // a copy makes it dense
            assert_eq!(v.contiguous().unwrap().to_vec::<f32>().unwrap(), host);
        }
    }
}

type BinCase = (
    &'static str,
    fn(&Array, &Array) -> wgarray::Result<Array>,
    fn(f64, f64) -> f64,
);

const BINARY_F: &[BinCase] = &[
    ("add", |a, b| a.add(b), |a, b| a + b),
    ("subtract", |a, b| a.subtract(b), |a, b| a - b),
    ("multiply", |a, b| a.multiply(b), |a, b| a * b),
    ("divide", |a, b| a.divide(b), |a, b| a / b),
    (
        "floor_divide",
        |a, b| a.floor_divide(b),
        |a, b| (a / b).floor(),
    ),
    (
        "remainder",
        |a, b| a.remainder(b),
        |a, b| a - b * (a / b).floor(),
    ),
    ("maximum", |a, b| a.maximum(b), f64::max),
    ("minimum", |a, b| a.minimum(b), f64::min),
    ("power", |a, b| a.abs()?.power(b), |a, b| a.abs().powf(b)),
    ("equal", |a, b| a.equal(b), |a, b| (a == b) as u8 as f64),
    (
        "not_equal",
        |a, b| a.not_equal(b),
        |a, b| (a != b) as u8 as f64,
    ),
    ("less", |a, b| a.less(b), |a, b| (a < b) as u8 as f64),
    (
        "less_equal",
        |a, b| a.less_equal(b),
        |a, b| (a <= b) as u8 as f64,
    ),
    ("greater", |a, b| a.greater(b), |a, b| (a > b) as u8 as f64),
    (
        "greater_equal",
        |a, b| a.greater_equal(b),
        |a, b| (a >= b) as u8 as f64,
    ),
    (
        "logical_and",
        |a, b| a.logical_and(b),
        |a, b| (a != 0.0 && b != 0.0) as u8 as f64,
    ),
    (
        "logical_or",
        |a, b| a.logical_or(b),
        |a, b| (a != 0.0 || b != 0.0) as u8 as f64,
    ),
];

#[test]
fn add_and_mul_match_the_reference_at_odd_sizes() {
    let d = device();
    let mut rng = Rng::new(1);
    for &n in SIZES.iter().chain(&[70_000]) {
        poison_pool(&d, n);
        let (x, y) = (rng.vec_f32(n), rng.vec_f32(n));
        let a = Array::from_slice(&x, &[n], &d).unwrap();
        let b = Array::from_slice(&y, &[n], &d).unwrap();
        let s = (&a + &b).unwrap();
        let p = (&a * &b).unwrap();
        let q = a.subtract(&b).unwrap().maximum(&a).unwrap();
        wgarray::eval(&[&s, &p, &q]).unwrap();
        let (s, p, q) = (
            s.to_vec::<f32>().unwrap(),
            p.to_vec::<f32>().unwrap(),
            q.to_vec::<f32>().unwrap(),
        );
        for i in 0..n {
            assert_eq!(s[i], x[i] + y[i], "add n={n} i={i}");
            assert_eq!(p[i], x[i] * y[i], "mul n={n} i={i}");
            assert_eq!(q[i], (x[i] - y[i]).max(x[i]), "sub/max n={n} i={i}");
        }
    }
}

#[test]
fn integer_ops_and_broadcasting() {
    let d = device();
    let mut rng = Rng::new(2);
    poison_pool(&d, 7 * 33);
    let (x, y) = (rng.vec_i32(7 * 33, 1000), rng.vec_i32(33, 1000));
    let a = Array::from_slice(&x, &[7, 33], &d).unwrap();
    let b = Array::from_slice(&y, &[33], &d).unwrap();
    let c = (&a * &b).unwrap();
    assert_eq!(c.shape(), &[7, 33]);
    let got = c.to_vec::<i32>().unwrap();
    for i in 0..7 {
        for j in 0..33 {
            assert_eq!(got[i * 33 + j], x[i * 33 + j] * y[j]);
        }
    }
    // [7, 1] + [1, 33] -> [7, 33]
    let col = Array::from_slice(&x[..7], &[7, 1], &d).unwrap();
    let row = Array::from_slice(&y, &[1, 33], &d).unwrap();
    let got = (&col + &row).unwrap().to_vec::<i32>().unwrap();
    for i in 0..7 {
        for j in 0..33 {
            assert_eq!(got[i * 33 + j], x[i] + y[j]);
        }
    }
    // Integer scalars take the array's dtype.
    let got = (&a + 3).unwrap().to_vec::<i32>().unwrap();
    assert_eq!(got[5], x[5] + 3);
}

#[test]
fn f16_arithmetic_runs_everywhere_through_f32() {
    // Elementwise kernels decode f16 bits to f32 and round back, so they need
    // no SHADER_F16 (GL has none).
    let d = device();
    let a = Array::from_slice(&[half::f16::from_f32(1.5); 3], &[3], &d).unwrap();
    let s = (&a + &a).unwrap();
    assert_eq!(s.dtype(), DType::F16);
    assert_eq!(
        s.to_vec::<half::f16>().unwrap(),
        vec![half::f16::from_f32(3.0); 3]
    );
}

#[test]
fn binary_ops_broadcast_and_match_f64() {
    let d = device();
    let mut rng = Rng::new(23);
    for &(r, c) in &[(1, 1), (7, 33), (33, 7), (3, 1025)] {
        poison_pool(&d, r * c);
        // [r, c] op [c]: a broadcast operand; some exact ties for comparisons.
        let mut x: Vec<f32> = random_f32(&mut rng, r * c, 5.0)
            .iter()
            .map(|v| (v * 4.0).round() / 4.0)
            .collect();
        let y: Vec<f32> = random_f32(&mut rng, c, 5.0)
            .iter()
            .map(|v| (v * 4.0).round() / 4.0 + 0.125)
            .collect();
        x[0] = y[0];
        let a = Array::from_slice(&x, &[r, c], &d).unwrap();
        let b = Array::from_slice(&y, &[c], &d).unwrap();
        for (name, f, reference) in BINARY_F {
            let z = f(&a, &b).unwrap();
            assert_eq!(z.shape(), &[r, c]);
            let got = z.to_f64_vec().unwrap();
            let want: Vec<f64> = (0..r * c)
                .map(|i| reference(x[i] as f64, y[i % c] as f64))
                .collect();
            check(name, &got, &want, 3e-6, 1e-6);
        }
    }
}

#[test]
fn integer_division_and_remainder_are_floored() {
    let d = device();
    let x = [7i32, -7, 7, -7, 0, 5];
    let y = [2i32, 2, -2, -2, 3, 0];
    let a = Array::from_slice(&x, &[6], &d).unwrap();
    let b = Array::from_slice(&y, &[6], &d).unwrap();
    assert_eq!(
        a.floor_divide(&b).unwrap().to_vec::<i32>().unwrap(),
        vec![3, -4, -4, 3, 0, 0]
    );
    assert_eq!(
        a.remainder(&b).unwrap().to_vec::<i32>().unwrap(),
        vec![1, 1, -1, -1, 0, 0]
    );
    let q = a.divide(&b).unwrap();
    assert_eq!(q.dtype(), DType::F32);
    assert_eq!(q.to_vec::<f32>().unwrap()[..5], [3.5, -3.5, -3.5, 3.5, 0.0]);
    assert_eq!(
        a.power(Array::from_slice(&[3i32; 6], &[6], &d).unwrap())
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![343, -343, 343, -343, 0, 125]
    );
    let f = Array::from_slice(&[-2.0f32, -2.0, 0.0], &[3], &d).unwrap();
    let e = Array::from_slice(&[3.0f32, 0.5, -1.0], &[3], &d).unwrap();
    let p = f.power(&e).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(p[0], -8.0);
    assert!(p[1].is_nan());
    assert!(p[2].is_infinite());
}

#[test]
fn promotion_and_scalars() {
    let d = device();
    let i = Array::from_slice(&[1i32, 2, 3], &[3], &d).unwrap();
    let f = Array::from_slice(&[0.5f32, 0.5, 0.5], &[3], &d).unwrap();
    let u = Array::from_slice(&[1u32, 2, 3], &[3], &d).unwrap();
    let b = Array::from_slice(&[true, false, true], &[3], &d).unwrap();
    let h = Array::from_slice(&[half::f16::from_f32(0.25); 3], &[3], &d).unwrap();
    let bf = Array::from_slice(&[half::bf16::from_f32(0.75); 3], &[3], &d).unwrap();
    assert_eq!((&i + &f).unwrap().dtype(), DType::F32);
    assert_eq!(
        (&i + &f).unwrap().to_vec::<f32>().unwrap(),
        vec![1.5, 2.5, 3.5]
    );
    assert_eq!((&i + &u).unwrap().dtype(), DType::I32);
    assert_eq!((&b + &i).unwrap().to_vec::<i32>().unwrap(), vec![2, 2, 4]);
    assert_eq!((&h + &bf).unwrap().dtype(), DType::F32);
    assert_eq!((&h + &bf).unwrap().to_vec::<f32>().unwrap(), vec![1.0; 3]);
    assert_eq!((&h * &i).unwrap().dtype(), DType::F16);
    // weak scalars: the dtype comes from the scalar's type, not its value
    assert_eq!((&i * 2).unwrap().to_vec::<i32>().unwrap(), vec![2, 4, 6]);
    assert_eq!(
        (&i * 2.0).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0, 4.0, 6.0]
    );
    assert_eq!(
        (&i * 0.5).unwrap().to_vec::<f32>().unwrap(),
        vec![0.5, 1.0, 1.5]
    );
    assert_eq!((&b + 1).unwrap().to_vec::<i32>().unwrap(), vec![2, 1, 2]);
    assert_eq!(
        (&b + 1.0).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0, 1.0, 2.0]
    );
    assert_eq!(
        (&h * 4.0).unwrap().to_vec::<half::f16>().unwrap(),
        vec![half::f16::ONE; 3]
    );
    assert_eq!((-&i).unwrap().to_vec::<i32>().unwrap(), vec![-1, -2, -3]);
    assert_eq!((&i % 2).unwrap().to_vec::<i32>().unwrap(), vec![1, 0, 1]);
    assert_eq!(wgarray::promote_types(DType::Bool, DType::U32), DType::U32);
}

#[test]
fn where_selects_with_broadcasting() {
    let d = device();
    let cond = Array::from_slice(&[true, false, true], &[3, 1], &d).unwrap();
    let a = Array::from_slice(&[1.0f32, 2.0], &[2], &d).unwrap();
    let b = Array::from_slice(&[-1i32], &[1], &d).unwrap();
    let w = wgarray::where_(&cond, &a, &b).unwrap();
    assert_eq!(w.shape(), &[3, 2]);
    assert_eq!(w.dtype(), DType::F32);
    assert_eq!(
        w.to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, -1.0, -1.0, 1.0, 2.0]
    );
    let not = cond.logical_not().unwrap();
    assert_eq!(not.to_vec::<bool>().unwrap(), vec![false, true, false]);
}

#[test]
fn astype_between_every_pair_matches_half_bit_for_bit() {
    let d = device();
    let mut rng = Rng::new(24);
    // Values that exercise rounding: ties, subnormals, overflow, signs.
    let mut x: Vec<f32> = random_f32(&mut rng, 1025, 70000.0);
    x.extend([
        0.0,
        -0.0,
        1.0,
        -1.5,
        65504.0,
        65520.0,
        1e-8,
        -3e-7,
        6.1e-5,
        2.0f32.powi(-24),
        2.0f32.powi(-25),
        1.0 + 2.0f32.powi(-11),
        1.0 + 3.0 * 2.0f32.powi(-11),
        1.0 + 2.0f32.powi(-8),
        f32::INFINITY,
        f32::NEG_INFINITY,
        3.4e38,
        0.5,
        2.5,
        -2.5,
        1e-40,
    ]);
    let n = x.len();
    let a = Array::from_slice(&x, &[n], &d).unwrap();
    let h: Vec<half::f16> = a.astype(DType::F16).unwrap().to_vec().unwrap();
    for i in 0..n {
        assert_eq!(
            h[i].to_bits(),
            half::f16::from_f32(x[i]).to_bits(),
            "f16 of {}",
            x[i]
        );
    }
    let b: Vec<half::bf16> = a.astype(DType::BF16).unwrap().to_vec().unwrap();
    for i in 0..n {
        assert_eq!(
            b[i].to_bits(),
            half::bf16::from_f32(x[i]).to_bits(),
            "bf16 of {}",
            x[i]
        );
    }
    // f16 -> f32 is exact, subnormals included.
    let hs: Vec<half::f16> = (0..=0xffffu16)
        .step_by(7)
        .map(half::f16::from_bits)
        .filter(|v| !v.is_nan())
        .collect();
    let ha = Array::from_slice(&hs, &[hs.len()], &d).unwrap();
    let back = ha.astype(DType::F32).unwrap().to_vec::<f32>().unwrap();
    for (v, g) in hs.iter().zip(&back) {
        assert_eq!(
            g.to_bits(),
            v.to_f32().to_bits(),
            "f32 of f16 {:#x}",
            v.to_bits()
        );
    }
    // Every pair of dtypes on small integers round-trips.
    let small = [0.0f32, 1.0, 2.0, 7.0, 100.0];
    // f64 where the adapter has it (tests/dtypes.rs checks the error).
    let f64_ok = d
        .features()
        .contains(wgarray::wgpu::Features::SHADER_F64 | wgarray::wgpu::Features::SHADER_INT64);
    let dtypes: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|&t| t != DType::F64 || f64_ok)
        .collect();
    for &from in &dtypes {
        for &to in &dtypes {
            let src = Array::from_slice(&small, &[5], &d)
                .unwrap()
                .astype(from)
                .unwrap();
            let got = src.astype(to).unwrap().to_f64_vec().unwrap();
            let want: Vec<f64> = small
                .iter()
                .map(|&v| {
                    if to == DType::Bool || from == DType::Bool {
                        (v != 0.0) as u8 as f64
                    } else {
                        v as f64
                    }
                })
                .collect();
            assert_eq!(got, want, "{from} -> {to}");
        }
    }
    // Float to int truncates toward zero.
    let f = Array::from_slice(&[-2.7f32, 2.7, -0.5], &[3], &d).unwrap();
    assert_eq!(
        f.astype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
        vec![-2, 2, 0]
    );
}

#[test]
fn bf16_and_f16_arithmetic_round_once_from_f32() {
    let d = device();
    let mut rng = Rng::new(25);
    let xs: Vec<f32> = random_f32(&mut rng, 33, 10.0);
    let ys: Vec<f32> = random_f32(&mut rng, 33, 10.0);
    for dtype in [DType::F16, DType::BF16] {
        let a = Array::from_slice(&xs, &[33], &d)
            .unwrap()
            .astype(dtype)
            .unwrap();
        let b = Array::from_slice(&ys, &[33], &d)
            .unwrap()
            .astype(dtype)
            .unwrap();
        let got = (&a * &b).unwrap().to_f64_vec().unwrap();
        let (av, bv) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
        for i in 0..33 {
            let p = (av[i] as f32) * (bv[i] as f32);
            let want = match dtype {
                DType::F16 => half::f16::from_f32(p).to_f64(),
                _ => half::bf16::from_f32(p).to_f64(),
            };
            assert_eq!(got[i], want, "{dtype} {i}");
        }
    }
}

#[test]
fn take_gathers_along_any_axis() {
    let d = device();
    let mut rng = Rng::new(26);
    let (v, h) = (33usize, 7usize);
    let w = random_f32(&mut rng, v * h, 1.0);
    let table = Array::from_slice(&w, &[v, h], &d).unwrap();
    // an embedding lookup: [2, 5] ids -> [2, 5, 7]
    let ids = [0i32, 32, 5, 5, -1, 7, 100, -100, 3, 1];
    let idx = Array::from_slice(&ids, &[2, 5], &d).unwrap();
    poison_pool(&d, 2 * 5 * h);
    let e = table.take(&idx, 0).unwrap();
    assert_eq!(e.shape(), &[2, 5, h]);
    let got = e.to_vec::<f32>().unwrap();
    for (p, &i) in ids.iter().enumerate() {
        let row = (if i < 0 { i + v as i32 } else { i }).clamp(0, v as i32 - 1) as usize;
        assert_eq!(
            &got[p * h..(p + 1) * h],
            &w[row * h..(row + 1) * h],
            "id {i}"
        );
    }
    // along axis 1 of a transposed (strided) view, with u32 indices
    let t = table.transpose(); // [h, v]
    let cols = Array::from_slice(&[3u32, 0, 32], &[3], &d).unwrap();
    let g = t.take(&cols, -1).unwrap();
    assert_eq!(g.shape(), &[h, 3]);
    let got = g.to_vec::<f32>().unwrap();
    for r in 0..h {
        for (c, &j) in [3usize, 0, 32].iter().enumerate() {
            assert_eq!(got[r * 3 + c], w[j * h + r]);
        }
    }
    // flattened, 2-byte dtype
    let hb = table.astype(DType::BF16).unwrap();
    let f = hb
        .take(&Array::from_slice(&[1i32, 8, 230], &[3], &d).unwrap(), None)
        .unwrap();
    assert_eq!(
        f.to_vec::<half::bf16>().unwrap(),
        [1usize, 8, 230]
            .iter()
            .map(|&i| half::bf16::from_f32(w[i]))
            .collect::<Vec<_>>()
    );
    assert!(
        table
            .take(&Array::from_slice(&[0.5f32], &[1], &d).unwrap(), 0)
            .is_err()
    );
}

#[test]
fn nan_is_truthy_and_compares_unordered() {
    // NumPy: bool(nan) is True; every comparison with NaN is False except
    // !=. Drivers may assume no NaN in float comparisons (NVIDIA's folds
    // x == x), so the kernels test NaN on the bits; this pins the results.
    let d = device();
    let x = Array::from_slice(&[f32::NAN, 0.0, 1.0, f32::NAN], &[4], &d).unwrap();
    let y = Array::from_slice(&[1.0f32, f32::NAN, 1.0, f32::NAN], &[4], &d).unwrap();
    let bools = |a: Array| -> Vec<bool> { a.to_vec::<bool>().unwrap() };
    assert_eq!(
        bools(x.astype(DType::Bool).unwrap()),
        [true, false, true, true]
    );
    assert_eq!(bools(x.logical_not().unwrap()), [false, true, false, false]);
    assert_eq!(bools(x.logical_and(&y).unwrap()), [true, false, true, true]);
    assert_eq!(bools(x.logical_or(&y).unwrap()), [true, true, true, true]);
    assert_eq!(bools(x.equal(&y).unwrap()), [false, false, true, false]);
    assert_eq!(bools(x.not_equal(&y).unwrap()), [true, true, false, true]);
    assert_eq!(bools(x.less(&y).unwrap()), [false, false, false, false]);
    assert_eq!(
        bools(x.greater_equal(&y).unwrap()),
        [false, false, true, false]
    );
    let r = x.relu().unwrap().to_vec::<f32>().unwrap();
    assert!(r[0].is_nan() && r[1] == 0.0 && r[2] == 1.0, "relu: {r:?}");
}

/// erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7),
/// evaluated in f64.
fn erf_abramowitz_stegun(x: f32) -> f32 {
    // high-accuracy erf via f64 series / continued fraction is overkill: use A&S 7.1.26 bound
    let t = 1.0 / (1.0 + 0.3275911 * (x.abs() as f64));
    let y = 1.0
        - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
            + 0.254829592)
            * t
            * (-(x as f64) * (x as f64)).exp();
    (y as f32).copysign(x)
}

// MEDIUM: log1p(inf)=NaN (both); sign(NaN)=0 (both); gl only: tanh(NaN)=-1, relu(NaN)=0
#[test]
fn unary_specials() -> R {
    let d = device();
    let v = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        100.0,
        -100.0,
        0.5,
        1.5,
        2.5,
        -0.5,
        -2.5,
    ];
    let x = f(&d, &v, &[v.len()]);
    let check = |name: &str, got: Vec<f32>, fun: &dyn Fn(f32) -> f32, tol: f32| {
        let want: Vec<f32> = v.iter().map(|x| fun(*x)).collect();
        if !all_close(&got, &want, tol) {
            Some(format!("{name}: got {got:?}\n   want {want:?}"))
        } else {
            None
        }
    };
    let sig = |x: f32| 1.0 / (1.0 + (-x).exp());
    let bad: Vec<String> = [
        check("tanh", x.tanh()?.to_vec()?, &|x: f32| x.tanh(), 1e-6),
        check("sigmoid", x.sigmoid()?.to_vec()?, &sig, 1e-6),
        check("exp", x.exp()?.to_vec()?, &|x: f32| x.exp(), 1e-6),
        check("log", x.log()?.to_vec()?, &|x: f32| x.ln(), 1e-6),
        check("log1p", x.log1p()?.to_vec()?, &|x: f32| x.ln_1p(), 1e-6),
        check("sqrt", x.sqrt()?.to_vec()?, &|x: f32| x.sqrt(), 1e-6),
        check(
            "rsqrt",
            x.rsqrt()?.to_vec()?,
            &|x: f32| 1.0 / x.sqrt(),
            1e-6,
        ),
        check(
            "reciprocal",
            x.reciprocal()?.to_vec()?,
            &|x: f32| 1.0 / x,
            1e-6,
        ),
        check(
            "round",
            x.round()?.to_vec()?,
            &|x: f32| x.round_ties_even(),
            0.0,
        ),
        check("floor", x.floor()?.to_vec()?, &|x: f32| x.floor(), 0.0),
        check("abs", x.abs()?.to_vec()?, &|x: f32| x.abs(), 0.0),
        check(
            "relu",
            x.relu()?.to_vec()?,
            &|x: f32| {
                if x > 0.0 || x.is_nan() { x } else { 0.0 }
            },
            0.0,
        ),
        check(
            "erf",
            x.erf()?.to_vec()?,
            &|x: f32| {
                if x.is_nan() {
                    x
                } else if x.is_infinite() {
                    x.signum()
                } else {
                    erf_abramowitz_stegun(x)
                }
            },
            2e-6,
        ),
        check(
            "gelu_approx",
            x.gelu_approx()?.to_vec()?,
            &|x: f32| {
                0.5 * x
                    * (1.0
                        + ((2.0f32 / std::f32::consts::PI).sqrt() * (x + 0.044715 * x * x * x))
                            .tanh())
            },
            1e-5,
        ),
        check(
            "sign",
            x.sign()?.to_vec()?,
            &|x: f32| {
                if x.is_nan() || x == 0.0 {
                    x
                } else {
                    x.signum()
                }
            },
            0.0,
        ),
        check("sin", x.sin()?.to_vec()?, &|x: f32| x.sin(), 1e-5),
    ]
    .into_iter()
    .flatten()
    .collect();
    // -0.0 bits
    let n0 = f(&d, &[0.0], &[1]).negative()?.item::<f32>()?;
    let mut bad = bad;
    if n0.to_bits() != (-0.0f32).to_bits() {
        bad.push(format!("negative(0.0) = {n0:?} (bits {:#x})", n0.to_bits()));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    Ok(())
}

// LOW, both: sign(NaN) = 0, NumPy NaN
#[test]
fn sign_of_nan() -> R {
    let d = device();
    let s = f(&d, &[f32::NAN], &[1]).sign()?.item::<f32>()?;
    assert!(s.is_nan(), "sign(NaN) = {s}");
    Ok(())
}

// LOW, both: log1p(inf) = NaN, NumPy inf
#[test]
fn log1p_inf() -> R {
    let d = device();
    let s = f(&d, &[f32::INFINITY, 1e30], &[2])
        .log1p()?
        .to_vec::<f32>()?;
    assert_eq!(s[0], f32::INFINITY, "log1p(inf)");
    // Within 2 ulp: GPUs' log differs from the host's in the last bit
    // (an H200 gave 69.077545 against the host's 69.07755).
    let want = 1e30f32.ln();
    assert!(
        (s[1] - want).abs() <= 2.0 * f32::EPSILON * want,
        "log1p(1e30) = {}",
        s[1]
    );
    Ok(())
}

// LOW, both: pow(1,NaN)=NaN want 1; pow(-0.0,-1)=inf want -inf; pow(-1,inf)=NaN want 1
#[test]
fn pow_edge_cases() -> R {
    let d = device();
    let base = [
        0.0f32,
        -8.0,
        -2.0,
        -2.0,
        f32::NAN,
        1.0,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        2.0,
        -1.0,
    ];
    let exp = [
        0.0f32,
        1.0 / 3.0,
        3.0,
        2.0,
        0.0,
        f32::NAN,
        3.0,
        -1.0,
        -1.0,
        -1.0,
        f32::INFINITY,
    ];
    let got = f(&d, &base, &[11])
        .power(f(&d, &exp, &[11]))?
        .to_vec::<f32>()?;
    let want: Vec<f32> = base.iter().zip(&exp).map(|(b, e)| b.powf(*e)).collect();
    assert!(
        all_close(&got, &want, 1e-6),
        "pow got {got:?}\n want {want:?}"
    );
    let gi = i(&d, &[3, 2, -2, 0, 5], &[5])
        .power(i(&d, &[4, 31, 3, 0, 0], &[5]))?
        .to_vec::<i32>()?;
    assert_eq!(gi, vec![81, i32::MIN, -8, 1, 1]);
    Ok(())
}

#[test]
fn int_overflow_and_div_by_zero() -> R {
    let d = device();
    let a = i(&d, &[i32::MAX, i32::MIN, 7, -7, i32::MIN, 0], &[6]);
    let b = i(&d, &[1, -1, 0, 0, -1, 0], &[6]);
    assert_eq!((&a + &b)?.to_vec::<i32>()?[0], i32::MIN);
    assert_eq!(
        a.floor_divide(&b)?.to_vec::<i32>()?,
        vec![i32::MAX, i32::MIN, 0, 0, i32::MIN, 0]
    );
    assert_eq!(a.remainder(&b)?.to_vec::<i32>()?, vec![0, 0, 0, 0, 0, 0]);
    assert_eq!(a.abs()?.to_vec::<i32>()?[1], i32::MIN);
    assert_eq!(a.negative()?.to_vec::<i32>()?[1], i32::MIN);
    let uu = u(&d, &[0, 5, u32::MAX, 3_000_000_000], &[4]);
    let one = u(&d, &[1, 0, 2, 7], &[4]);
    assert_eq!(
        (&uu - &one)?.to_vec::<u32>()?,
        vec![u32::MAX, 5, u32::MAX - 2, 3_000_000_000 - 7]
    );
    assert_eq!(
        uu.floor_divide(&one)?.to_vec::<u32>()?,
        vec![0, 0, u32::MAX / 2, 3_000_000_000 / 7]
    );
    assert_eq!(
        uu.remainder(&one)?.to_vec::<u32>()?,
        vec![0, 0, 1, 3_000_000_000 % 7]
    );
    assert_eq!(uu.max(0, false)?.item::<u32>()?, u32::MAX);
    assert_eq!(uu.argmax(None, false)?.item::<u32>()?, 2);
    assert_eq!(uu.min(0, false)?.item::<u32>()?, 0);
    Ok(())
}

#[test]
fn bool_arithmetic() -> R {
    let d = device();
    let a = Array::from_slice(&[true, true, false, false], &[4], &d)?;
    let b = Array::from_slice(&[true, false, true, false], &[4], &d)?;
    let s = (&a + &b)?;
    assert_eq!(s.dtype(), DType::Bool);
    assert_eq!(s.to_vec::<bool>()?, vec![true, true, true, false]);
    assert_eq!(
        (&a * &b)?.to_vec::<bool>()?,
        vec![true, false, false, false]
    );
    assert_eq!(a.sum(0, false)?.item::<i32>()?, 2);
    assert_eq!(a.argmax(None, false)?.item::<u32>()?, 0);
    assert_eq!(b.argmin(None, false)?.item::<u32>()?, 1);
    assert_eq!(
        Array::full(&[5], 1.0, DType::Bool, &d)
            .unwrap()
            .to_vec::<bool>()?,
        vec![true; 5]
    );
    assert_eq!((&a + 1)?.to_vec::<i32>()?, vec![2, 2, 1, 1]);
    assert_eq!((&a + 1.0)?.to_vec::<f32>()?, vec![2.0, 2.0, 1.0, 1.0]);
    Ok(())
}

#[test]
fn nan_comparisons_and_minmax() -> R {
    let d = device();
    let nan = f32::NAN;
    let a = f(&d, &[nan, 1.0, nan, 2.0], &[4]);
    let b = f(&d, &[nan, nan, 1.0, 2.0], &[4]);
    assert_eq!(
        a.equal(&b)?.to_vec::<bool>()?,
        vec![false, false, false, true]
    );
    assert_eq!(
        a.less(&b)?.to_vec::<bool>()?,
        vec![false, false, false, false]
    );
    assert_eq!(
        a.greater_equal(&b)?.to_vec::<bool>()?,
        vec![false, false, false, true]
    );
    let mx = a.maximum(&b)?.to_vec::<f32>()?;
    let mn = a.minimum(&b)?.to_vec::<f32>()?;
    assert!(
        mx[..3].iter().all(|x| x.is_nan()) && mx[3] == 2.0,
        "maximum {mx:?}"
    );
    assert!(
        mn[..3].iter().all(|x| x.is_nan()) && mn[3] == 2.0,
        "minimum {mn:?}"
    );
    Ok(())
}

// HIGH, vulkan only: NaN != x is false (naga OpFOrdNotEqual); gl correct
#[test]
fn nan_not_equal() -> R {
    // NumPy: nan != nan is True; `x != x` is the classic isnan test
    let d = device();
    let nan = f32::NAN;
    let a = f(&d, &[nan, 1.0, nan, 2.0], &[4]);
    let b = f(&d, &[nan, nan, 1.0, 2.0], &[4]);
    assert_eq!(
        a.not_equal(&b)?.to_vec::<bool>()?,
        vec![true, true, true, false]
    );
    assert_eq!(
        a.not_equal(&a)?.to_vec::<bool>()?,
        vec![true, false, true, false]
    );
    Ok(())
}

// MEDIUM, gl only: f32 3e9 -> i32 gives i32::MIN (vulkan saturates to 2147483520): backend-dependent
#[test]
fn astype_saturation_and_nan() -> R {
    let d = device();
    let x = f(
        &d,
        &[3e9, -3e9, f32::NAN, -1.5, 1.5, f32::INFINITY, -0.0, 1e6],
        &[8],
    );
    let xi = x.astype(DType::I32)?.to_vec::<i32>()?;
    // Saturates at the integer type's own limits (tests/numerics.rs).
    assert_eq!(&xi[..2], &[i32::MAX, i32::MIN]);
    assert_eq!(&xi[3..6], &[-1, 1, i32::MAX]);
    let xu = x.astype(DType::U32)?.to_vec::<u32>()?;
    assert_eq!(xu[0], 3_000_000_000);
    assert_eq!(xu[1], 0);
    assert_eq!(xu[5], u32::MAX, "inf -> u32");
    let xb = x.astype(DType::Bool)?.to_vec::<bool>()?;
    assert_eq!(xb, vec![true, true, true, true, true, true, false, true]);
    let xh = x.astype(DType::F16)?.to_vec::<f16>()?;
    let want: Vec<f16> = [3e9f32, -3e9, f32::NAN, -1.5, 1.5, f32::INFINITY, -0.0, 1e6]
        .iter()
        .map(|v| f16::from_f32(*v))
        .collect();
    for k in 0..8 {
        assert!(
            xh[k].to_bits() == want[k].to_bits() || (xh[k].is_nan() && want[k].is_nan()),
            "f16 {k}: {} vs {}",
            xh[k],
            want[k]
        );
    }
    let ints = i(&d, &[-1, i32::MIN, 70000, 16777217], &[4]);
    assert_eq!(
        ints.astype(DType::U32)?.to_vec::<u32>()?[..2],
        [u32::MAX, 1 << 31]
    );
    let ih = ints.astype(DType::F16)?.to_vec::<f16>()?;
    assert!(ih[2].is_infinite(), "70000 -> f16 = {}", ih[2]);
    assert_eq!(ints.astype(DType::F32)?.to_vec::<f32>()?[3], 16777216.0);
    let us = u(&d, &[u32::MAX, 1 << 31], &[2]);
    assert_eq!(us.astype(DType::I32)?.to_vec::<i32>()?, vec![-1, i32::MIN]);
    assert_eq!(
        us.astype(DType::F32)?.to_vec::<f32>()?,
        vec![4294967296.0, 2147483648.0]
    );
    Ok(())
}

#[test]
fn nan_payload_to_bf16_f16_stays_nan() -> R {
    let d = device();
    let bits = [
        0x7F80_0001u32,
        0xFF80_0001,
        0x7FC0_0000,
        0x7F80_1000,
        0x7F80_0000,
    ];
    let v: Vec<f32> = bits.iter().map(|b| f32::from_bits(*b)).collect();
    let x = f(&d, &v, &[5]);
    let b = x.astype(DType::BF16)?.to_vec::<bf16>()?;
    let h = x.astype(DType::F16)?.to_vec::<f16>()?;
    for k in 0..4 {
        assert!(
            b[k].is_nan(),
            "bf16 of NaN bits {:#x} became {:#x}",
            bits[k],
            b[k].to_bits()
        );
        assert!(
            h[k].is_nan(),
            "f16 of NaN bits {:#x} became {:#x}",
            bits[k],
            h[k].to_bits()
        );
    }
    assert!(b[4].is_infinite() && h[4].is_infinite());
    // arithmetic keeps them NaN too
    let y = (&x.astype(DType::BF16)? + 0.0)?.to_vec::<bf16>()?;
    assert!(y[..4].iter().all(|z| z.is_nan()), "{y:?}");
    Ok(())
}

// LOW, both: u32 index >= 2^31 treated as negative i32 (clips to 0, not to the end)
#[test]
fn take_indices_u32_large_and_negative() -> R {
    let d = device();
    let x = f(&d, &[10.0, 11.0, 12.0, 13.0, 14.0], &[5]);
    let ii = i(&d, &[-1, -5, -6, 5, 100, i32::MIN, i32::MAX], &[7]);
    assert_eq!(
        x.take(&ii, 0)?.to_vec::<f32>()?,
        vec![14.0, 10.0, 10.0, 14.0, 14.0, 10.0, 14.0]
    );
    let iu = u(&d, &[0, 4, 5, 1 << 31, u32::MAX], &[5]);
    // u32 is non-negative: all out-of-range ones clip to the last
    assert_eq!(
        x.take(&iu, 0)?.to_vec::<f32>()?,
        vec![10.0, 14.0, 14.0, 14.0, 14.0]
    );
    assert!(matches!(
        x.take(&f(&d, &[0.0], &[1]), 0),
        Err(Error::OpDType { op: "take", .. })
    ));
    assert!(matches!(
        x.take(&Array::from_slice(&[true], &[1], &d)?, 0),
        Err(Error::OpDType { op: "take", .. })
    ));
    // take from f16 with odd counts, 2-D indices, axis 1 of transposed
    let h: Vec<f16> = (0..15).map(|v| f16::from_f32(v as f32)).collect();
    let xh = Array::from_slice(&h, &[3, 5], &d)?.transpose(); // [5,3]
    let t = xh.take(&i(&d, &[2, 0, 2], &[3, 1]), 1)?; // [5,3,1]
    let got = t.to_vec::<f16>()?;
    let want: Vec<f16> = (0..5)
        .flat_map(|r| [2usize, 0, 2].map(|c| h[c * 5 + r]))
        .collect();
    assert_eq!(got, want);
    Ok(())
}

#[test]
fn take_with_empty_indices() -> R {
    let d = device();
    let x = f(&d, &[1.0, 2.0, 3.0], &[3]);
    let idx = Array::zeros(&[0], DType::I32, &d).unwrap();
    assert_eq!(x.take(&idx, 0)?.to_vec::<f32>()?, Vec::<f32>::new());
    Ok(())
}

// LOW: take([] from empty axis) errors; NumPy returns []
#[test]
fn take_empty_indices_from_empty_axis() -> R {
    // NumPy: np.take(np.zeros(0), np.zeros(0, int)) -> array([])
    let d = device();
    let x = Array::zeros(&[0], DType::F32, &d).unwrap();
    let idx = Array::zeros(&[0], DType::I32, &d).unwrap();
    let r = x.take(&idx, 0)?;
    assert_eq!(r.to_vec::<f32>()?, Vec::<f32>::new());
    Ok(())
}

#[test]
fn elementwise_over_16m_elements() -> R {
    let d = device();
    let n = 17_000_001usize;
    let x = Array::arange(0.0, n as f64, 1.0, DType::I32, &d)?;
    let y = (&x + 1)?;
    let v = y.to_vec::<i32>()?;
    assert_eq!(v[n - 1], n as i32);
    assert!(v.iter().enumerate().all(|(k, &e)| e == k as i32 + 1));
    Ok(())
}

// The wide variant of elementwise kernels (kernels/program/wide.rs): a
// thread handles 16 bytes of its narrowest operand (4 f32, 8 f16, 16 u8,
// 2 f64) through vec4<u32> bindings, when every load is dense from an
// offset of whole vec4s or a broadcast scalar. `Device::wide_dispatches`
// says it ran, so these tests cannot pass on the scalar variant alone.

/// Sizes around every share (4, 8, 16 and 2 elements) and its tail.
const WIDE_SIZES: [usize; 11] = [1, 2, 3, 4, 5, 7, 15, 17, 33, 1025, 4099];

/// `v` stored as `dtype`: floats rounded, integers wrapped to their width
/// (NumPy's integer arithmetic), bool as 0 or 1.
fn wrap_to(v: f64, dtype: DType) -> f64 {
    let i = v as i64;
    match dtype {
        DType::I8 => i as i8 as f64,
        DType::U8 => i as u8 as f64,
        DType::I16 => i as i16 as f64,
        DType::U16 => i as u16 as f64,
        DType::I32 => i as i32 as f64,
        DType::U32 => i as u32 as f64,
        _ => common::arrays::round_to(v, dtype),
    }
}

/// Evaluate `arrays` and assert it lowered at least one wide kernel.
fn eval_wide(d: &Device, arrays: &[&Array], what: &str) -> R {
    let before = d.wide_dispatches();
    wgarray::eval(arrays)?;
    assert!(d.wide_dispatches() > before, "{what}: no wide kernel ran");
    Ok(())
}

#[test]
fn wide_variant_sizes_dtypes_tails_and_broadcast_scalars() -> R {
    use common::arrays::{of_dtype, random_values};
    let d = device();
    let f64_ok = d
        .features()
        .contains(wgarray::wgpu::Features::SHADER_F64 | wgarray::wgpu::Features::SHADER_INT64);
    let dtypes = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::U8,
        DType::I16,
        DType::I32,
        DType::U32,
        DType::F64,
    ];
    let mut rng = Rng::new(0x51de);
    for dtype in dtypes.into_iter().filter(|&t| t != DType::F64 || f64_ok) {
        for n in WIDE_SIZES {
            poison_pool(&d, 2 * n);
            let (xa, xb) = (
                random_values(&mut rng, n, dtype),
                random_values(&mut rng, n, dtype),
            );
            let a = of_dtype(&d, &xa, &[n], dtype);
            let b = of_dtype(&d, &xb, &[n], dtype);
            // A one-element array broadcast: loaded once per thread.
            let s = of_dtype(&d, &[3.0], &[1], dtype);
            wgarray::eval(&[&a, &b, &s])?;
            let what = format!("{dtype:?}[{n}]");
            // A fused kernel with two outputs of different widths for the
            // 1- and 2-byte dtypes (the comparison writes bool words).
            let y = ((&a + &b)? * &s)?;
            let c = a.less(&b)?;
            eval_wide(&d, &[&y, &c], &what)?;
            let want: Vec<f64> = xa
                .iter()
                .zip(&xb)
                .map(|(&p, &q)| wrap_to(wrap_to(p + q, dtype) * 3.0, dtype))
                .collect();
            check(
                &format!("{what} (a + b) * s"),
                &y.to_f64_vec()?,
                &want,
                0.0,
                0.0,
            );
            let want: Vec<f64> = xa
                .iter()
                .zip(&xb)
                .map(|(p, q)| (p < q) as u8 as f64)
                .collect();
            check(&format!("{what} a < b"), &c.to_f64_vec()?, &want, 0.0, 0.0);
            // float64 has no exp on the GPU.
            if dtype.is_float() && dtype != DType::F64 {
                let e = (a.exp()? - 0.25)?;
                eval_wide(&d, &[&e], &what)?;
                let rel = match dtype {
                    DType::F16 => 1e-3,
                    DType::BF16 => 8e-3,
                    _ => 2e-6,
                };
                let want: Vec<f64> = xa.iter().map(|&p| p.exp() - 0.25).collect();
                check(
                    &format!("{what} exp(a) - 0.25"),
                    &e.to_f64_vec()?,
                    &want,
                    rel,
                    rel,
                );
            }
        }
    }
    Ok(())
}

#[test]
fn wide_variant_needs_an_aligned_offset() -> R {
    let d = device();
    let mut rng = Rng::new(0xa11);
    let x = rng.vec_f32(1030);
    let a = f(&d, &x, &[1030]);
    let h = a.astype(DType::F16)?;
    wgarray::eval(&[&a, &h])?;
    let xh: Vec<f64> = h.to_f64_vec()?;
    // (array, host values, first element, whether the offset is whole vec4s)
    let cases = [
        (
            &a,
            x.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            1,
            false,
        ),
        (&a, x.iter().map(|&v| v as f64).collect(), 3, false),
        (&a, x.iter().map(|&v| v as f64).collect(), 4, true),
        (&h, xh.clone(), 4, false),
        (&h, xh.clone(), 8, true),
    ];
    for (arr, host, start, wide) in cases {
        poison_pool(&d, 2048);
        let v = arr.slice(&[Slice::new(Some(start as isize), None, 1)])?;
        let y = ((&v * 2.0)? + 1.0)?;
        let before = d.wide_dispatches();
        y.eval()?;
        let what = format!("{:?} from {start}", arr.dtype());
        assert_eq!(d.wide_dispatches() > before, wide, "{what}: wide variant");
        let want: Vec<f64> = host[start..]
            .iter()
            .map(|&p| wrap_to(wrap_to(p * 2.0, arr.dtype()) + 1.0, arr.dtype()))
            .collect();
        check(&what, &y.to_f64_vec()?, &want, 0.0, 0.0);
    }
    // A transposed operand stays in the scalar variant, right.
    let m = f(&d, &x[..1024], &[32, 32]);
    let t = (&m.transpose() + &m)?;
    let before = d.wide_dispatches();
    t.eval()?;
    assert_eq!(d.wide_dispatches(), before, "a transposed load is not wide");
    let got = t.to_vec::<f32>()?;
    for i in 0..32 {
        for j in 0..32 {
            assert_eq!(got[i * 32 + j], x[j * 32 + i] + x[i * 32 + j]);
        }
    }
    Ok(())
}
