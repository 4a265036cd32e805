//! Adversarial probes from a review that tried to break the crate.
//! `mod bugs`: each test reproduced a bug found then (the comment above it
//! says what went wrong, on which backend); all are fixed and now guard
//! against regressions. `mod ok`: probes that held up from the start.
#![allow(clippy::approx_constant)]

mod common;

use common::{assert_empty, device, poison_pool};
use half::{bf16, f16};
use wgarray::{Array, Axes, DType, Device, Error, Slice, eval, where_};

type R = wgarray::Result<()>;

fn f(d: &Device, v: &[f32], s: &[usize]) -> Array {
    Array::from_slice(v, s, d).unwrap()
}
fn i(d: &Device, v: &[i32], s: &[usize]) -> Array {
    Array::from_slice(v, s, d).unwrap()
}
fn u(d: &Device, v: &[u32], s: &[usize]) -> Array {
    Array::from_slice(v, s, d).unwrap()
}
#[allow(dead_code)]
fn same_f32(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(a, b)| (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits())
}
fn close(got: &[f32], want: &[f32], tol: f32) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| {
            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs())
        })
}

#[allow(unused)]
fn is_gl(d: &Device) -> bool {
    d.backend() == wgpu::Backend::Gl
}

// Helpers shared by both modules.

fn unravel(mut idx: usize, shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        out[a] = idx % shape[a];
        idx /= shape[a];
    }
    out
}

fn ravel(ix: &[usize], shape: &[usize]) -> usize {
    ix.iter().zip(shape).fold(0, |acc, (&i, &s)| acc * s + i)
}

fn high_rank(nd: usize) -> R {
    let d = device();
    {
        let shape: Vec<usize> = (0..nd).map(|a| 2 + (a % 2)).collect();
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|x| x as f32).collect();
        let x = f(&d, &data, &shape);
        // reversed axes
        let t = x.transpose();
        let tshape: Vec<usize> = shape.iter().rev().copied().collect();
        let got = (&t + 0.0)?.to_vec::<f32>()?;
        for (k, g) in got.iter().enumerate() {
            let ti = unravel(k, &tshape);
            let xi: Vec<usize> = ti.iter().rev().copied().collect();
            assert_eq!(*g, data[ravel(&xi, &shape)], "nd {nd} elementwise at {k}");
        }
        assert_eq!(
            t.to_vec::<f32>()?,
            got,
            "nd {nd} readback of transposed view"
        );
        // reductions over a few axes of the transposed view
        let axes: Vec<isize> = vec![0, (nd / 2) as isize, (nd - 1) as isize];
        let s = t.sum(axes.clone(), false)?.to_vec::<f32>()?;
        let total: f32 = s.iter().sum();
        assert_eq!(total, data.iter().sum::<f32>(), "nd {nd} reduce total");
        let s_all = t.sum(Axes::All, false)?.item::<f32>()?;
        assert_eq!(s_all, data.iter().sum::<f32>());
        // reduce over all-but-one axes (inner rank nd-1)
        let inner: Vec<isize> = (1..nd as isize).collect();
        let s2 = t.sum(inner, false)?.to_vec::<f32>()?;
        assert_eq!(s2.iter().sum::<f32>(), data.iter().sum::<f32>());
        // split on last axis of the view
        let parts = t.split(tshape[nd - 1], -1)?;
        let psum: f32 = parts
            .iter()
            .map(|p| p.to_vec::<f32>().unwrap().iter().sum::<f32>())
            .sum();
        assert_eq!(psum, data.iter().sum::<f32>());
        // take on a middle axis
        let idx = i(&d, &[1, 0], &[2]);
        let tk = t.take(&idx, Some(2))?;
        tk.eval()?;
        let m = t.max(Axes::All, false)?.item::<f32>()?;
        assert_eq!(m, (n - 1) as f32);
        let am = t.argmax(None, false)?.item::<u32>()?;
        assert_eq!(got[am as usize], (n - 1) as f32);
    }
    assert_empty(&d);
    Ok(())
}

fn libm_erf(x: f32) -> f32 {
    // high-accuracy erf via f64 series / continued fraction is overkill: use A&S 7.1.26 bound
    let t = 1.0 / (1.0 + 0.3275911 * (x.abs() as f64));
    let y = 1.0
        - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
            + 0.254829592)
            * t
            * (-(x as f64) * (x as f64)).exp();
    (y as f32).copysign(x)
}

