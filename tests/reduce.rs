//! Reductions and nn ops against f64 references: random data, odd sizes,
//! every axis set, keepdims, strided input, f16, poisoned pools; empty axes,
//! NaN and infinities, integer and f16 overflow, and sizes past llvmpipe's
//! loop limit and the 65535-workgroup dispatch limit.
//!
//! A test whose comment starts with a severity (HIGH, MEDIUM, LOW) pins a
//! bug an adversarial review found; the comment says what went wrong and on
//! which backend. All are fixed.

mod common;

use common::arrays::{f, i};
use common::reference::{all_close, strides, variance};
use common::{R, Rng, device, poison_pool, pollute};
use half::f16;
use wgarray::{Array, DType, Error};

/// Reduce a row-major host array of `shape` over `axes` with `f` on each
/// group (in row-major order of the reduced axes).
fn host_reduce(x: &[f64], shape: &[usize], axes: &[usize], f: &dyn Fn(&[f64]) -> f64) -> Vec<f64> {
    let nd = shape.len();
    let kept: Vec<usize> = (0..nd).filter(|a| !axes.contains(a)).collect();
    let n_out: usize = kept.iter().map(|&a| shape[a]).product();
    let r: usize = axes.iter().map(|&a| shape[a]).product();
    let strides = strides(shape);
    (0..n_out)
        .map(|o| {
            let mut idx = vec![0; nd];
            let mut rem = o;
            for &a in kept.iter().rev() {
                idx[a] = rem % shape[a];
                rem /= shape[a];
            }
            let group: Vec<f64> = (0..r)
                .map(|q| {
                    let mut rem = q;
                    for &a in axes.iter().rev() {
                        idx[a] = rem % shape[a];
                        rem /= shape[a];
                    }
                    x[(0..nd).map(|a| idx[a] * strides[a]).sum::<usize>()]
                })
                .collect();
            f(&group)
        })
        .collect()
}

fn assert_close(name: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{name}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= rel * (1.0 + w.abs());
        assert!(ok, "{name}[{i}]: got {g}, want {w}");
    }
}

