//! The position-built compositions against host references: `eye`,
//! `linspace`, `tril`, `triu`, `one_hot`, `take_along_axis`, `clip`, on
//! odd sizes (1, 7, 33, 1025), views (transposed, stepped, broadcast),
//! empty arrays, several dtypes, and their typed errors.

mod common;

use common::arrays::{f, i, of_dtype, random_values, round_to, u};
use common::reference::{ravel, unravel};
use common::{Rng, assert_empty, device};
use wgarray::{Array, DType, Error, Slice};

#[test]
fn eye_has_ones_on_diagonal_k() {
    let d = device();
    for (n, m) in [(1usize, 1usize), (7, 7), (7, 33), (33, 1), (0, 5)] {
        for k in [-40isize, -3, -1, 0, 1, 5, 40] {
            for dtype in [DType::F32, DType::I32, DType::Bool, DType::BF16] {
                let e = Array::eye(n, Some(m), k, dtype, &d).unwrap();
                assert_eq!(e.shape(), &[n, m]);
                assert_eq!(e.dtype(), dtype);
                let want: Vec<f64> = (0..n * m)
                    .map(|p| ((p % m) as isize - (p / m) as isize == k) as u8 as f64)
                    .collect();
                assert_eq!(e.to_f64_vec().unwrap(), want, "eye({n}, {m}, {k}) {dtype}");
            }
        }
    }
    let e = Array::eye(3, None, 0, DType::F32, &d).unwrap();
    assert_eq!(e.shape(), &[3, 3]);
    drop(e);
    assert_empty(&d);
}

#[test]
fn linspace_matches_numpy() {
    let d = device();
    for num in [0usize, 1, 2, 7, 33, 1025] {
        for (start, stop) in [(0.0, 1.0), (-3.5, 7.25), (10.0, -2.0), (1.0, 1.0)] {
            let y = Array::linspace(start, stop, num, DType::F32, &d).unwrap();
            assert_eq!(y.shape(), &[num]);
            let got = y.to_vec::<f32>().unwrap();
            let step = (stop - start) / (num.max(2) - 1) as f64;
            for (j, &g) in got.iter().enumerate() {
                let want = if j + 1 == num && num > 1 {
                    stop
                } else {
                    start + j as f64 * step
                };
                let tol = 4.0 * f32::EPSILON as f64 * start.abs().max(stop.abs()).max(1.0);
                assert!(
                    (g as f64 - want).abs() <= tol,
                    "linspace({start}, {stop}, {num})[{j}] = {g}, want {want}"
                );
            }
            if num > 1 {
                assert_eq!(got[num - 1], stop as f32, "the last value is stop exactly");
            }
        }
    }
    // Integer dtypes take the floor (NumPy 2).
    let y = Array::linspace(-2.0, 2.0, 5 + 4, DType::I32, &d).unwrap();
    assert_eq!(
        y.to_vec::<i32>().unwrap(),
        vec![-2, -2, -1, -1, 0, 0, 1, 1, 2]
    );
    let h = Array::linspace(0.0, 1.0, 7, DType::F16, &d).unwrap();
    let want: Vec<f64> = (0..7)
        .map(|j| round_to(j as f64 / 6.0, DType::F16))
        .collect();
    assert_eq!(h.to_f64_vec().unwrap(), want);
    for bad in [f64::NAN, f64::INFINITY] {
        assert!(matches!(
            Array::linspace(0.0, bad, 3, DType::F32, &d),
            Err(Error::InvalidArgument(m)) if m.contains("linspace")
        ));
    }
    drop((y, h));
    assert_empty(&d);
}

/// Host tril (`lower`) or triu of `v` of `shape`, diagonal `k`.
fn triangle_ref(v: &[f64], shape: &[usize], k: isize, lower: bool) -> Vec<f64> {
    let nd = shape.len();
    v.iter()
        .enumerate()
        .map(|(p, &x)| {
            let ix = unravel(p, shape);
            let (r, c) = (ix[nd - 2] as isize, ix[nd - 1] as isize);
            let keep = if lower { c - r <= k } else { c - r >= k };
            if keep { x } else { 0.0 }
        })
        .collect()
}