fn gemv_check(d: &Device, m: usize, k: usize, n: usize) -> Option<String> {
    // a = broadcast ones [m, k] (no memory), b = ones [k, n] -> every output = k
    let a = Array::scalar(1.0, DType::F32, d)
        .unwrap()
        .broadcast_to(&[m, k])
        .unwrap();
    let b = Array::ones(&[k, n], DType::F32, d);
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

// ---------------------------------------------------------------------------
/// Tests that FAIL on main (each documents a bug; severity and backend in the comment).
mod bugs {
    use super::*;

    // LOW: take([] from empty axis) errors; NumPy returns []
    #[test]
    fn take_empty_indices_from_empty_axis() -> R {
        // NumPy: np.take(np.zeros(0), np.zeros(0, int)) -> array([])
        let d = device();
        let x = Array::zeros(&[0], DType::F32, &d);
        let idx = Array::zeros(&[0], DType::I32, &d);
        let r = x.take(&idx, Some(0))?;
        assert_eq!(r.to_vec::<f32>()?, Vec::<f32>::new());
        Ok(())
    }

    // MEDIUM, both: argmax of an empty axis returns 4294967295 instead of an error
    #[test]
    fn argmax_of_empty_axis_is_an_error() {
        // NumPy: ValueError: attempt to get argmax of an empty sequence
        let d = device();
        let x = Array::zeros(&[0], DType::F32, &d);
        let r = x.argmax(Some(0), false).and_then(|a| a.to_vec::<u32>());
        assert!(r.is_err(), "argmax of empty gave {r:?}");
    }

    // MEDIUM, both: same, per row
    #[test]
    fn argmax_of_empty_rows_is_an_error() {
        let d = device();
        let x = Array::zeros(&[3, 0], DType::F32, &d);
        let r = x.argmax(Some(1), false).and_then(|a| a.to_vec::<u32>());
        assert!(r.is_err(), "argmax over empty rows gave {r:?}");
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
            .power(&f(&d, &exp, &[11]))?
            .to_vec::<f32>()?;
        let want: Vec<f32> = base.iter().zip(&exp).map(|(b, e)| b.powf(*e)).collect();
        assert!(close(&got, &want, 1e-6), "pow got {got:?}\n want {want:?}");
        let gi = i(&d, &[3, 2, -2, 0, 5], &[5])
            .power(&i(&d, &[4, 31, 3, 0, 0], &[5]))?
            .to_vec::<i32>()?;
        assert_eq!(gi, vec![81, i32::MIN, -8, 1, 1]);
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

    // MEDIUM, both: logsumexp([-inf,-inf]) = NaN (want -inf), logsumexp([inf,1]) = NaN (want inf)
    #[test]
    fn logsumexp_softmax_infinities() -> R {
        let d = device();
        let ninf = f32::NEG_INFINITY;
        let x = f(&d, &[ninf, ninf, 1.0, ninf, f32::INFINITY, 1.0], &[3, 2]);
        let l = x.logsumexp(1, false)?.to_vec::<f32>()?;
        assert_eq!(l[0], ninf, "logsumexp(-inf,-inf) {l:?}");
        assert_eq!(l[1], 1.0, "logsumexp(1,-inf) {l:?}");
        assert_eq!(l[2], f32::INFINITY, "logsumexp(inf, 1) {l:?}");
        let s = x.softmax(1)?.to_vec::<f32>()?;
        assert_eq!(&s[2..4], &[1.0, 0.0], "softmax(1,-inf) {s:?}");
        Ok(())
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
            if !close(&got, &want, tol) {
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
                        libm_erf(x)
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

    // LOW, both: u32 index >= 2^31 treated as negative i32 (clips to 0, not to the end)
    #[test]
    fn take_indices_u32_large_and_negative() -> R {
        let d = device();
        let x = f(&d, &[10.0, 11.0, 12.0, 13.0, 14.0], &[5]);
        let ii = i(&d, &[-1, -5, -6, 5, 100, i32::MIN, i32::MAX], &[7]);
        assert_eq!(
            x.take(&ii, Some(0))?.to_vec::<f32>()?,
            vec![14.0, 10.0, 10.0, 14.0, 14.0, 10.0, 14.0]
        );
        let iu = u(&d, &[0, 4, 5, 1 << 31, u32::MAX], &[5]);
        // u32 is non-negative: all out-of-range ones clip to the last
        assert_eq!(
            x.take(&iu, Some(0))?.to_vec::<f32>()?,
            vec![10.0, 14.0, 14.0, 14.0, 14.0]
        );
        assert!(matches!(
            x.take(&f(&d, &[0.0], &[1]), Some(0)),
            Err(Error::DType { .. })
        ));
        assert!(matches!(
            x.take(&Array::from_slice(&[true], &[1], &d)?, Some(0)),
            Err(Error::DType { .. })
        ));
        // take from f16 with odd counts, 2-D indices, axis 1 of transposed
        let h: Vec<f16> = (0..15).map(|v| f16::from_f32(v as f32)).collect();
        let xh = Array::from_slice(&h, &[3, 5], &d)?.transpose(); // [5,3]
        let t = xh.take(&i(&d, &[2, 0, 2], &[3, 1]), Some(1))?; // [5,3,1]
        let got = t.to_vec::<f16>()?;
        let want: Vec<f16> = (0..5)
            .flat_map(|r| [2usize, 0, 2].map(|c| h[c * 5 + r]))
            .collect();
        assert_eq!(got, want);
        Ok(())
    }

    // MEDIUM, both: zeros([2^33,2^33]).eval() panics (multiply overflow in numel); release would wrap
    #[test]
    fn numel_overflow_is_an_error_not_a_panic() {
        let d = device();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let z = Array::zeros(&[1 << 33, 1 << 33], DType::F32, &d);
            z.eval()
        }));
        match r {
            Ok(Err(_)) => {}
            Ok(Ok(())) => panic!("zeros([2^33, 2^33]) evaluated fine"),
            Err(_) => panic!("zeros([2^33, 2^33]).eval() panicked"),
        }
    }

    // LOW, both: reshape([isize::MAX,4,0]) panics with multiply overflow
    #[test]
    fn reshape_overflow_is_an_error_not_a_panic() {
        let d = device();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let z = Array::zeros(&[0], DType::F32, &d);
            z.reshape(&[isize::MAX, 4, 0]).map(|_| ())
        }));
        assert!(
            matches!(r, Ok(Err(_)) | Ok(Ok(()))),
            "reshape([isize::MAX, 4, 0]) panicked"
        );
    }

    // LOW: reshape([0,-1]) of a size-0 array accepted (NumPy errors)
    #[test]
    fn reshape_ambiguous_minus_one_on_empty() {
        // NumPy: cannot reshape array of size 0 into shape (0,newaxis)
        let d = device();
        let z = Array::zeros(&[0, 3], DType::F32, &d);
        assert!(
            z.reshape(&[0, -1]).is_err(),
            "reshape([0,-1]) of size 0 accepted"
        );
    }

    // LOW: squeeze(&[0,0]) accepted (NumPy: repeated axis)
    #[test]
    fn squeeze_duplicate_axes() {
        // NumPy: ValueError: repeated axis
        let d = device();
        let z = Array::zeros(&[1, 3], DType::F32, &d);
        assert!(z.squeeze(Some(&[0, 0])).is_err());
    }

    // MEDIUM, both: sum over 2^27 broadcast elements gives 1048562 (loop limit)
    #[test]
    fn reduce_huge_broadcast_sum() -> R {
        // A broadcast view costs no memory; 2^27 ones sum to 2^27 exactly.
        let d = device();
        let mut bad = vec![];
        for log in [27u32, 28] {
            let x = Array::scalar(1.0, DType::F32, &d)?.broadcast_to(&[1usize << log])?;
            assert!(matches!(
                x.sum(Axes::All, false)?.eval(),
                Err(Error::TooLarge { .. })
            ));
        }
        for log in [24u32, 26] {
            let n = 1usize << log;
            let x = Array::scalar(1.0, DType::F32, &d)?.broadcast_to(&[n])?;
            let s = x.sum(Axes::All, false).and_then(|s| s.item::<f32>());
            match s {
                Ok(v) if v == n as f32 => {}
                other => bad.push(format!("sum of 2^{log} broadcast ones: {other:?}")),
            }
            let m = x.max(Axes::All, false).and_then(|s| s.item::<f32>());
            if !matches!(m, Ok(1.0)) {
                bad.push(format!("max of 2^{log}: {m:?}"));
            }
        }
        assert!(bad.is_empty(), "{bad:#?}");
        Ok(())
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

    // LOW (hidden API), both: matmul_naive K=70000 gives 65535/65530
    #[test]
    fn matmul_naive_huge_k() {
        let d = device();
        let k = 70_000;
        let a = Array::ones(&[1, k], DType::F32, &d);
        let b = Array::ones(&[k, 1], DType::F32, &d);
        let c = wgarray::baseline::matmul_naive(&a, &b)
            .unwrap()
            .item::<f32>()
            .unwrap();
        assert_eq!(c, k as f32);
    }

    // MEDIUM, both: the u32::MAX from an empty argmax, fed to take as i32 -1, silently picks the last element
    #[test]
    fn argmax_empty_value() -> R {
        let d = device();
        let x = Array::zeros(&[0], DType::F32, &d);
        assert!(matches!(
            x.argmax(Some(0), false),
            Err(Error::EmptyReduction { .. })
        ));
        Ok(())
    }

    // HIGH, both backends: llvmpipe loop limit in the m==1 GEMM tile: a plain 1-D dot product of length 100k is silently wrong
    #[test]
    fn dot_product_100k_real_data() -> R {
        // A plain 1-D dot product: [100000] @ [100000]; 400 KB each.
        let d = device();
        let n = 100_000usize;
        let mut rng = common::Rng::new(11);
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
        let a = Array::ones(&[1, k], DType::F32, &d);
        let b = Array::ones(&[k, 4], DType::F32, &d);
        let got = a.matmul(&b)?.to_vec::<f32>()?;
        assert_eq!(got, vec![k as f32; 4]);
        Ok(())
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

    // HIGH, both: the m==1 GEMM goes wrong between K=87000 and K=88000 (87380 = 65535*4/3 on vulkan, 87376 on gl)
    #[test]
    fn gemv_k_threshold() {
        // smallest K for which [1,K]@[K,1] of ones goes wrong
        let d = device();
        let mut bad = vec![];
        for k in [60_000usize, 80_000, 87_000, 88_000] {
            let a = Array::ones(&[1, k], DType::F32, &d);
            let b = Array::ones(&[k, 1], DType::F32, &d);
            let v = a.matmul(&b).unwrap().item::<f32>().unwrap();
            if v != k as f32 {
                bad.push(format!("K={k}: {v}"));
            }
        }
        assert!(bad.is_empty(), "{bad:?}");
    }
}

// ---------------------------------------------------------------------------
/// Probes that pass on both lavapipe and llvmpipe (regression value).
mod ok {
    use super::*;

    #[test]
    fn empty_dims_everywhere() -> R {
        let d = device();
        poison_pool(&d, 1 << 12);
        {
            let z = Array::zeros(&[0, 3], DType::F32, &d);
            assert_eq!(z.to_vec::<f32>()?, Vec::<f32>::new());
            assert_eq!(z.sum(0, false)?.to_vec::<f32>()?, vec![0.0; 3]);
            assert_eq!(z.sum(1, false)?.shape(), &[0]);
            assert_eq!(z.prod(0, false)?.to_vec::<f32>()?, vec![1.0; 3]);
            let m = z.mean(0, false)?.to_vec::<f32>()?;
            assert!(m.iter().all(|x| x.is_nan()), "mean of empty = {m:?}");
            // No identity: an error, as NumPy, PyTorch and MLX.
            assert!(matches!(z.max(0, false), Err(Error::EmptyReduction { .. })));
            assert_eq!(z.all(0, false)?.to_vec::<bool>()?, vec![true; 3]);
            assert_eq!(z.any(0, false)?.to_vec::<bool>()?, vec![false; 3]);
            let b = (&z + &Array::ones(&[1, 3], DType::F32, &d))?;
            assert_eq!(b.shape(), &[0, 3]);
            assert_eq!(b.to_vec::<f32>()?.len(), 0);
            let bc = Array::ones(&[1, 3], DType::F32, &d).broadcast_to(&[0, 3])?;
            assert_eq!(bc.sum(Axes::All, false)?.item::<f32>()?, 0.0);
            let t = z.transpose().contiguous()?;
            assert_eq!(t.shape(), &[3, 0]);
            t.eval()?;
            let e = Array::zeros(&[0], DType::I32, &d);
            let ee = (&e * &e)?;
            assert_eq!(ee.to_vec::<i32>()?, Vec::<i32>::new());
            let ui = Array::zeros(&[0], DType::U32, &d);
            assert!(matches!(
                ui.min(0, false),
                Err(Error::EmptyReduction { .. })
            ));
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn matmul_k0_gives_zeros() -> R {
        let d = device();
        poison_pool(&d, 1 << 12);
        {
            let a = Array::zeros(&[5, 0], DType::F32, &d);
            let b = Array::zeros(&[0, 7], DType::F32, &d);
            let c = a.matmul(&b)?;
            assert_eq!(c.to_vec::<f32>()?, vec![0.0; 35]);
            let c1 = Array::zeros(&[1, 0], DType::F32, &d).matmul(&Array::zeros(
                &[0, 9],
                DType::F32,
                &d,
            ))?;
            assert_eq!(c1.to_vec::<f32>()?, vec![0.0; 9]);
            let v = Array::zeros(&[0], DType::F32, &d);
            assert_eq!(v.matmul(&v)?.item::<f32>()?, 0.0);
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn matmul_k0_bf16_gives_zeros() -> R {
        let d = device();
        poison_pool(&d, 1 << 12);
        let a = Array::zeros(&[5, 0], DType::BF16, &d);
        let b = Array::zeros(&[0, 6], DType::BF16, &d);
        let c = a.matmul(&b)?.astype(DType::F32)?;
        assert_eq!(c.to_vec::<f32>()?, vec![0.0; 30]);
        Ok(())
    }

    #[test]
    fn matmul_m0_n0() -> R {
        let d = device();
        {
            let a = Array::ones(&[0, 4], DType::F32, &d);
            let b = Array::ones(&[4, 3], DType::F32, &d);
            assert_eq!(a.matmul(&b)?.shape(), &[0, 3]);
            a.matmul(&b)?.eval()?;
            let b0 = Array::ones(&[4, 0], DType::F32, &d);
            assert_eq!(
                Array::ones(&[2, 4], DType::F32, &d)
                    .matmul(&b0)?
                    .to_vec::<f32>()?
                    .len(),
                0
            );
            let bb = Array::ones(&[0, 2, 4], DType::F32, &d);
            assert_eq!(bb.matmul(&b)?.shape(), &[0, 2, 3]);
            bb.matmul(&b)?.eval()?;
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn split_into_empty_parts() -> R {
        let d = device();
        {
            let x = i(&d, &[0, 1, 2, 3], &[4]);
            let p = x.split([0, 0, 4, 2], 0)?;
            let sizes: Vec<usize> = p.iter().map(|a| a.size()).collect();
            assert_eq!(sizes, vec![0, 0, 4, 0, 2]); // NumPy: x[0:0], x[0:0], x[0:4], x[4:2], x[2:]
            eval(&p.iter().collect::<Vec<_>>())?;
            assert_eq!(p[2].to_vec::<i32>()?, vec![0, 1, 2, 3]);
            let z = Array::zeros(&[0, 2], DType::F32, &d);
            let q = z.split(3, 0)?;
            assert_eq!(q.len(), 3);
            eval(&q.iter().collect::<Vec<_>>())?;
            // split of a negative-stride view with a trailing empty part
            let r = x.slice(&[Slice::step(-1)])?;
            let parts = r.split([4], 0)?;
            assert_eq!(parts[0].to_vec::<i32>()?, vec![3, 2, 1, 0]);
            assert_eq!(parts[1].to_vec::<i32>()?, Vec::<i32>::new());
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn take_with_empty_indices() -> R {
        let d = device();
        let x = f(&d, &[1.0, 2.0, 3.0], &[3]);
        let idx = Array::zeros(&[0], DType::I32, &d);
        assert_eq!(x.take(&idx, Some(0))?.to_vec::<f32>()?, Vec::<f32>::new());
        Ok(())
    }

    #[test]
    fn scalars_0d() -> R {
        let d = device();
        {
            let s = Array::scalar(3.0, DType::F32, &d)?;
            assert_eq!(s.shape(), &[] as &[usize]);
            assert_eq!(s.sum(Axes::All, false)?.item::<f32>()?, 3.0);
            assert_eq!(s.sum(Axes::All, true)?.shape(), &[] as &[usize]);
            assert_eq!(s.reshape(&[1, 1])?.to_vec::<f32>()?, vec![3.0]);
            assert_eq!(s.transpose().item::<f32>()?, 3.0);
            assert_eq!(s.argmax(None, false)?.item::<u32>()?, 0);
            assert_eq!(s.expand_dims(0)?.shape(), &[1]);
            let v = (&s + &f(&d, &[1.0, 2.0], &[2]))?;
            assert_eq!(v.to_vec::<f32>()?, vec![4.0, 5.0]);
            assert_eq!(s.broadcast_to(&[2, 2])?.to_vec::<f32>()?, vec![3.0; 4]);
            assert!(s.sum(0, false).is_err());
            assert!(matches!(s.matmul(&s), Err(Error::InvalidArgument(_))));
            assert!(s.split(1, 0).is_err());
            assert_eq!(
                s.softmax(-1).ok().map(|_| ()),
                None,
                "softmax of 0-d should be InvalidAxis"
            );
            assert!(s.layer_norm(None, None, 1e-5).is_err());
            assert_eq!(s.slice(&[])?.item::<f32>()?, 3.0);
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn rank_8() -> R {
        high_rank(8)
    }

    #[test]
    fn negative_step_slices() -> R {
        let d = device();
        {
            let data: Vec<f32> = (0..24).map(|x| x as f32).collect();
            let x = f(&d, &data, &[4, 6]);
            let r = x.slice(&[Slice::step(-1), Slice::step(-2)])?;
            let want: Vec<f32> = (0..4)
                .rev()
                .flat_map(|r| (0..6).rev().step_by(2).map(move |c| (r * 6 + c) as f32))
                .collect();
            assert_eq!(r.to_vec::<f32>()?, want);
            assert_eq!((&r * 1.0)?.to_vec::<f32>()?, want);
            // slice of slice
            let rr = r.slice(&[Slice::new(Some(-1), None, -2), Slice::new(Some(1), None, 1)])?;
            let want2: Vec<f32> = [3usize, 1]
                .iter()
                .flat_map(|&a| {
                    let row = &want[a * 3..a * 3 + 3];
                    row[1..].to_vec()
                })
                .collect();
            assert_eq!(rr.to_vec::<f32>()?, want2);
            assert_eq!(
                rr.sum(Axes::All, false)?.item::<f32>()?,
                want2.iter().sum::<f32>()
            );
            // reshape of negative-stride view must copy
            let flat = r.reshape(&[-1])?;
            assert_eq!(flat.to_vec::<f32>()?, want);
            let r3 = r.reshape(&[2, 2, 3])?;
            assert_eq!(r3.to_vec::<f32>()?, want);
            // transpose of broadcast
            let b = f(&d, &[1.0, 2.0, 3.0], &[3])
                .broadcast_to(&[2, 3])?
                .transpose();
            assert_eq!(
                b.contiguous()?.to_vec::<f32>()?,
                vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
            );
            assert_eq!(
                b.reshape(&[6])?.to_vec::<f32>()?,
                vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
            );
            // slice beyond ends
            let e = x.slice(&[Slice::new(Some(10), Some(20), 1)])?;
            assert_eq!(e.shape(), &[0, 6]);
            assert_eq!(e.to_vec::<f32>()?.len(), 0);
            let e2 = x.slice(&[Slice::new(Some(-10), Some(-20), -1)])?;
            assert_eq!(e2.shape(), &[0, 6]);
            e2.eval()?;
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn matmul_with_view_operands() -> R {
        let d = device();
        let mut rng = common::Rng::new(7);
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
            let want = common::matmul_ref(&av, &bv, 1, m, k, n);
            let got = a.matmul(&b)?.to_vec::<f32>()?;
            let err = common::rel_frobenius(&got, &want);
            assert!(
                err < 1e-5,
                "({m},{k},{n}) negative-stride views: rel err {err}"
            );
            // transposed views and broadcast operand
            let at = f(&d, &av, &[m, k]).transpose().contiguous()?.transpose();
            let got2 = at
                .matmul(&b.contiguous()?.transpose().contiguous()?.transpose())?
                .to_vec::<f32>()?;
            assert!(common::rel_frobenius(&got2, &want) < 1e-5, "transposed");
            // broadcast along k (stride 0 columns)
            let row = f(&d, &av[..k], &[1, k]).broadcast_to(&[m, k])?;
            let got3 = row.matmul(&b)?.to_vec::<f32>()?;
            let rows: Vec<f32> = (0..m).flat_map(|_| av[..k].to_vec()).collect();
            let want3 = common::matmul_ref(&rows, &bv, 1, m, k, n);
            assert!(common::rel_frobenius(&got3, &want3) < 1e-5, "broadcast");
        }
        Ok(())
    }

    #[test]
    fn split_of_transposed() -> R {
        let d = device();
        {
            let data: Vec<i32> = (0..12).collect();
            let x = i(&d, &data, &[3, 4]).transpose(); // [4,3]
            let p = x.split(2, 0)?;
            assert_eq!(p[0].to_vec::<i32>()?, vec![0, 4, 8, 1, 5, 9]);
            assert_eq!(p[1].to_vec::<i32>()?, vec![2, 6, 10, 3, 7, 11]);
            let q = x.split([1], 1)?;
            assert_eq!(q[0].to_vec::<i32>()?, vec![0, 1, 2, 3]);
            assert_eq!(q[1].to_vec::<i32>()?, vec![4, 8, 5, 9, 6, 10, 7, 11]);
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn odd_offset_f16_bf16_views() -> R {
        let d = device();
        let v: Vec<f16> = (0..9).map(|x| f16::from_f32(x as f32)).collect();
        let x = Array::from_slice(&v, &[9], &d)?;
        let s = x.slice(&[Slice::range(1, 8)])?;
        assert_eq!(s.to_vec::<f16>()?, v[1..8].to_vec());
        let s2 = (&s + 1.0)?;
        let want: Vec<f16> = v[1..8]
            .iter()
            .map(|h| f16::from_f32(h.to_f32() + 1.0))
            .collect();
        assert_eq!(s2.to_vec::<f16>()?, want);
        let r = x.slice(&[Slice::new(Some(7), None, -3)])?;
        assert_eq!(r.to_vec::<f16>()?, vec![v[7], v[4], v[1]]);
        let c = s.contiguous()?;
        assert_eq!(c.to_vec::<f16>()?, v[1..8].to_vec());
        // contiguous of an odd-offset dense f16 slice, then donated into an op
        let c2 = (x.slice(&[Slice::range(1, 8)])?.contiguous()? * 2.0)?;
        let want2: Vec<f16> = v[1..8]
            .iter()
            .map(|h| f16::from_f32(h.to_f32() * 2.0))
            .collect();
        assert_eq!(c2.to_vec::<f16>()?, want2);
        let b: Vec<bf16> = (0..7).map(|x| bf16::from_f32(x as f32)).collect();
        let xb = Array::from_slice(&b, &[7], &d)?;
        let sb = xb.slice(&[Slice::range(3, 6)])?;
        assert_eq!(sb.sum(0, false)?.item::<bf16>()?, bf16::from_f32(12.0));
        assert_eq!(sb.split(3, 0)?[1].to_vec::<bf16>()?, vec![b[4]]);
        let tk = sb.take(&i(&d, &[2, 0, 1], &[3]), Some(0))?;
        assert_eq!(tk.to_vec::<bf16>()?, vec![b[5], b[3], b[4]]);
        // matmul on an odd-offset bf16 view
        let mm = xb
            .slice(&[Slice::range(1, 4)])?
            .reshape(&[1, 3])?
            .matmul(&Array::ones(&[3, 1], DType::BF16, &d))?;
        assert_eq!(mm.to_vec::<bf16>()?, vec![bf16::from_f32(6.0)]);
        Ok(())
    }

    #[test]
    fn odd_offset_bf16_matmul_views() -> R {
        let d = device();
        let mut rng = common::Rng::new(3);
        let (m, k, n) = (9usize, 13usize, 11usize);
        let av: Vec<f32> = rng
            .vec_f32(m * (k + 1))
            .iter()
            .map(|x| bf16::from_f32(*x).to_f32())
            .collect();
        let bv: Vec<f32> = rng
            .vec_f32((k + 1) * n)
            .iter()
            .map(|x| bf16::from_f32(*x).to_f32())
            .collect();
        let a = f(&d, &av, &[m, k + 1])
            .astype(DType::BF16)?
            .slice(&[Slice::FULL, Slice::range(1, (k + 1) as isize)])?;
        let b = f(&d, &bv, &[k + 1, n])
            .astype(DType::BF16)?
            .slice(&[Slice::range(1, (k + 1) as isize)])?;
        let a32 = a.astype(DType::F32)?.to_vec::<f32>()?;
        let b32 = b.astype(DType::F32)?.to_vec::<f32>()?;
        let want = common::matmul_ref(&a32, &b32, 1, m, k, n);
        let got = a.matmul(&b)?.astype(DType::F32)?.to_vec::<f32>()?;
        let err = common::rel_frobenius(&got, &want);
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
    fn donation_never_overwrites_held_inputs() -> R {
        let d = device();
        {
            let x = f(&d, &[1.0, 2.0, 3.0, 4.0], &[4]);
            let y = (&x + &x)?;
            let z = (&x * 2.0)?;
            eval(&[&y, &z])?;
            assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
            assert_eq!(y.to_vec::<f32>()?, vec![2.0, 4.0, 6.0, 8.0]);
            // intermediate held also by a pending view
            let t = (&x * 10.0)?;
            let v = t.reshape(&[2, 2])?;
            let w = (t + 1.0)?; // moves t
            eval(&[&w, &v])?;
            assert_eq!(v.to_vec::<f32>()?, vec![10.0, 20.0, 30.0, 40.0]);
            assert_eq!(w.to_vec::<f32>()?, vec![11.0, 21.0, 31.0, 41.0]);
            // intermediate held by an evaluated view, then consumed
            let t = (&x * 10.0)?;
            let v = t.slice(&[Slice::range(0, 4)])?;
            v.eval()?;
            let w = (t + 1.0)?;
            w.eval()?;
            assert_eq!(v.to_vec::<f32>()?, vec![10.0, 20.0, 30.0, 40.0]);
            // intermediate used by two consumers in one eval
            let t = (&x * 10.0)?;
            let a = (&t + 1.0)?;
            let b = (&t - 1.0)?;
            drop(t);
            eval(&[&b, &a])?;
            assert_eq!(a.to_vec::<f32>()?, vec![11.0, 21.0, 31.0, 41.0]);
            assert_eq!(b.to_vec::<f32>()?, vec![9.0, 19.0, 29.0, 39.0]);
            // t used twice by one op, as intermediate
            let t = (&x * 10.0)?;
            let tt = (&t * &t)?;
            drop(t);
            assert_eq!(tt.to_vec::<f32>()?, vec![100.0, 400.0, 900.0, 1600.0]);
            // contiguous() shares a dense buffer; consuming it must not clobber x
            let c = x.contiguous()?;
            let c1 = (c + 5.0)?;
            assert_eq!(c1.to_vec::<f32>()?, vec![6.0, 7.0, 8.0, 9.0]);
            assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
            let c = x.contiguous()?;
            c.eval()?;
            let c2 = (c + 5.0)?;
            c2.eval()?;
            assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
            // evaluated reshape view of x, consumed
            let rv = x.reshape(&[2, 2])?;
            rv.eval()?;
            let r2 = (rv * 3.0)?;
            r2.eval()?;
            assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
            // where_ donation with the same intermediate as cond and value
            let t = (&x - 2.5)?;
            let w = where_(&t, &t, &Array::scalar(0.0, DType::F32, &d)?)?;
            drop(t);
            assert_eq!(w.to_vec::<f32>()?, vec![-1.5, -0.5, 0.5, 1.5]);
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn divmod_with_donated_inputs() -> R {
        let d = device();
        {
            let av = [7.0f32, -7.0, 7.0, -7.0, 5.5, 0.0];
            let bv = [3.0f32, 3.0, -3.0, -3.0, 2.0, 4.0];
            let a = f(&d, &av, &[6]);
            let b = f(&d, &bv, &[6]);
            for donate_a in [true, false] {
                let ta = (&a * 1.0)?;
                let tb = (&b * 1.0)?;
                let (q, r) = if donate_a {
                    ta.divmod(&b)?
                } else {
                    a.divmod(&tb)?
                };
                drop((ta, tb));
                eval(&[&q, &r])?;
                let qv = q.to_vec::<f32>()?;
                let rv = r.to_vec::<f32>()?;
                for k in 0..6 {
                    let wq = (av[k] / bv[k]).floor();
                    let wr = av[k] - wq * bv[k];
                    assert_eq!((qv[k], rv[k]), (wq, wr), "k {k} donate_a {donate_a}");
                }
            }
            // i32
            let ai = (&i(&d, &[7, -7, 7, -7, 0, 5], &[6]) * 1.0)?;
            let (q, r) = ai.divmod(&i(&d, &[3, 3, -3, -3, 0, 0], &[6]))?;
            drop(ai);
            assert_eq!(q.to_vec::<i32>()?, vec![2, -3, -3, 2, 0, 0]);
            assert_eq!(r.to_vec::<i32>()?, vec![1, 2, -2, -1, 0, 0]);
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn donation_chain_f16_bool_odd() -> R {
        let d = device();
        {
            let v: Vec<f16> = (0..7).map(|x| f16::from_f32(x as f32)).collect();
            let x = Array::from_slice(&v, &[7], &d)?;
            let y = (((&x + 1.0)? * 2.0)? - 1.0)?;
            let want: Vec<f16> = v
                .iter()
                .map(|h| f16::from_f32((h.to_f32() + 1.0) * 2.0 - 1.0))
                .collect();
            assert_eq!(y.to_vec::<f16>()?, want);
            assert_eq!(x.to_vec::<f16>()?, v);
            let b = x.greater(&Array::scalar(2.0, DType::F16, &d)?)?;
            let nb = b.logical_not()?.logical_not()?.logical_not()?;
            assert_eq!(
                nb.to_vec::<bool>()?,
                vec![true, true, true, false, false, false, false]
            );
        }
        assert_empty(&d);
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

    #[test]
    fn nan_reductions() -> R {
        let d = device();
        for n in [3usize, 300, 5000] {
            for pos in [0, n / 2, n - 1] {
                let mut v: Vec<f32> = (0..n).map(|x| x as f32).collect();
                v[pos] = f32::NAN;
                let x = f(&d, &v, &[n]);
                let mx = x.max(0, false)?.item::<f32>()?;
                let mn = x.min(0, false)?.item::<f32>()?;
                let am = x.argmax(None, false)?.item::<u32>()?;
                let ai = x.argmin(None, false)?.item::<u32>()?;
                assert!(
                    mx.is_nan() && mn.is_nan(),
                    "n {n} pos {pos}: max {mx} min {mn}"
                );
                assert_eq!(
                    (am, ai),
                    (pos as u32, pos as u32),
                    "n {n} pos {pos}: argmax/argmin"
                );
            }
            // all-NaN rows -> argmax 0 (first NaN)
            let x = f(&d, &vec![f32::NAN; n * 2], &[2, n]);
            assert_eq!(
                x.argmax(Some(1), false)?.to_vec::<u32>()?,
                vec![0, 0],
                "all-NaN n {n}"
            );
            assert_eq!(
                x.argmin(Some(1), false)?.to_vec::<u32>()?,
                vec![0, 0],
                "all-NaN n {n}"
            );
            // -inf rows
            let x = f(&d, &vec![f32::NEG_INFINITY; n], &[n]);
            assert_eq!(x.argmax(None, false)?.item::<u32>()?, 0);
            assert_eq!(x.max(0, false)?.item::<f32>()?, f32::NEG_INFINITY);
        }
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
            Array::full(&[5], 1.0, DType::Bool, &d).to_vec::<bool>()?,
            vec![true; 5]
        );
        assert_eq!((&a + 1.0)?.to_vec::<i32>()?, vec![2, 2, 1, 1]);
        Ok(())
    }

    #[test]
    fn var_ddof_at_least_count() -> R {
        // NumPy: var([1,2], ddof=2) = inf (division by 0); ddof>N divides by max(N-ddof,0) = 0 -> inf
        let d = device();
        let x = f(&d, &[1.0, 2.0], &[2]);
        let v2 = x.var(0, false, 2)?.item::<f32>()?;
        let v3 = x.var(0, false, 3)?.item::<f32>()?;
        assert!(v2.is_infinite() || v2.is_nan(), "ddof=N gave {v2}");
        assert!(v3.is_infinite() || v3.is_nan(), "ddof>N gave {v3}");
        Ok(())
    }

    #[test]
    fn multi_output_lifetimes() -> R {
        let d = device();
        let x = Array::from_slice(&(0..64).map(|v| v as f32).collect::<Vec<_>>(), &[8, 8], &d)?;
        // split: reassignment between siblings before eval
        let mut p = (&x * 2.0)?.split(4, 0)?;
        p[0] = p[3].clone();
        p.swap(1, 2);
        let keep = std::mem::replace(&mut p[2], Array::scalar(0.0, DType::F32, &d)?);
        assert_eq!(
            keep.sum(Axes::All, false)?.item::<f32>()?,
            (16..32).map(|v| 2.0 * v as f32).sum::<f32>()
        );
        drop(p);
        drop(keep);
        // divmod: drop q, eval r; drop r, eval q
        let (q, r) = x.divmod(&Array::scalar(3.0, DType::F32, &d)?)?;
        drop(q);
        assert_eq!(r.to_vec::<f32>()?[..4], [0.0, 1.0, 2.0, 0.0]);
        drop(r);
        let (q, r) = x.divmod(&Array::scalar(3.0, DType::F32, &d)?)?;
        drop(r);
        assert_eq!(q.to_vec::<f32>()?[..4], [0.0, 0.0, 0.0, 1.0]);
        drop(q);
        // moments: var only
        let (m, v) = x.moments(Axes::All, false, 0)?;
        drop(m);
        let vv = v.item::<f32>()?;
        assert!((vv - 341.25).abs() < 1e-3, "var {vv}");
        drop(v);
        // moments evaluated then one dropped, the other assigned onto it
        let (mut m, v) = x.moments(0, true, 1)?;
        eval(&[&m, &v])?;
        m = v;
        drop(m);
        drop(x);
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn concurrent_eval_of_shared_graph() -> R {
        let d = device();
        {
            let x = Array::from_slice(
                &(0..4096).map(|v| v as f32).collect::<Vec<_>>(),
                &[64, 64],
                &d,
            )?;
            let shared = (&x.matmul(&x)? * 0.001)?; // pending
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let s = shared.clone();
                    std::thread::spawn(move || -> wgarray::Result<f32> {
                        let y = (&s + t as f64)?.sum(Axes::All, false)?;
                        let parts = s.split(2, 1)?;
                        parts[t % 2].eval()?;
                        y.item::<f32>()
                    })
                })
                .collect();
            let results: Vec<f32> = handles
                .into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .collect();
            let base = shared.sum(Axes::All, false)?.item::<f32>()?;
            for (t, r) in results.iter().enumerate() {
                let want = base + (t * 4096) as f32;
                assert!(
                    (r - want).abs() <= 1e-4 * want.abs(),
                    "thread {t}: {r} vs {want}"
                );
            }
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn oom_midway_then_recover() -> R {
        let d = device();
        {
            let x = Array::from_slice(&vec![1.0f32; 1 << 16], &[1 << 16], &d)?;
            let a = (&x + 1.0)?;
            let b = (&x * 3.0)?;
            let c = (&a + &b)?; // needs a, b, c alive at once
            let e = c.sum(Axes::All, false)?;
            let active = d.active_memory();
            d.set_memory_limit(active + (1 << 18) + 4096); // room for ~1 more buffer
            let r = e.eval();
            assert!(matches!(r, Err(Error::OutOfMemory { .. })), "{r:?}");
            d.set_memory_limit(u64::MAX);
            assert_eq!(e.item::<f32>()?, 5.0 * (1 << 16) as f32);
            assert_eq!(a.to_vec::<f32>()?[0], 2.0);
            assert_eq!(c.to_vec::<f32>()?[0], 5.0);
            // OOM in read-back staging
            let y = (&x * 2.0)?;
            y.eval()?;
            d.set_memory_limit(d.active_memory());
            d.clear_cache();
            let r = y.to_vec::<f32>();
            assert!(
                matches!(r, Err(Error::OutOfMemory { .. })),
                "readback under limit: {:?}",
                r.as_ref().map(|v| v.len())
            );
            d.set_memory_limit(u64::MAX);
            assert_eq!(y.to_vec::<f32>()?[0], 2.0);
            // memory limit 0: from_slice and scalar
            d.set_memory_limit(0);
            assert!(matches!(
                Array::scalar(1.0, DType::F32, &d),
                Err(Error::OutOfMemory { .. })
            ));
            assert!(Array::from_slice(&[1.0f32], &[1], &d).is_err());
            d.set_memory_limit(u64::MAX);
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn errors_during_graph_building_do_not_leak() {
        let d = device();
        let x = Array::ones(&[3, 4], DType::F32, &d);
        let y = Array::ones(&[5], DType::F32, &d);
        assert!(matches!(&x + &y, Err(Error::ShapeMismatch { .. })));
        assert!(matches!(x.sum(2, false), Err(Error::InvalidAxis { .. })));
        assert!(matches!(x.sum(-3, false), Err(Error::InvalidAxis { .. })));
        assert!(x.reshape(&[-1, -1]).is_err());
        assert!(x.reshape(&[-2, 6]).is_err());
        assert!(x.reshape(&[5, -1]).is_err());
        assert!(matches!(x.split(0, 0), Err(Error::InvalidArgument(_))));
        assert!(matches!(x.split(2, 5), Err(Error::InvalidAxis { .. })));
        assert!(x.split(5, 1).is_err());
        assert!(x.permute(&[0, 0]).is_err());
        assert!(x.permute(&[0]).is_err());
        assert!(x.slice(&[Slice::step(0)]).is_err());
        assert!(x.slice(&[Slice::FULL, Slice::FULL, Slice::FULL]).is_err());
        assert!(x.broadcast_to(&[4]).is_err());
        assert!(x.broadcast_to(&[2, 4]).is_err());
        assert!(x.matmul(&x).is_err());
        assert!(matches!(
            x.astype(DType::I32)
                .unwrap()
                .matmul(&x.transpose().astype(DType::I32).unwrap()),
            Err(Error::DType { .. })
        ));
        assert!(
            x.matmul(&x.transpose().astype(DType::BF16).unwrap())
                .is_err()
        );
        assert!(
            Array::ones(&[1, 1, 1, 1, 1, 2, 2], DType::F32, &d)
                .matmul(&Array::ones(&[2, 2], DType::F32, &d))
                .is_err()
        );
        assert!(Array::from_slice(&[1.0f32, 2.0], &[3], &d).is_err());
        assert!(x.item::<f32>().is_err());
        assert!(x.to_vec::<i32>().is_err());
        assert!(Array::arange(0.0, 1.0, 0.0, DType::F32, &d).is_err());
        assert!(Array::arange(0.0, f64::NAN, 1.0, DType::F32, &d).is_err());
        assert!(x.squeeze(Some(&[0])).is_err());
        assert!(x.expand_dims(3).is_err());
        assert!(x.expand_dims(-4).is_err());
        assert!(
            x.layer_norm(Some(&Array::ones(&[3], DType::F32, &d)), None, 1e-5)
                .is_err()
        );
        assert!(x.addmm(&x, &x.transpose(), 1.0, 1.0).is_err());
        drop((x, y));
        assert_empty(&d);
    }

    #[test]
    fn two_devices_are_rejected() {
        let d1 = device();
        let d2 = device();
        let a = Array::ones(&[2], DType::F32, &d1);
        let b = Array::ones(&[2], DType::F32, &d2);
        let m1 = Array::ones(&[2, 2], DType::F32, &d1);
        let m2 = Array::ones(&[2, 2], DType::F32, &d2);
        assert!(matches!(&a + &b, Err(Error::DeviceMismatch)));
        assert!(matches!(where_(&a, &b, &b), Err(Error::DeviceMismatch)));
        assert!(matches!(where_(&a, &a, &b), Err(Error::DeviceMismatch)));
        assert!(matches!(m1.matmul(&m2), Err(Error::DeviceMismatch)));
        assert!(matches!(a.divmod(&b), Err(Error::DeviceMismatch)));
        assert!(matches!(
            a.take(&Array::zeros(&[1], DType::I32, &d2), Some(0)),
            Err(Error::DeviceMismatch)
        ));
        assert!(matches!(
            m2.addmm(&m1, &m1, 1.0, 1.0),
            Err(Error::DeviceMismatch)
        ));
        assert!(matches!(
            m1.addmm(&m2, &m2, 1.0, 1.0),
            Err(Error::DeviceMismatch)
        ));
        assert!(matches!(
            m1.addmm(&m1, &m2, 1.0, 1.0),
            Err(Error::DeviceMismatch)
        ));
        assert!(matches!(eval(&[&a, &b]), Err(Error::DeviceMismatch)));
        assert!(m1.layer_norm(Some(&b), None, 1e-5).is_err());
        assert!(m1.rms_norm(Some(&b), 1e-5).is_err());
        drop((a, b, m1, m2));
        assert_empty(&d1);
        assert_empty(&d2);
    }

    #[test]
    fn addmm_bias_device_mismatch_only_in_bias() {
        let d1 = device();
        let d2 = device();
        let m1 = Array::ones(&[2, 2], DType::F32, &d1);
        let c2 = Array::ones(&[2], DType::F32, &d2);
        let r = c2.addmm(&m1, &m1, 1.0, 1.0).and_then(|c| c.to_vec::<f32>());
        assert!(matches!(r, Err(Error::DeviceMismatch)), "{r:?}");
    }

    #[test]
    fn deep_chain_drop_and_eval() -> R {
        let d = device();
        {
            let mut y = Array::ones(&[4], DType::F32, &d);
            for _ in 0..200_000 {
                y = y.reshape(&[2, 2])?.reshape(&[4])?;
            }
            drop(y);
            let mut y = Array::ones(&[4], DType::F32, &d);
            for _ in 0..3000 {
                y = (&y + 1.0)?;
            }
            assert_eq!(y.to_vec::<f32>()?, vec![3001.0; 4]);
            let mut v = Array::ones(&[4], DType::F32, &d);
            for _ in 0..50_000 {
                v = v.reshape(&[2, 2])?.transpose().reshape(&[4])?;
            }
            v.eval()?;
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn memory_api() -> R {
        let d = device();
        d.set_cache_limit(0);
        {
            let x = Array::ones(&[1 << 16], DType::F32, &d);
            let y = (&x * 2.0)?;
            let s = y.sum(Axes::All, false)?;
            d.clear_cache();
            assert_eq!(s.item::<f32>()?, 2.0 * 65536.0);
            d.clear_cache();
            assert_eq!(d.cache_memory(), 0);
        }
        assert_eq!(d.cache_memory(), 0);
        assert_empty(&d);
        d.set_cache_limit(u64::MAX);
        let x = Array::ones(&[1 << 16], DType::F32, &d);
        x.eval()?;
        d.reset_peak_memory();
        assert_eq!(d.peak_memory(), d.active_memory());
        drop(x);
        assert_eq!(d.active_memory(), 0);
        d.reset_peak_memory();
        assert_eq!(d.peak_memory(), 0);
        Ok(())
    }

    #[test]
    fn reduce_many_rows_over_65535_workgroups() -> R {
        let d = device();
        let rows = 70_000usize;
        let x = Array::ones(&[rows, 300], DType::F32, &d);
        let s = x.sum(1, false)?.to_vec::<f32>()?;
        assert!(
            s.iter().all(|v| *v == 300.0),
            "first bad {:?}",
            s.iter().position(|v| *v != 300.0)
        );
        let am = x.argmax(Some(1), false)?.to_vec::<u32>()?;
        assert!(am.iter().all(|v| *v == 0));
        Ok(())
    }

    #[test]
    fn elementwise_over_16m_elements() -> R {
        let d = device();
        let n = 17_000_001usize;
        let x = Array::arange(0.0, n as f64, 1.0, DType::I32, &d)?;
        let y = (&x + 1.0)?;
        let v = y.to_vec::<i32>()?;
        assert_eq!(v[n - 1], n as i32);
        assert!(v.iter().enumerate().all(|(k, &e)| e == k as i32 + 1));
        Ok(())
    }

    #[test]
    fn reduce_u32_element_count_broadcast() -> R {
        // element count > u32::MAX through a broadcast view: typed error or right answer
        let d = device();
        let x = Array::scalar(1.0, DType::F32, &d)?.broadcast_to(&[1 << 17, 1 << 16])?;
        let r = x.sum(Axes::All, false).and_then(|s| s.item::<f32>());
        match r {
            Ok(v) => assert_eq!(v, (1u64 << 33) as f32),
            Err(Error::TooLarge { .. }) | Err(Error::InvalidArgument(_)) => {}
            Err(e) => panic!("{e}"),
        }
        Ok(())
    }

    #[test]
    fn too_large_is_typed() {
        let d = device();
        // One f32 past the largest storage binding (128 MiB on Mesa, 2 GiB
        // on an H200).
        let n = (d.limits().max_storage_buffer_binding_size / 4 + 1) as usize;
        let x = Array::zeros(&[n], DType::F32, &d);
        assert!(matches!(x.eval(), Err(Error::TooLarge { .. })));
        let b = Array::scalar(1.0, DType::F32, &d)
            .unwrap()
            .broadcast_to(&[n])
            .unwrap();
        let r = (&b + 1.0).and_then(|y| y.eval());
        assert!(matches!(r, Err(Error::TooLarge { .. })), "{r:?}");
        drop((x, b));
        assert_empty(&d);
    }

    #[test]
    fn softmax_layer_norm_empty_and_f16() -> R {
        let d = device();
        let z = Array::zeros(&[2, 0], DType::F32, &d);
        assert_eq!(z.softmax(-1)?.shape(), &[2, 0]);
        z.softmax(-1)?.eval()?;
        z.layer_norm(None, None, 1e-5)?.eval()?;
        let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &d)?.astype(DType::F16)?;
        let s = x.softmax(-1)?.astype(DType::F32)?.to_vec::<f32>()?;
        assert!(close(&s, &[0.2689, 0.7311, 0.2689, 0.7311], 1e-3), "{s:?}");
        let ln = x
            .layer_norm(None, None, 0.0)?
            .astype(DType::F32)?
            .to_vec::<f32>()?;
        assert!(close(&ln, &[-1.0, 1.0, -1.0, 1.0], 1e-3), "{ln:?}");
        Ok(())
    }

    #[test]
    fn integer_reductions() -> R {
        let d = device();
        let x = i(&d, &[i32::MAX, 1, -3, 4], &[4]);
        assert_eq!(x.sum(0, false)?.item::<i32>()?, i32::MAX.wrapping_add(2));
        assert_eq!(x.prod(0, false)?.item::<i32>()?, i32::MAX.wrapping_mul(-12));
        let m = x.mean(0, false)?.item::<f32>()?;
        assert!(
            (m - (i32::MAX as f64 + 2.0) as f32 / 4.0).abs() < 1000.0,
            "mean of i32 {m}"
        );
        let v = i(&d, &[1, 2, 3, 4], &[4]).var(0, false, 0)?.item::<f32>()?;
        assert_eq!(v, 1.25);
        Ok(())
    }

    #[test]
    fn f16_overflow() -> R {
        let d = device();
        let x = Array::from_slice(&[f16::from_f32(60000.0), f16::from_f32(65504.0)], &[2], &d)?;
        let y = (&x + 10000.0)?.to_vec::<f16>()?;
        assert!(y.iter().all(|h| h.is_infinite()), "{y:?}");
        let s = x.sum(0, false)?.to_vec::<f16>()?;
        assert!(s[0].is_infinite(), "f16 sum overflow {s:?}");
        let m = x.mean(0, false)?.to_vec::<f16>()?;
        assert_eq!(m[0], f16::from_f32(62752.0));
        Ok(())
    }

    #[test]
    fn strided_reduce_2_24_bf16() -> R {
        let d = device();
        let x = Array::ones(&[1 << 24, 3], DType::BF16, &d);
        let s = x.sum(0, false)?.astype(DType::F32)?.to_vec::<f32>()?;
        assert_eq!(s, vec![16777216.0; 3]);
        Ok(())
    }

    #[test]
    fn strided_reduce_broadcast_axis0() -> R {
        let d = device();
        let x = Array::scalar(1.0, DType::F32, &d)?.broadcast_to(&[1 << 24, 2])?;
        let s = x.sum(0, false)?.to_vec::<f32>()?;
        assert_eq!(s, vec![16777216.0; 2]);
        let m = x.mean(0, false)?.to_vec::<f32>()?;
        assert_eq!(m, vec![1.0; 2]);
        Ok(())
    }

    #[test]
    fn moments_big_offset() -> R {
        let d = device();
        let v: Vec<f32> = (0..10_000).map(|k| 1e4 + (k % 2) as f32).collect();
        let x = f(&d, &v, &[10_000]);
        let var = x.var(0, false, 0)?.item::<f32>()?;
        assert!((var - 0.25).abs() < 1e-3, "var {var}");
        Ok(())
    }

    #[test]
    fn split_view_then_drop_parent_chain() -> R {
        // a split whose input is a pending chain; drop every handle but one part
        let d = device();
        {
            let x = Array::ones(&[6, 4], DType::F32, &d);
            let y = (&x * 2.0)?.transpose();
            let mut parts = y.split([1, 3], 0)?;
            drop((x, y));
            let last = parts.pop().unwrap();
            drop(parts);
            assert_eq!(last.to_vec::<f32>()?, vec![2.0; 6]);
        }
        assert_empty(&d);
        Ok(())
    }

    #[test]
    fn where_donating_cond() -> R {
        let d = device();
        {
            let x = f(&d, &[1.0, 2.0, 3.0, 4.0, 5.0], &[5]);
            let cond = (&x - 3.0)?; // f32, dense, sole: donation candidate at input 0
            let w = where_(&cond, &(&x * 10.0)?, &(&x * -1.0)?)?;
            drop(cond);
            assert_eq!(w.to_vec::<f32>()?, vec![10.0, 20.0, -3.0, 40.0, 50.0]);
        }
        assert_empty(&d);
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

    #[test]
    fn bf16_batched_odd_output_words() -> R {
        let d = device();
        let mut rng = common::Rng::new(5);
        let (bt, m, k, n) = (5usize, 3usize, 7usize, 3usize);
        let av: Vec<f32> = rng
            .vec_f32(bt * m * k)
            .iter()
            .map(|x| bf16::from_f32(*x).to_f32())
            .collect();
        let bv: Vec<f32> = rng
            .vec_f32(bt * k * n)
            .iter()
            .map(|x| bf16::from_f32(*x).to_f32())
            .collect();
        let want = common::matmul_ref(&av, &bv, bt, m, k, n);
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
    fn f16_matmul_odd() -> R {
        let d = device();
        let a = Array::ones(&[3, 5], DType::F16, &d);
        let b = Array::ones(&[5, 7], DType::F16, &d);
        match a.matmul(&b) {
            Ok(c) => assert_eq!(c.to_vec::<f16>()?, vec![f16::from_f32(5.0); 21]),
            Err(Error::MissingFeature { .. }) => assert!(is_gl(&d)),
            Err(e) => panic!("{e}"),
        }
        Ok(())
    }
}