/// (name, result, reference on each group, tolerance)
type Case = (&'static str, Array, Box<dyn Fn(&[f64]) -> f64>, f64);

#[test]
fn reductions_over_every_axis_set() {
    let d = device();
    let mut rng = Rng::new(31);
    for shape in [
        vec![7usize],
        vec![1025],
        vec![7, 33],
        vec![3, 1, 5, 7],
        vec![2, 300, 3],
    ] {
        let n: usize = shape.iter().product();
        poison_pool(&d, n);
        let x: Vec<f32> = rng.vec_f32(n);
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let a = Array::from_slice(&x, &shape, &d).unwrap();
        let nd = shape.len();
        for mask in 1..(1u32 << nd) {
            let axes: Vec<usize> = (0..nd).filter(|i| mask >> i & 1 == 1).collect();
            let ax: Vec<isize> = axes.iter().map(|&i| i as isize).collect();
            let cases: Vec<Case> = vec![
                (
                    "sum",
                    a.sum(ax.clone(), false).unwrap(),
                    Box::new(|g: &[f64]| g.iter().sum()),
                    1e-5,
                ),
                (
                    "mean",
                    a.mean(ax.clone(), false).unwrap(),
                    Box::new(|g: &[f64]| g.iter().sum::<f64>() / g.len() as f64),
                    1e-5,
                ),
                (
                    "max",
                    a.max(ax.clone(), false).unwrap(),
                    Box::new(|g: &[f64]| g.iter().cloned().fold(f64::MIN, f64::max)),
                    0.0,
                ),
                (
                    "min",
                    a.min(ax.clone(), false).unwrap(),
                    Box::new(|g: &[f64]| g.iter().cloned().fold(f64::MAX, f64::min)),
                    0.0,
                ),
                (
                    "var",
                    a.var(ax.clone(), false, 0).unwrap(),
                    Box::new(|g: &[f64]| variance(g, 0.0)),
                    1e-4,
                ),
                (
                    "var ddof=1",
                    a.var(ax.clone(), false, 1).unwrap(),
                    Box::new(|g: &[f64]| variance(g, 1.0)),
                    1e-4,
                ),
                (
                    "logsumexp",
                    a.logsumexp(ax.clone(), false).unwrap(),
                    Box::new(|g: &[f64]| g.iter().map(|v| v.exp()).sum::<f64>().ln()),
                    1e-5,
                ),
            ];
            for (name, got, f, tol) in cases {
                let want = host_reduce(&xd, &shape, &axes, &*f);
                assert_close(
                    &format!("{name} {shape:?} axes {axes:?}"),
                    &got.to_f64_vec().unwrap(),
                    &want,
                    tol,
                );
            }
            // prod on values near 1 so it stays finite
            let p: Vec<f32> = x.iter().map(|v| 1.0 + v * 0.01).collect();
            let pa = Array::from_slice(&p, &shape, &d).unwrap();
            let pd: Vec<f64> = p.iter().map(|&v| v as f64).collect();
            let want = host_reduce(&pd, &shape, &axes, &|g| g.iter().product());
            assert_close(
                "prod",
                &pa.prod(ax.clone(), false).unwrap().to_f64_vec().unwrap(),
                &want,
                1e-5,
            );
        }
    }
}

#[test]
fn keepdims_negative_axes_and_strided_input() {
    let d = device();
    let mut rng = Rng::new(32);
    let x = rng.vec_f32(7 * 33);
    let a = Array::from_slice(&x, &[7, 33], &d).unwrap();
    let s = a.sum(-1isize, true).unwrap();
    assert_eq!(s.shape(), &[7, 1]);
    let t = a.transpose(); // [33, 7], strided
    let m = t.max(0isize, false).unwrap();
    assert_eq!(m.shape(), &[7]);
    let want: Vec<f32> = (0..7)
        .map(|i| {
            x[i * 33..(i + 1) * 33]
                .iter()
                .cloned()
                .fold(f32::MIN, f32::max)
        })
        .collect();
    assert_eq!(m.to_vec::<f32>().unwrap(), want);
    let all = a.sum(None, false).unwrap();
    assert_eq!(all.shape(), &[] as &[usize]);
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    assert!((all.item::<f32>().unwrap() as f64 - want).abs() < 1e-4);
    assert_eq!(a.sum(None, true).unwrap().shape(), &[1, 1]);
}

#[test]
fn sum_of_ten_million_ones_is_exact() {
    let d = device();
    let ones = Array::ones(&[10_000_000], DType::F32, &d).unwrap();
    assert_eq!(ones.sum(None, false).unwrap().item::<f32>().unwrap(), 1e7);
    let h = Array::ones(&[10_000_000], DType::F16, &d).unwrap();
    // f16 accumulates in f32; 10^7 rounds to the nearest f16 (inf: f16 max is 65504).
    let s = h.sum(None, false).unwrap();
    assert_eq!(s.dtype(), DType::F16);
    assert_eq!(
        h.astype(DType::F32)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .item::<f32>()
            .unwrap(),
        1e7
    );
    assert_eq!(
        h.mean(None, false).unwrap().item::<half::f16>().unwrap(),
        half::f16::ONE
    );
}

#[test]
fn argmax_argmin_first_occurrence_and_nan() {
    let d = device();
    let x = [1.0f32, 3.0, 3.0, -1.0, -1.0, 2.0];
    let a = Array::from_slice(&x, &[2, 3], &d).unwrap();
    assert_eq!(
        a.argmax(None, false).unwrap().to_vec::<u32>().unwrap(),
        vec![1]
    );
    assert_eq!(
        a.argmin(None, false).unwrap().to_vec::<u32>().unwrap(),
        vec![3]
    );
    assert_eq!(
        a.argmax(1, false).unwrap().to_vec::<u32>().unwrap(),
        vec![1, 2]
    );
    assert_eq!(a.argmin(0, true).unwrap().shape(), &[1, 3]);
    let n = Array::from_slice(&[1.0f32, f32::NAN, 5.0, f32::NAN], &[4], &d).unwrap();
    assert_eq!(
        n.argmax(None, false).unwrap().to_vec::<u32>().unwrap(),
        vec![1]
    );
    assert!(n.max(None, false).unwrap().item::<f32>().unwrap().is_nan());
    // large rows take the tree path; ties resolve to the first index
    let mut big = vec![0.0f32; 5000];
    big[4000] = 9.0;
    big[1234] = 9.0;
    let b = Array::from_slice(&big, &[5000], &d).unwrap();
    assert_eq!(
        b.argmax(None, false).unwrap().to_vec::<u32>().unwrap(),
        vec![1234]
    );
    let i = Array::from_slice(&[3i32, -7, 12, 12], &[4], &d).unwrap();
    assert_eq!(
        i.argmax(None, false).unwrap().to_vec::<u32>().unwrap(),
        vec![2]
    );
    assert_eq!(i.min(None, false).unwrap().item::<i32>().unwrap(), -7);
    assert_eq!(i.sum(None, false).unwrap().item::<i32>().unwrap(), 20);
}

#[test]
fn all_any_and_bool_sums() {
    let d = device();
    let b = Array::from_slice(&[true, false, true, true], &[2, 2], &d).unwrap();
    assert_eq!(
        b.all(1isize, false).unwrap().to_vec::<bool>().unwrap(),
        vec![false, true]
    );
    assert_eq!(
        b.any(0isize, false).unwrap().to_vec::<bool>().unwrap(),
        vec![true, true]
    );
    assert_eq!(b.sum(None, false).unwrap().item::<i32>().unwrap(), 3);
    let f = Array::from_slice(&[0.0f32, 0.5], &[2], &d).unwrap();
    assert!(!f.all(None, false).unwrap().item::<bool>().unwrap());
    assert!(f.any(None, false).unwrap().item::<bool>().unwrap());
}

#[test]
fn moments_in_one_dispatch_and_its_outputs_drop_independently() {
    let d = device();
    let mut rng = Rng::new(33);
    let x: Vec<f32> = rng
        .vec_f32(7 * 1025)
        .iter()
        .map(|v| v * 3.0 + 100.0)
        .collect();
    let a = Array::from_slice(&x, &[7, 1025], &d).unwrap();
    let (mean, var) = a.moments(-1isize, false, 0).unwrap();
    assert_eq!(d.live_nodes(), 1, "mean and var share one node");
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let want_m = host_reduce(&xd, &[7, 1025], &[1], &|g| {
        g.iter().sum::<f64>() / g.len() as f64
    });
    let want_v = host_reduce(&xd, &[7, 1025], &[1], &|g| variance(g, 0.0));
    // Welford keeps the variance accurate with a large mean.
    assert_close("mean", &mean.to_f64_vec().unwrap(), &want_m, 1e-6);
    assert_close("var", &var.to_f64_vec().unwrap(), &want_v, 1e-4);
    // Drop one output before eval: the other still evaluates.
    let (m2, v2) = a.moments(None, true, 1).unwrap();
    drop(m2);
    assert_eq!(v2.shape(), &[1, 1]);
    let want = variance(&xd, 1.0);
    assert!((v2.item::<f32>().unwrap() as f64 - want).abs() < 1e-4 * want);
    drop((a, mean, var, v2));
    common::assert_empty(&d);
}

#[test]
fn softmax_log_softmax_layer_norm_rms_norm() {
    let d = device();
    let mut rng = Rng::new(34);
    let (r, c) = (7, 33);
    let x: Vec<f32> = rng.vec_f32(r * c).iter().map(|v| v * 30.0).collect();
    let w: Vec<f32> = rng.vec_f32(c);
    let b: Vec<f32> = rng.vec_f32(c);
    let a = Array::from_slice(&x, &[r, c], &d).unwrap();
    let wa = Array::from_slice(&w, &[c], &d).unwrap();
    let ba = Array::from_slice(&b, &[c], &d).unwrap();
    let sm = a.softmax(-1).unwrap().to_f64_vec().unwrap();
    let ls = a.log_softmax(1).unwrap().to_f64_vec().unwrap();
    let ln = a
        .layer_norm(Some(&wa), Some(&ba), 1e-5)
        .unwrap()
        .to_f64_vec()
        .unwrap();
    let rn = a.rms_norm(Some(&wa), 1e-6).unwrap().to_f64_vec().unwrap();
    for i in 0..r {
        let row: Vec<f64> = x[i * c..(i + 1) * c].iter().map(|&v| v as f64).collect();
        let m = row.iter().cloned().fold(f64::MIN, f64::max);
        let z: f64 = row.iter().map(|v| (v - m).exp()).sum();
        let mean = row.iter().sum::<f64>() / c as f64;
        let v = variance(&row, 0.0);
        let ms = row.iter().map(|v| v * v).sum::<f64>() / c as f64;
        for j in 0..c {
            let k = i * c + j;
            let s = (row[j] - m).exp() / z;
            assert!((sm[k] - s).abs() < 1e-6 + 1e-5 * s, "softmax {k}");
            assert!(
                (ls[k] - (row[j] - m - z.ln())).abs() < 1e-4,
                "log_softmax {k}"
            );
            let l = (row[j] - mean) / (v + 1e-5).sqrt() * w[j] as f64 + b[j] as f64;
            assert!((ln[k] - l).abs() < 1e-4, "layer_norm {k}: {} vs {l}", ln[k]);
            let q = row[j] / (ms + 1e-6).sqrt() * w[j] as f64;
            assert!((rn[k] - q).abs() < 1e-4, "rms_norm {k}");
        }
    }
    // rows of softmax sum to 1, also in f16
    let h = a.astype(DType::F16).unwrap().softmax(-1).unwrap();
    assert_eq!(h.dtype(), DType::F16);
    let sums = h
        .astype(DType::F32)
        .unwrap()
        .sum(-1isize, false)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for s in sums {
        assert!((s - 1.0).abs() < 1e-2, "{s}");
    }
}

#[test]
fn divmod_writes_both_outputs_in_one_dispatch() {
    let d = device();
    let mut rng = Rng::new(35);
    let x: Vec<f32> = rng.vec_f32(1025).iter().map(|v| v * 50.0).collect();
    let y: Vec<f32> = rng.vec_f32(33).iter().map(|v| v * 7.0 + 0.5).collect();
    poison_pool(&d, 1025 * 33);
    let a = Array::from_slice(&x, &[1025, 1], &d).unwrap();
    let b = Array::from_slice(&y, &[33], &d).unwrap();
    let (q, r) = a.divmod(&b).unwrap();
    assert_eq!(d.live_nodes(), 1);
    assert_eq!(q.shape(), &[1025, 33]);
    let (qv, rv) = (q.to_vec::<f32>().unwrap(), r.to_vec::<f32>().unwrap());
    for i in 0..1025 {
        for j in 0..33 {
            let (xa, yb) = (x[i] as f64, y[j] as f64);
            let wq = (xa / yb).floor();
            assert_eq!(
                qv[i * 33 + j] as f64,
                (x[i] / y[j]).floor() as f64,
                "q {i},{j}"
            );
            let wr = xa - wq * yb;
            assert!(
                (rv[i * 33 + j] as f64 - wr).abs() < 1e-4 * (1.0 + wr.abs()),
                "r {i},{j}"
            );
        }
    }
    drop((q, r));
    // integers, one output dropped before eval, 2-byte dtype
    let ia = Array::from_slice(&[7i32, -7, 7, -7], &[4], &d).unwrap();
    let ib = Array::from_slice(&[2i32, 2, -2, -2], &[4], &d).unwrap();
    let (q, r) = ia.divmod(&ib).unwrap();
    drop(q);
    assert_eq!(r.to_vec::<i32>().unwrap(), vec![1, 1, -1, -1]);
    drop(r);
    let h = Array::from_slice(&[half::f16::from_f32(7.5); 3], &[3], &d).unwrap();
    let (q, r) = h
        .divmod(Array::scalar(2.0, DType::F16, &d).unwrap())
        .unwrap();
    assert_eq!(
        q.to_vec::<half::f16>().unwrap(),
        vec![half::f16::from_f32(3.0); 3]
    );
    assert_eq!(
        r.to_vec::<half::f16>().unwrap(),
        vec![half::f16::from_f32(1.5); 3]
    );
    drop((a, b, ia, ib, h, q, r));
    common::assert_empty(&d);
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
fn moments_big_offset() -> R {
    let d = device();
    let v: Vec<f32> = (0..10_000).map(|k| 1e4 + (k % 2) as f32).collect();
    let x = f(&d, &v, &[10_000]);
    let var = x.var(0, false, 0)?.item::<f32>()?;
    assert!((var - 0.25).abs() < 1e-3, "var {var}");
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
            x.argmax(1, false)?.to_vec::<u32>()?,
            vec![0, 0],
            "all-NaN n {n}"
        );
        assert_eq!(
            x.argmin(1, false)?.to_vec::<u32>()?,
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

// MEDIUM, both: argmax of an empty axis returns 4294967295 instead of an error
#[test]
fn argmax_of_empty_axis_is_an_error() {
    // NumPy: ValueError: attempt to get argmax of an empty sequence
    let d = device();
    let x = Array::zeros(&[0], DType::F32, &d).unwrap();
    let r = x.argmax(0, false).and_then(|a| a.to_vec::<u32>());
    assert!(r.is_err(), "argmax of empty gave {r:?}");
}

// MEDIUM, both: same, per row
#[test]
fn argmax_of_empty_rows_is_an_error() {
    let d = device();
    let x = Array::zeros(&[3, 0], DType::F32, &d).unwrap();
    let r = x.argmax(1, false).and_then(|a| a.to_vec::<u32>());
    assert!(r.is_err(), "argmax over empty rows gave {r:?}");
}

// MEDIUM, both: the u32::MAX from an empty argmax, fed to take as i32 -1, silently picks the last element
#[test]
fn argmax_empty_value() -> R {
    let d = device();
    let x = Array::zeros(&[0], DType::F32, &d).unwrap();
    assert!(matches!(
        x.argmax(0, false),
        Err(Error::EmptyReduction { .. })
    ));
    Ok(())
}

// MEDIUM, both: sum over 2^27 broadcast elements gives 1048562 (loop limit)
#[test]
fn reduce_huge_broadcast_sum() -> R {
    // A broadcast view costs no memory; 2^27 ones sum to 2^27 exactly.
    let d = device();
    let mut bad = vec![];
    for log in [27u32, 28] {
        let x = Array::scalar(1.0, DType::F32, &d)?.broadcast_to(&[1usize << log])?;
        // Refused by the call, in elements (Limit::ReducedElements).
        assert!(matches!(
            x.sum(None, false),
            Err(Error::TooLarge {
                op: "sum",
                limit: wgarray::Limit::ReducedElements,
                ..
            })
        ));
    }
    for log in [24u32, 26] {
        let n = 1usize << log;
        let x = Array::scalar(1.0, DType::F32, &d)?.broadcast_to(&[n])?;
        let s = x.sum(None, false).and_then(|s| s.item::<f32>());
        match s {
            Ok(v) if v == n as f32 => {}
            other => bad.push(format!("sum of 2^{log} broadcast ones: {other:?}")),
        }
        let m = x.max(None, false).and_then(|s| s.item::<f32>());
        if !matches!(m, Ok(1.0)) {
            bad.push(format!("max of 2^{log}: {m:?}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
    Ok(())
}

#[test]
fn reduce_u32_element_count_broadcast() -> R {
    // element count > u32::MAX through a broadcast view: typed error or right answer
    let d = device();
    let x = Array::scalar(1.0, DType::F32, &d)?.broadcast_to(&[1 << 17, 1 << 16])?;
    let r = x.sum(None, false).and_then(|s| s.item::<f32>());
    match r {
        Ok(v) => assert_eq!(v, (1u64 << 33) as f32),
        Err(Error::TooLarge { .. }) | Err(Error::InvalidArgument(_)) => {}
        Err(e) => panic!("{e}"),
    }
    Ok(())
}

#[test]
fn reduce_many_rows_over_65535_workgroups() -> R {
    let d = device();
    let rows = 70_000usize;
    let x = Array::ones(&[rows, 300], DType::F32, &d).unwrap();
    let s = x.sum(1, false)?.to_vec::<f32>()?;
    assert!(
        s.iter().all(|v| *v == 300.0),
        "first bad {:?}",
        s.iter().position(|v| *v != 300.0)
    );
    let am = x.argmax(1, false)?.to_vec::<u32>()?;
    assert!(am.iter().all(|v| *v == 0));
    Ok(())
}

#[test]
fn strided_reduce_2_24_bf16() -> R {
    let d = device();
    let x = Array::ones(&[1 << 24, 3], DType::BF16, &d).unwrap();
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

#[test]
fn softmax_layer_norm_empty_and_f16() -> R {
    let d = device();
    let z = Array::zeros(&[2, 0], DType::F32, &d).unwrap();
    assert_eq!(z.softmax(-1)?.shape(), &[2, 0]);
    z.softmax(-1)?.eval()?;
    z.layer_norm(None, None, 1e-5)?.eval()?;
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &d)?.astype(DType::F16)?;
    let s = x.softmax(-1)?.astype(DType::F32)?.to_vec::<f32>()?;
    assert!(
        all_close(&s, &[0.2689, 0.7311, 0.2689, 0.7311], 1e-3),
        "{s:?}"
    );
    let ln = x
        .layer_norm(None, None, 0.0)?
        .astype(DType::F32)?
        .to_vec::<f32>()?;
    assert!(all_close(&ln, &[-1.0, 1.0, -1.0, 1.0], 1e-3), "{ln:?}");
    Ok(())
}

/// Many outputs of a few hundred or thousand elements each: on a software
/// adapter each output is folded by one thread (in blocks), elsewhere by a
/// workgroup; both against the host, on a transposed (strided) view too.
#[test]
fn many_outputs_fold_per_thread_on_software_adapters() -> R {
    let d = device();
    let mut rng = Rng::new(21);
    for (rows, cols) in [(2049usize, 33usize), (2100, 1025)] {
        let v = rng.vec_f32(rows * cols);
        let host: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        poison_pool(&d, rows * cols);
        let x = f(&d, &v, &[rows, cols]);
        let xt = f(&d, &v, &[cols, rows]).transpose(); // [rows, cols], strided
        let host_t: Vec<f64> = (0..rows * cols)
            .map(|k| host[(k % cols) * rows + k / cols])
            .collect();
        for (input, h) in [(&x, &host), (&xt, &host_t)] {
            let sum = input.sum(-1isize, false)?.to_vec::<f32>()?;
            let want = host_reduce(h, &[rows, cols], &[1], &|g| g.iter().sum());
            // f32 rounding of up to 1025 terms of magnitude 1.
            assert_close(
                "sum",
                &sum.iter().map(|&s| s as f64).collect::<Vec<_>>(),
                &want,
                1e-4,
            );
            let max = input.max(-1isize, false)?.to_vec::<f32>()?;
            let want = host_reduce(h, &[rows, cols], &[1], &|g| {
                g.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            });
            assert_close(
                "max",
                &max.iter().map(|&s| s as f64).collect::<Vec<_>>(),
                &want,
                0.0,
            );
            let var = input.var(-1isize, false, 1)?.to_vec::<f32>()?;
            let want = host_reduce(h, &[rows, cols], &[1], &|g| variance(g, 1.0));
            assert_close(
                "var",
                &var.iter().map(|&s| s as f64).collect::<Vec<_>>(),
                &want,
                1e-4,
            );
        }
    }
    Ok(())
}

/// Reductions over a unit-stride last axis take the wide kernel (16-byte
/// loads; `Device::wide_dispatches` counts it): rows of every length and
/// alignment (starting mid-chunk, shorter than a chunk, a column slice
/// whose rows each start elsewhere in their chunk, rows reversed along the
/// kept axis), dtypes of 1, 2 and 4 bytes, rows long enough to be cut into
/// parts (a second dispatch combines them), against f64 host loops.
#[test]
fn last_axis_reductions_load_16_bytes_at_a_time() -> R {
    use wgarray::Slice;
    let d = device();
    let mut rng = Rng::new(36);
    for (rows, cols) in [(3, 2), (5, 3), (7, 33), (4, 1025), (2, 4099), (1, 300_001)] {
        let n = (rows + 1) * cols;
        poison_pool(&d, n);
        let v = rng.vec_f32(n);
        let h: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        let full = f(&d, &v, &[rows + 1, cols]);
        // (name, view, its rows on the host, whether its rows are parts
        // of long rows)
        let mut views: Vec<(&str, Array, Vec<Vec<f64>>)> = Vec::new();
        let row = |r: usize, from: usize| h[r * cols + from..(r + 1) * cols].to_vec();
        views.push((
            "rows 1..",
            full.slice(&[Slice::range(1, rows as isize + 1)])?,
            (1..=rows).map(|r| row(r, 0)).collect(),
        ));
        if cols > 2 {
            views.push((
                "columns 1..",
                full.slice(&[Slice::FULL, Slice::range(1, cols as isize)])?,
                (0..=rows).map(|r| row(r, 1)).collect(),
            ));
        }
        views.push((
            "rows reversed",
            full.slice(&[Slice::step(-1)])?,
            (0..=rows).rev().map(|r| row(r, 0)).collect(),
        ));
        for (name, x, want_rows) in views {
            let what = |op: &str| format!("{op} over [{rows}, {cols}], {name}");
            let check = |op: &str, got: Array, f: &dyn Fn(&[f64]) -> f64, tol: f64| -> R {
                let want: Vec<f64> = want_rows.iter().map(|r| f(r)).collect();
                let (before, wide) = (d.dispatches(), d.wide_dispatches());
                got.eval()?;
                assert_eq!(d.wide_dispatches() - wide, 1, "{}: wide", what(op));
                let parts = d.dispatches() - before;
                let got = got.to_f64_vec()?;
                assert!(
                    parts == 1 || (cols > 100_000 && parts == 2),
                    "{}: {parts} dispatches",
                    what(op)
                );
                assert_close(&what(op), &got, &want, tol);
                Ok(())
            };
            check("sum", x.sum(-1isize, false)?, &|r| r.iter().sum(), 1e-5)?;
            check(
                "max",
                x.max(-1isize, false)?,
                &|r| r.iter().copied().fold(f64::MIN, f64::max),
                0.0,
            )?;
            check(
                "argmax",
                x.argmax(Some(-1), false)?,
                &|r| {
                    let m = r.iter().copied().fold(f64::MIN, f64::max);
                    r.iter().position(|&v| v == m).unwrap() as f64
                },
                0.0,
            )?;
            check(
                "var",
                x.var(-1isize, false, 1)?,
                &|r| variance(r, 1.0),
                1e-4,
            )?;
            check(
                "logsumexp",
                x.logsumexp(-1isize, false)?,
                &|r| r.iter().map(|v| v.exp()).sum::<f64>().ln(),
                1e-5,
            )?;
            // Packed dtypes: 8 (f16) and 16 (u8) elements per chunk.
            let x16 = x.astype(DType::F16)?;
            x16.eval()?;
            let r16: Vec<Vec<f64>> = want_rows
                .iter()
                .map(|r| r.iter().map(|&v| f16::from_f64(v).to_f64()).collect())
                .collect();
            let want: Vec<f64> = r16.iter().map(|r| r.iter().sum::<f64>()).collect();
            // The sum over the last axis, every dispatch wide but a cut
            // row's combine pass.
            let wide_sum = |a: &Array, name: &str| -> wgarray::Result<Array> {
                let (before, wide) = (d.dispatches(), d.wide_dispatches());
                let s = a.sum(-1isize, false)?;
                s.eval()?;
                let ran = d.dispatches() - before;
                let combine = u64::from(cols > 100_000);
                assert_eq!(d.wide_dispatches() - wide + combine, ran, "{}", what(name));
                Ok(s)
            };
            // (A cast of the result may follow: it is wide too.)
            let s = wide_sum(&x16, "f16 sum")?;
            let got = s.astype(DType::F32)?.to_f64_vec()?;
            let tol = 2e-3;
            assert_close(&what("f16 sum"), &got, &want, tol);
            let xu = (&x * 100.0)?.abs()?.astype(DType::U8)?;
            xu.eval()?;
            let want: Vec<f64> = want_rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|&v| ((v * 100.0) as f32).abs().trunc() as u8 as f64)
                        .sum()
                })
                .collect();
            let got = wide_sum(&xu, "u8 sum")?.to_f64_vec()?;
            assert_close(&what("u8 sum"), &got, &want, 0.0);
        }
    }
    Ok(())
}

/// softmax, layer_norm and rms_norm over the last axis: one wide kernel
/// (the statistics, then the normalised row, the weight and bias a
/// broadcast row loaded 16 bytes at a time), against f64 host loops.
#[test]
fn normalisations_run_wide() -> R {
    let d = device();
    let mut rng = Rng::new(37);
    for (rows, cols) in [(256, 4), (300, 64), (260, 388)] {
        let v = rng.vec_f32(rows * cols);
        let (wv, bv) = (rng.vec_f32(cols), rng.vec_f32(cols));
        let x = f(&d, &v, &[rows, cols]);
        let (w, b) = (f(&d, &wv, &[cols]), f(&d, &bv, &[cols]));
        let h: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        let mut want_sm = Vec::new();
        let mut want_ln = Vec::new();
        let mut want_rms = Vec::new();
        for r in h.chunks(cols) {
            let m = r.iter().copied().fold(f64::MIN, f64::max);
            let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
            want_sm.extend(r.iter().map(|v| (v - m).exp() / s));
            let mean = r.iter().sum::<f64>() / cols as f64;
            let var = variance(r, 0.0);
            want_ln.extend(
                r.iter()
                    .enumerate()
                    .map(|(j, v)| (v - mean) / (var + 1e-5).sqrt() * wv[j] as f64 + bv[j] as f64),
            );
            let ms = r.iter().map(|v| v * v).sum::<f64>() / cols as f64;
            want_rms.extend(
                r.iter()
                    .enumerate()
                    .map(|(j, v)| v / (ms + 1e-5).sqrt() * wv[j] as f64),
            );
        }
        let cases: Vec<(&str, Array, Vec<f64>, f64)> = vec![
            ("softmax", x.softmax(-1)?, want_sm, 1e-5),
            (
                "layer_norm",
                x.layer_norm(Some(&w), Some(&b), 1e-5)?,
                want_ln,
                1e-4,
            ),
            ("rms_norm", x.rms_norm(Some(&w), 1e-5)?, want_rms, 1e-4),
        ];
        for (name, y, want, tol) in cases {
            let (before, wide) = (d.dispatches(), d.wide_dispatches());
            y.eval()?;
            let what = format!("{name} over [{rows}, {cols}]");
            assert_eq!(d.dispatches() - before, 1, "{what}: dispatches");
            assert_eq!(d.wide_dispatches() - wide, 1, "{what}: wide");
            assert_close(&what, &y.to_f64_vec()?, &want, tol);
        }
    }
    Ok(())
}

// Probes of the pipelines without workgroup-memory zeroing (090f893):
// huge values first (`common::pollute`), then the edge cases where an
// unwritten element would be read.

/// Empty arrays through the workgroup-memory kernels after huge values:
/// the right shapes (and sums of nothing are zero), no error.
#[test]
fn empty_arrays_through_workgroup_memory_kernels() {
    let d = device();
    pollute(&d);
    for shape in [[0usize, 300], [0, 2000], [3, 0]] {
        let x = Array::from_slice(&[] as &[f32], &shape, &d).unwrap();
        assert_eq!(x.cumsum(Some(-1), true, false).unwrap().shape(), &shape[..]);
        assert_eq!(x.sort(Some(-1)).unwrap().shape(), &shape[..]);
        let s = x.sum(-1, false).unwrap();
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![0.0; shape[0]]);
        if shape[1] >= 5 {
            let (v, i) = x.topk(5, -1).unwrap();
            assert_eq!(v.shape(), &[0, 5]);
            assert_eq!(i.to_vec::<u32>().unwrap(), Vec::<u32>::new());
        }
        let a = Array::from_slice(&[] as &[f32], &[shape[0], shape[1]], &d).unwrap();
        let b = Array::full(&[shape[1], 9], 1.0, DType::F32, &d).unwrap();
        let p = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(p, vec![0.0; shape[0] * 9], "{shape:?}");
    }
}

/// Sums, minima, sorts and top-k (every kernel that stages a row in
/// workgroup memory) over rows around the block sizes.
#[test]
fn reductions_sorts_and_topk_after_huge_values() {
    let d = device();
    let mut rng = Rng::new(602);
    let mut failures = Vec::new();
    for (rows, len) in [
        (1, 1),
        (5, 7),
        (3, 33),
        (2, 255),
        (2, 300),
        (1, 1000),
        (2, 1025),
        (1, 2049),
    ] {
        let v = rng.vec_f32(rows * len);
        let x = Array::from_slice(&v, &[rows, len], &d).unwrap();
        pollute(&d);
        let sum = x.sum(-1, false).unwrap().to_vec::<f32>().unwrap();
        pollute(&d);
        let min = x.min(-1, false).unwrap().to_vec::<f32>().unwrap();
        pollute(&d);
        let sorted = x.sort(Some(-1)).unwrap().to_vec::<f32>().unwrap();
        let k = len.min(64);
        pollute(&d);
        let (tv, ti) = x.topk(k, -1).unwrap();
        let (tv, ti) = (tv.to_vec::<f32>().unwrap(), ti.to_vec::<u32>().unwrap());
        // k = the whole row too (every list slot a real element).
        pollute(&d);
        let all = if len <= 64 {
            Some(x.topk(len, -1).unwrap().0.to_vec::<f32>().unwrap())
        } else {
            None
        };
        for r in 0..rows {
            let row = &v[r * len..(r + 1) * len];
            let s: f64 = row.iter().map(|&x| x as f64).sum();
            if (sum[r] as f64 - s).abs() > 1e-4 * (1.0 + len as f64) {
                failures.push(format!("sum {rows}x{len} row {r}: {} vs {s}", sum[r]));
            }
            let m = row.iter().copied().fold(f32::INFINITY, f32::min);
            if min[r] != m {
                failures.push(format!("min {rows}x{len} row {r}: {} vs {m}", min[r]));
            }
            let mut want = row.to_vec();
            want.sort_by(f32::total_cmp);
            if sorted[r * len..(r + 1) * len] != want[..] {
                failures.push(format!("sort {rows}x{len} row {r}"));
            }
            want.reverse();
            if tv[r * k..(r + 1) * k] != want[..k] {
                failures.push(format!("topk {k} of {rows}x{len} row {r}"));
            }
            for q in 0..k {
                if row[ti[r * k + q] as usize] != tv[r * k + q] {
                    failures.push(format!("topk index {rows}x{len} row {r} [{q}]"));
                }
            }
            if let Some(all) = &all
                && all[r * len..(r + 1) * len] != want[..]
            {
                failures.push(format!("topk {len} of {rows}x{len} row {r}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