#[test]
fn tril_and_triu_on_batches_views_and_empty_arrays() {
    let d = device();
    let mut rng = Rng::new(3);
    for shape in [
        vec![1usize, 1],
        vec![7, 33],
        vec![33, 7],
        vec![3, 7, 33],
        vec![2, 0, 3],
        vec![0, 4],
    ] {
        for dtype in [DType::F32, DType::I32, DType::BF16, DType::Bool] {
            let n: usize = shape.iter().product();
            let v = random_values(&mut rng, n, dtype);
            let x = of_dtype(&d, &v, &shape, dtype);
            for k in [-40isize, -2, 0, 3, 40] {
                for lower in [true, false] {
                    let y = if lower { x.tril(k) } else { x.triu(k) }.unwrap();
                    assert_eq!(y.shape(), &shape[..]);
                    assert_eq!(y.dtype(), dtype);
                    assert_eq!(
                        y.to_f64_vec().unwrap(),
                        triangle_ref(&v, &shape, k, lower),
                        "{shape:?} {dtype} k={k} lower={lower}"
                    );
                }
            }
        }
    }
    // A transposed, stepped view: [40, 7] read as [7, 20] stepped columns.
    let v: Vec<f64> = (0..40 * 14).map(|_| rng.f32() as f64).collect();
    let base = of_dtype(&d, &v, &[40, 14], DType::F32);
    let view = base
        .transpose()
        .slice(&[Slice::step(2), Slice::step(-2)])
        .unwrap(); // [7, 20]
    let host = view.to_f64_vec().unwrap();
    assert_eq!(
        view.tril(1).unwrap().to_f64_vec().unwrap(),
        triangle_ref(&host, &[7, 20], 1, true)
    );
    assert_eq!(
        view.triu(-1).unwrap().to_f64_vec().unwrap(),
        triangle_ref(&host, &[7, 20], -1, false)
    );
    // NaN outside the triangle becomes 0, inside stays NaN.
    let x = f(&d, &[f32::NAN, f32::NAN, f32::NAN, 1.0], &[2, 2]);
    let t = x.tril(0).unwrap().to_vec::<f32>().unwrap();
    assert!(t[0].is_nan() && t[1] == 0.0 && t[2].is_nan() && t[3] == 1.0);
    for bad in [
        f(&d, &[1.0], &[1]),
        Array::scalar(1.0, DType::F32, &d).unwrap(),
    ] {
        assert!(matches!(bad.tril(0), Err(Error::InvalidArgument(m)) if m.contains("tril")));
        assert!(matches!(bad.triu(0), Err(Error::InvalidArgument(m)) if m.contains("triu")));
    }
    drop((base, view, x));
    assert_empty(&d);
}

