//! Ops whose values follow from the element's index: `eye`, `tril`,
//! `triu`, `one_hot`, `linspace`; against host references, at odd sizes,
//! on strided views and batches, in every dtype they take, with the errors
//! they name and nothing left behind.

mod common;

use common::{R, Rng, assert_empty, device};
use half::{bf16, f16};
use wgarray::{Array, DType, Error, Limit, Slice};

const DTYPES: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::U32,
    DType::Bool,
];

/// `v` as `dtype` would hold it, as f64 (the host reference's rounding).
fn as_dtype(v: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        DType::I32 => v as i32 as f64,
        DType::U32 => v as u32 as f64,
        DType::Bool => f64::from(u8::from(v != 0.0)),
    }
}

#[test]
fn eye_matches_the_reference_for_every_offset_and_dtype() -> R {
    let d = device();
    for (n, m) in [(1, 1), (7, 7), (7, 33), (33, 7), (0, 3)] {
        for k in [-40, -7, -1, 0, 1, 6, 32, 40] {
            for dtype in DTYPES {
                let e = Array::eye(n, Some(m), k, dtype, &d)?;
                assert_eq!(e.shape(), &[n, m]);
                assert_eq!(e.dtype(), dtype);
                let want: Vec<f64> = (0..n * m)
                    .map(|p| f64::from(u8::from((p % m) as isize - (p / m) as isize == k)))
                    .collect();
                assert_eq!(e.to_f64_vec()?, want, "eye({n}, {m}, {k}) {dtype}");
            }
        }
    }
    let sq = Array::eye(5, None, 0, DType::F32, &d)?;
    assert_eq!(sq.shape(), &[5, 5]);
    assert_eq!(sq.sum(wgarray::Axes::All, false)?.item::<f32>()?, 5.0);
    drop(sq);
    assert_empty(&d);
    Ok(())
}

/// `x` (row-major `[batch, n, m]`) through tril/triu with `k`, on the host.
fn triangle_ref(x: &[f64], n: usize, m: usize, k: isize, lower: bool) -> Vec<f64> {
    x.iter()
        .enumerate()
        .map(|(p, &v)| {
            let (i, j) = ((p / m) % n, p % m);
            let diff = j as isize - i as isize;
            let keep = if lower { diff <= k } else { diff >= k };
            if keep { v } else { 0.0 }
        })
        .collect()
}

#[test]
fn tril_and_triu_match_the_reference_on_views_batches_and_dtypes() -> R {
    let d = device();
    let mut rng = Rng::new(11);
    for (b, n, m) in [(1, 1, 1), (1, 7, 33), (3, 33, 7), (2, 5, 5)] {
        let len = b * n * m;
        let host: Vec<f32> = (0..len)
            .map(|_| (rng.f32() * 200.0 - 100.0).round() + 0.5)
            .collect();
        for dtype in DTYPES {
            // Dense, and the same values through a transposed view of a
            // [b, m, n] buffer (strides (n*m, 1, n)).
            let dense = Array::from_slice(&host, &[b, n, m], &d)?.astype(dtype)?;
            let mut t_host = vec![0.0f32; len];
            for (p, &v) in host.iter().enumerate() {
                let (bi, i, j) = (p / (n * m), (p / m) % n, p % m);
                t_host[bi * n * m + j * n + i] = v;
            }
            let view = Array::from_slice(&t_host, &[b, m, n], &d)?
                .astype(dtype)?
                .swapaxes(-1, -2)?;
            let want_x: Vec<f64> = host.iter().map(|&v| as_dtype(v as f64, dtype)).collect();
            for x in [&dense, &view] {
                for k in [-9, -1, 0, 1, 3, 40] {
                    let lo = x.tril(k)?;
                    let hi = x.triu(k)?;
                    assert_eq!(lo.dtype(), dtype);
                    assert_eq!(lo.shape(), &[b, n, m]);
                    assert_eq!(
                        lo.to_f64_vec()?,
                        triangle_ref(&want_x, n, m, k, true),
                        "tril({k}) of [{b}, {n}, {m}] {dtype}"
                    );
                    assert_eq!(
                        hi.to_f64_vec()?,
                        triangle_ref(&want_x, n, m, k, false),
                        "triu({k}) of [{b}, {n}, {m}] {dtype}"
                    );
                }
            }
        }
    }
    // A stepped slice, and an empty matrix.
    let x = Array::from_slice(
        &(0..64).map(|v| v as f32 + 1.0).collect::<Vec<_>>(),
        &[8, 8],
        &d,
    )?
    .slice(&[Slice::step(2), Slice::step(-3)])?;
    let hx: Vec<f64> = x.to_f64_vec()?;
    assert_eq!(x.tril(0)?.to_f64_vec()?, triangle_ref(&hx, 4, 3, 0, true));
    let e = Array::zeros(&[0, 4], DType::F32, &d)?;
    assert_eq!(e.triu(0)?.shape(), &[0, 4]);
    drop((x, e));
    assert_empty(&d);
    Ok(())
}