#[test]
fn one_hot_marks_each_index_and_zeroes_out_of_range_ones() {
    let d = device();
    let mut rng = Rng::new(9);
    for classes in [1usize, 7, 33] {
        let idx = rng.vec_i32(33 * 7, classes as i32 + 2);
        let x = i(&d, &idx, &[33, 7]).transpose(); // [7, 33] view
        let host: Vec<i32> = x.to_vec().unwrap();
        for dtype in [DType::F32, DType::I32, DType::F16] {
            let y = Array::one_hot(&x, classes, dtype).unwrap();
            assert_eq!(y.shape(), &[7, 33, classes]);
            assert_eq!(y.dtype(), dtype);
            let want: Vec<f64> = host
                .iter()
                .flat_map(|&j| (0..classes).map(move |c| (j == c as i32) as u8 as f64))
                .collect();
            assert_eq!(y.to_f64_vec().unwrap(), want, "{classes} classes {dtype}");
        }
    }
    let x = u(&d, &[0, 4, 2, u32::MAX], &[4]);
    let y = Array::one_hot(&x, 3, DType::U32).unwrap();
    assert_eq!(
        y.to_vec::<u32>().unwrap(),
        vec![1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    );
    let y0 = Array::one_hot(&x, 0, DType::F32).unwrap();
    assert_eq!(y0.shape(), &[4, 0]);
    assert!(y0.to_vec::<f32>().unwrap().is_empty());
    assert!(matches!(
        Array::one_hot(&f(&d, &[1.0], &[1]), 3, DType::F32),
        Err(Error::DType { op: "one_hot", .. })
    ));
    drop((x, y, y0));
    assert_empty(&d);
}

/// Host take_along_axis of `v` (`shape`) with `idx` (`ishape`, broadcast
/// to `out`) along `axis`; indices wrapped once and clamped.
fn take_along_ref(
    v: &[f64],
    shape: &[usize],
    idx: &[i64],
    ishape: &[usize],
    out: &[usize],
    axis: usize,
) -> Vec<f64> {
    let n: usize = out.iter().product();
    let len = shape[axis] as i64;
    (0..n)
        .map(|p| {
            let o = unravel(p, out);
            let bi: Vec<usize> = o
                .iter()
                .zip(ishape)
                .map(|(&c, &s)| if s == 1 { 0 } else { c })
                .collect();
            let mut j = idx[ravel(&bi, ishape)];
            if j < 0 {
                j += len;
            }
            let j = j.clamp(0, len - 1) as usize;
            let mut src: Vec<usize> = o
                .iter()
                .zip(shape)
                .map(|(&c, &s)| if s == 1 { 0 } else { c })
                .collect();
            src[axis] = j;
            v[ravel(&src, shape)]
        })
        .collect()
}

#[test]
fn take_along_axis_matches_the_host_on_views_and_broadcasts() {
    let d = device();
    let mut rng = Rng::new(5);
    let cases: &[(&[usize], &[usize], isize)] = &[
        (&[7, 33], &[7, 5], 1),
        (&[7, 33], &[4, 33], 0),
        (&[7, 33], &[1, 9], -1),
        (&[1, 33], &[7, 3], 1),
        (&[3, 7, 33], &[3, 7, 1], 2),
        (&[1025], &[1025], 0),
        (&[5, 1], &[5, 7], 1),
    ];
    for &(shape, ishape, axis) in cases {
        let a = axis.rem_euclid(shape.len() as isize) as usize;
        let len = shape[a] as i32;
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n).map(|_| rng.f32() as f64).collect();
        let x = of_dtype(&d, &v, shape, DType::F32);
        let ni: usize = ishape.iter().product();
        // Indices in [-len - 2, len + 2): negatives wrap, the rest clamp.
        let raw = rng.vec_i32(ni, len + 2);
        let idx = i(&d, &raw, ishape);
        let mut out: Vec<usize> = shape.to_vec();
        out[a] = ishape[a];
        let out: Vec<usize> = out.iter().zip(ishape).map(|(&s, &t)| s.max(t)).collect();
        let raw64: Vec<i64> = raw.iter().map(|&j| j as i64).collect();
        let want = take_along_ref(&v, shape, &raw64, ishape, &out, a);
        let y = x.take_along_axis(&idx, axis).unwrap();
        assert_eq!(y.shape(), &out[..]);
        assert_eq!(y.to_f64_vec().unwrap(), want, "{shape:?} {ishape:?} {axis}");
    }
    // A transposed source, u32 indices, an integer dtype.
    let v: Vec<f64> = (0..33 * 7).map(|p| p as f64 - 100.0).collect();
    let base = of_dtype(&d, &v, &[33, 7], DType::I32);
    let xt = base.transpose(); // [7, 33]
    let host = xt.to_f64_vec().unwrap();
    let raw: Vec<u32> = (0..7 * 4).map(|_| (rng.next_u64() % 40) as u32).collect();
    let uidx = u(&d, &raw, &[7, 4]);
    let raw64: Vec<i64> = raw.iter().map(|&j| j as i64).collect();
    assert_eq!(
        xt.take_along_axis(&uidx, 1).unwrap().to_f64_vec().unwrap(),
        take_along_ref(&host, &[7, 33], &raw64, &[7, 4], &[7, 4], 1)
    );
    // axis = None reads the flattened array.
    let idx = i(&d, &[0, -1, 5, 230], &[4]);
    assert_eq!(
        xt.take_along_axis(&idx, None)
            .unwrap()
            .to_f64_vec()
            .unwrap(),
        vec![host[0], host[230], host[5], host[230]]
    );
    // Empty indices, and an empty axis with empty indices.
    let e = xt.take_along_axis(&i(&d, &[], &[7, 0]), 1).unwrap();
    assert_eq!(e.shape(), &[7, 0]);
    assert!(e.to_f64_vec().unwrap().is_empty());
    drop((base, xt, uidx, idx, e));
    assert_empty(&d);
}