#[test]
fn one_hot_matches_the_reference_and_zeroes_out_of_range_indices() -> R {
    let d = device();
    let mut rng = Rng::new(12);
    for (shape, classes) in [
        (vec![7], 5),
        (vec![3, 11], 33),
        (vec![1025], 7),
        (vec![], 4),
    ] {
        let n: usize = shape.iter().product();
        // Indices in [-2, classes + 2): some out of range on both sides.
        let idx: Vec<i32> = (0..n)
            .map(|_| (rng.f32() * (classes + 4) as f32) as i32 - 2)
            .collect();
        for dtype in DTYPES {
            let r = Array::from_slice(&idx, &shape, &d)?.one_hot(classes, dtype)?;
            let mut want_shape = shape.clone();
            want_shape.push(classes);
            assert_eq!(r.shape(), &want_shape[..]);
            assert_eq!(r.dtype(), dtype);
            let want: Vec<f64> = (0..n * classes)
                .map(|p| f64::from(u8::from(idx[p / classes] == (p % classes) as i32)))
                .collect();
            assert_eq!(
                r.to_f64_vec()?,
                want,
                "one_hot {shape:?} x {classes} {dtype}"
            );
        }
    }
    // u32 indices, large ones included, through a stepped view.
    let u = Array::from_slice(&[0u32, 9, u32::MAX, 7, 1 << 31, 5, 3], &[7], &d)?
        .slice(&[Slice::step(2)])?;
    let r = u.one_hot(4, DType::I32)?;
    let want = [[1, 0, 0, 0], [0; 4], [0; 4], [0, 0, 0, 1]].concat();
    assert_eq!(r.to_vec::<i32>()?, want);
    // No classes, or no indices.
    assert_eq!(u.one_hot(0, DType::F32)?.shape(), &[4, 0]);
    let empty = Array::zeros(&[0], DType::I32, &d)?;
    assert_eq!(empty.one_hot(3, DType::F32)?.shape(), &[0, 3]);
    drop((u, r, empty));
    assert_empty(&d);
    Ok(())
}

#[test]
fn linspace_matches_numpys_formula() -> R {
    let d = device();
    for num in [0, 1, 2, 7, 33, 1025] {
        for (start, stop) in [(0.0, 1.0), (-3.5, 2.25), (10.0, -10.0), (1e-3, 7.0)] {
            for dtype in DTYPES {
                let x = Array::linspace(start, stop, num, dtype, &d)?;
                assert_eq!(x.shape(), &[num]);
                assert_eq!(x.dtype(), dtype);
                let step = (stop - start) / (num.max(2) - 1) as f64;
                let want: Vec<f64> = (0..num)
                    .map(|i| {
                        let v = if i + 1 == num && num > 1 {
                            stop
                        } else {
                            start + i as f64 * step
                        };
                        let v = if dtype.is_float() || dtype == DType::Bool {
                            v
                        } else {
                            v.floor()
                        };
                        as_dtype(v, dtype)
                    })
                    .collect();
                assert_eq!(
                    x.to_f64_vec()?,
                    want,
                    "linspace({start}, {stop}, {num}) {dtype}"
                );
            }
        }
    }
    // NumPy 2 floors into integers: -0.5 is -1, not 0.
    let i = Array::linspace(-1.0, 0.0, 3, DType::I32, &d)?;
    assert_eq!(i.to_vec::<i32>()?, vec![-1, -1, 0]);
    assert!(matches!(
        Array::linspace(0.0, f64::INFINITY, 3, DType::F32, &d),
        Err(Error::InvalidArgument(m)) if m.contains("`stop`")
    ));
    drop(i);
    assert_empty(&d);
    Ok(())
}

#[test]
fn grid_op_errors_name_the_op_and_leak_nothing() -> R {
    let d = device();
    let v = Array::ones(&[4], DType::F32, &d)?;
    for (r, op) in [(v.tril(0), "tril"), (v.triu(1), "triu")] {
        match r {
            Err(Error::InvalidArgument(m)) => assert!(m.starts_with(op), "{m}"),
            r => panic!("{op}: expected InvalidArgument, got {r:?}"),
        }
    }
    assert!(matches!(
        v.one_hot(3, DType::F32),
        Err(Error::DType {
            op: "one_hot",
            dtype: DType::F32,
            ..
        })
    ));
    let eight = Array::zeros(&[1; 8], DType::I32, &d)?;
    assert!(matches!(
        eight.one_hot(2, DType::F32),
        Err(Error::TooLarge {
            op: "one_hot",
            limit: Limit::Dimensions,
            ..
        })
    ));
    assert!(matches!(
        Array::eye(1 << 40, Some(1 << 40), 0, DType::F32, &d),
        Err(Error::TooLarge {
            op: "eye",
            limit: Limit::Elements,
            ..
        })
    ));
    // One row past the largest binding: refused before anything is made.
    let big = d.limits().max_storage_buffer_binding_size as usize;
    assert!(matches!(
        Array::linspace(0.0, 1.0, big, DType::F32, &d),
        Err(Error::TooLarge {
            op: "linspace",
            limit: Limit::StorageBinding,
            ..
        })
    ));
    drop((v, eight));
    assert_empty(&d);
    Ok(())
}