#[test]
fn take_along_axis_errors_are_typed() {
    let d = device();
    let x = f(&d, &[1.0; 6], &[2, 3]);
    let good = i(&d, &[0, 1], &[2, 1]);
    assert!(matches!(
        x.take_along_axis(&f(&d, &[0.0, 1.0], &[2, 1]), 1),
        Err(Error::DType {
            op: "take_along_axis",
            ..
        })
    ));
    assert!(matches!(
        x.take_along_axis(&good, 2),
        Err(Error::InvalidAxis {
            op: "take_along_axis",
            axis: 2,
            ndim: 2
        })
    ));
    assert!(matches!(
        x.take_along_axis(&i(&d, &[0, 1], &[2]), 1),
        Err(Error::InvalidArgument(m)) if m.contains("take_along_axis")
    ));
    assert!(matches!(
        x.take_along_axis(&good, None),
        Err(Error::InvalidArgument(m)) if m.contains("take_along_axis")
    ));
    assert!(matches!(
        x.take_along_axis(&i(&d, &[0; 9], &[3, 3]), 1),
        Err(Error::ShapeMismatch {
            op: "take_along_axis",
            ..
        })
    ));
    let empty = f(&d, &[], &[2, 0]);
    assert!(matches!(
        empty.take_along_axis(&good, 1),
        Err(Error::InvalidArgument(m)) if m.contains("empty")
    ));
    drop((x, good, empty));
    assert_empty(&d);
}

#[test]
fn clip_limits_values_and_keeps_nan() {
    let d = device();
    let mut rng = Rng::new(11);
    let inf = f64::INFINITY;
    for n in [1usize, 7, 33, 1025] {
        let v: Vec<f32> = rng
            .vec_f32(n)
            .iter()
            .enumerate()
            .map(|(j, &x)| if j % 13 == 5 { f32::NAN } else { x * 4.0 })
            .collect();
        let x = f(&d, &v, &[n]);
        for (lo, hi) in [(-1.0, 2.0), (-inf, 0.5), (0.25, inf), (1.0, -1.0)] {
            let y = x.clip(lo, hi).unwrap();
            assert_eq!(y.dtype(), DType::F32);
            let got = y.to_vec::<f32>().unwrap();
            for (g, &w) in got.iter().zip(&v) {
                let want = if w.is_nan() {
                    f64::NAN
                } else {
                    (w as f64).max(lo).min(hi)
                };
                assert!(
                    (g.is_nan() && want.is_nan()) || *g as f64 == want,
                    "clip({w}, {lo}, {hi}) = {g}, want {want}"
                );
            }
        }
    }
    // Scalars are weak: integer bounds keep i32, float ones give f32
    // (NEP 50); a stepped view.
    let x = i(&d, &(-10..10).collect::<Vec<_>>(), &[20]);
    let s = x.slice(&[Slice::step(-3)]).unwrap();
    let y = s.clip(-4, 3).unwrap();
    assert_eq!(y.dtype(), DType::I32);
    assert_eq!(y.to_vec::<i32>().unwrap(), vec![3, 3, 3, 0, -3, -4, -4]);
    let yf = s.clip(-4.5, 3.0).unwrap();
    assert_eq!(yf.dtype(), DType::F32);
    assert_eq!(
        yf.to_vec::<f32>().unwrap(),
        vec![3.0, 3.0, 3.0, 0.0, -3.0, -4.5, -4.5]
    );
    // Array bounds broadcast: per-column limits on a transposed [3, 4].
    let m: Vec<f32> = (0..12).map(|p| p as f32 - 6.0).collect();
    let mt = f(&d, &m, &[4, 3]).transpose();
    let lo = f(&d, &[-5.0, -1.0, 0.0, 2.0], &[4]);
    let z = mt.clip(&lo, 3.0).unwrap();
    assert_eq!(z.shape(), &[3, 4]);
    let want: Vec<f32> = (0..12)
        .map(|p| {
            m[(p % 4) * 3 + p / 4]
                .max([-5.0, -1.0, 0.0, 2.0][p % 4])
                .min(3.0)
        })
        .collect();
    assert_eq!(z.to_vec::<f32>().unwrap(), want);
    let e = f(&d, &[], &[0, 3]).clip(0.0, 1.0).unwrap();
    assert_eq!(e.shape(), &[0, 3]);
    // Errors name clip: a bound u32 cannot hold, a bound that does not
    // broadcast.
    let ux = u(&d, &[1, 7], &[2]);
    assert!(matches!(
        ux.clip(-1, 5),
        Err(Error::InvalidArgument(m)) if m.contains("clip")
    ));
    assert!(matches!(
        mt.clip(f(&d, &[0.0; 3], &[3]), 1.0),
        Err(Error::ShapeMismatch { op: "clip", .. })
    ));
    drop((mt, lo, z, ux, yf));
    drop((x, s, y, e));
    assert_empty(&d);
}
