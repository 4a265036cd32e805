//! `scatter_add` against a host reference: duplicate indices accumulate
//! (heavy contention on one element too), negative and out-of-range
//! indices, every axis, f32, f16, i32 and u32, broadcast and transposed
//! operands, empty updates, typed errors, lifetimes.

mod common;

use common::arrays::{f, i, of_dtype, round_to, u};
use common::reference::{ravel, unravel};
use common::{Rng, assert_empty, device, poison_pool};
use wgarray::{Array, DType, Error};

/// Host scatter-add of `upd` at `idx` (both of `ushape`) into `x` (`shape`).
fn reference(
    x: &[f64],
    shape: &[usize],
    idx: &[i64],
    upd: &[f64],
    ushape: &[usize],
    axis: usize,
) -> Vec<f64> {
    let mut out = x.to_vec();
    let len = shape[axis] as i64;
    for (p, (&j, &v)) in idx.iter().zip(upd).enumerate() {
        let mut c = unravel(p, ushape);
        let j = if j < 0 { j + len } else { j };
        c[axis] = j.clamp(0, len - 1) as usize;
        out[ravel(&c, shape)] += v;
    }
    out
}

#[test]
fn scatter_add_accumulates_duplicates_along_every_axis() {
    let d = device();
    let mut rng = Rng::new(8);
    let cases: &[(&[usize], &[usize], isize)] = &[
        (&[7, 33], &[20, 33], 0),
        (&[7, 33], &[7, 50], 1),
        (&[7, 33], &[3, 5], -1),
        (&[1025], &[1025], 0),
        (&[1], &[7], 0),
        (&[3, 7, 5], &[3, 9, 5], 1),
    ];
    for &(shape, ushape, axis) in cases {
        let a = axis.rem_euclid(shape.len() as isize) as usize;
        let n: usize = shape.iter().product();
        let m: usize = ushape.iter().product();
        let len = shape[a] as i32;
        let raw = rng.vec_i32(m, len + 2);
        let idx64: Vec<i64> = raw.iter().map(|&j| j as i64).collect();
        for dtype in [DType::F32, DType::F16, DType::I32, DType::U32] {
            let xv: Vec<f64> = (0..n).map(|_| (rng.next_u64() % 64) as f64).collect();
            let uv: Vec<f64> = (0..m).map(|_| (rng.next_u64() % 16) as f64).collect();
            let x = of_dtype(&d, &xv, shape, dtype);
            let up = of_dtype(&d, &uv, ushape, dtype);
            let y = x.scatter_add(&i(&d, &raw, ushape), &up, axis).unwrap();
            assert_eq!(y.shape(), shape);
            assert_eq!(y.dtype(), dtype);
            let want: Vec<f64> = reference(&xv, shape, &idx64, &uv, ushape, a)
                .into_iter()
                .map(|v| round_to(v, dtype))
                .collect();
            assert_eq!(
                y.to_f64_vec().unwrap(),
                want,
                "{shape:?} {ushape:?} {axis} {dtype}"
            );
        }
    }
    assert_empty(&d);
}

#[test]
fn float_sums_agree_with_the_host_to_rounding_under_contention() {
    let d = device();
    let mut rng = Rng::new(12);
    // 33 * 1025 updates into 7 rows, and all of them into one element.
    let uv: Vec<f32> = rng.vec_f32(33 * 1025);
    let raw: Vec<i32> = (0..33 * 1025)
        .map(|_| (rng.next_u64() % 7) as i32)
        .collect();
    let x = f(&d, &[0.5; 7 * 1025], &[7, 1025]);
    let y = x
        .scatter_add(&i(&d, &raw, &[33, 1025]), &f(&d, &uv, &[33, 1025]), 0)
        .unwrap();
    let uv64: Vec<f64> = uv.iter().map(|&v| v as f64).collect();
    let idx64: Vec<i64> = raw.iter().map(|&j| j as i64).collect();
    let want = reference(&[0.5; 7 * 1025], &[7, 1025], &idx64, &uv64, &[33, 1025], 0);
    for (g, w) in y.to_vec::<f32>().unwrap().iter().zip(&want) {
        assert!((*g as f64 - w).abs() < 1e-4, "{g} vs {w}");
    }
    let ones = Array::ones(&[33 * 1025], DType::F32, &d).unwrap();
    let zero = Array::zeros(&[1], DType::F32, &d).unwrap();
    let all = zero
        .scatter_add(&i(&d, &vec![0; 33 * 1025], &[33 * 1025]), &ones, 0)
        .unwrap();
    assert_eq!(all.to_vec::<f32>().unwrap(), vec![(33 * 1025) as f32]);
    drop((x, y, ones, zero, all));
    assert_empty(&d);
}

#[test]
fn broadcast_updates_transposed_indices_and_u32_indices() {
    let d = device();
    let mut rng = Rng::new(13);
    // A histogram: a scalar update broadcast against 1025 indices.
    let raw: Vec<u32> = (0..1025).map(|_| (rng.next_u64() % 9) as u32).collect();
    let h = Array::zeros(&[7], DType::I32, &d)
        .unwrap()
        .scatter_add(
            &u(&d, &raw, &[1025]),
            &Array::scalar(1, DType::I32, &d).unwrap(),
            0,
        )
        .unwrap();
    let mut want = vec![0i32; 7];
    for &j in &raw {
        want[(j as usize).min(6)] += 1;
    }
    assert_eq!(h.to_vec::<i32>().unwrap(), want);
    // Transposed indices [5, 7] from a [7, 5] buffer, along axis 1 of [5, 3].
    let base: Vec<i32> = rng.vec_i32(35, 4);
    let it = i(&d, &base, &[7, 5]).transpose();
    let host: Vec<i32> = it.to_vec().unwrap();
    let uv: Vec<f64> = (0..35).map(|p| p as f64).collect();
    let x = Array::zeros(&[5, 3], DType::F32, &d).unwrap();
    let y = x
        .scatter_add(&it, &of_dtype(&d, &uv, &[5, 7], DType::F32), 1)
        .unwrap();
    let idx64: Vec<i64> = host.iter().map(|&j| j as i64).collect();
    assert_eq!(
        y.to_f64_vec().unwrap(),
        reference(&[0.0; 15], &[5, 3], &idx64, &uv, &[5, 7], 1)
    );
    // Empty updates leave the array as it was.
    let e = x
        .scatter_add(&i(&d, &[], &[0, 3]), &f(&d, &[], &[0, 3]), 0)
        .unwrap();
    assert_eq!(e.to_vec::<f32>().unwrap(), vec![0.0; 15]);
    drop((h, it, x, y, e));
    assert_empty(&d);
}

#[test]
fn scatter_add_errors_are_typed() {
    let d = device();
    let x = f(&d, &[0.0; 6], &[2, 3]);
    let idx = i(&d, &[0, 1], &[1, 2]);
    let up = f(&d, &[1.0, 2.0], &[1, 2]);
    let op = |e: Result<Array, Error>| e.unwrap_err();
    assert!(matches!(
        op(x.scatter_add(&up, &up, 0)),
        Error::DType {
            op: "scatter_add",
            dtype: DType::F32,
            ..
        }
    ));
    for dtype in [DType::I8, DType::U8, DType::I16, DType::U16, DType::F64] {
        let Ok(y) = Array::zeros(&[2, 3], dtype, &d) else {
            continue; // f64 without SHADER_F64
        };
        assert!(matches!(
            op(y.scatter_add(&idx, &up, 0)),
            Error::OpDType { op: "scatter_add", dtype: t, .. } if t == dtype
        ));
        // put_along_axis's indices broadcast against the array: [1, 3].
        assert!(matches!(
            op(y.put_along_axis(&i(&d, &[0, 1, 1], &[1, 3]), &f(&d, &[1.0], &[1, 1]), 0)),
            Error::OpDType { op: "put_along_axis", dtype: t, .. } if t == dtype
        ));
    }
    let b = Array::zeros(&[2, 3], DType::Bool, &d).unwrap();
    assert!(matches!(
        op(b.scatter_add(&idx, &up, 0)),
        Error::DType {
            op: "scatter_add",
            dtype: DType::Bool,
            ..
        }
    ));
    assert!(matches!(
        op(x.scatter_add(&idx, &up, 2)),
        Error::InvalidAxis {
            op: "scatter_add",
            ..
        }
    ));
    assert!(matches!(
        op(x.scatter_add(&i(&d, &[0, 1], &[2]), &up, 0)),
        Error::InvalidArgument(m) if m.contains("scatter_add")
    ));
    assert!(matches!(
        op(x.scatter_add(&i(&d, &[0; 8], &[2, 4]), &f(&d, &[0.0; 8], &[2, 4]), 0)),
        Error::ShapeMismatch {
            op: "scatter_add",
            ..
        }
    ));
    assert!(matches!(
        op(x.scatter_add(&idx, &f(&d, &[0.0; 3], &[3]), 0)),
        Error::ShapeMismatch {
            op: "scatter_add",
            ..
        }
    ));
    let empty = f(&d, &[], &[0, 3]);
    assert!(matches!(
        op(empty.scatter_add(&idx, &up, 0)),
        Error::InvalidArgument(m) if m.contains("empty")
    ));
    drop((x, idx, up, b, empty));
    assert_empty(&d);
}

#[test]
fn put_along_axis_writes_values_and_one_duplicate_wins() {
    let d = device();
    let mut rng = Rng::new(21);
    // Distinct indices per row (a permutation prefix): exact against the host.
    for dtype in [DType::F32, DType::BF16, DType::I32, DType::Bool] {
        let (rows, len, k) = (7usize, 33usize, 5usize);
        let xv: Vec<f64> = (0..rows * len)
            .map(|_| (rng.next_u64() % 2) as f64)
            .collect();
        let mut raw = Vec::new();
        for _ in 0..rows {
            let mut perm: Vec<i32> = (0..len as i32).collect();
            for j in 0..k {
                let s = j + (rng.next_u64() as usize) % (len - j);
                perm.swap(j, s);
            }
            // Half of them as negative indices from the end.
            raw.extend(
                perm[..k]
                    .iter()
                    .map(|&j| if j % 2 == 1 { j - len as i32 } else { j }),
            );
        }
        let vv: Vec<f64> = (0..rows * k)
            .map(|_| 1.0 - (rng.next_u64() % 2) as f64)
            .collect();
        let x = of_dtype(&d, &xv, &[rows, len], dtype);
        let y = x
            .put_along_axis(
                &i(&d, &raw, &[rows, k]),
                &of_dtype(&d, &vv, &[rows, k], dtype),
                -1,
            )
            .unwrap();
        let mut want = xv.clone();
        for r in 0..rows {
            for j in 0..k {
                let c = raw[r * k + j].rem_euclid(len as i32) as usize;
                want[r * len + c] = vv[r * k + j];
            }
        }
        assert_eq!(y.dtype(), dtype);
        assert_eq!(y.to_f64_vec().unwrap(), want, "{dtype}");
    }
    // Duplicates: the written element holds one of the candidates; a
    // transposed source is read in place.
    let base = f(&d, &rng.vec_f32(33 * 7), &[33, 7]);
    let xt = base.transpose(); // [7, 33]
    let host = xt.to_vec::<f32>().unwrap();
    let idx = i(&d, &[3; 7 * 4], &[7, 4]);
    let vals: Vec<f32> = (0..28).map(|p| 100.0 + p as f32).collect();
    let y = xt
        .put_along_axis(&idx, &f(&d, &vals, &[7, 4]), 1)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for r in 0..7 {
        for c in 0..33 {
            let g = y[r * 33 + c];
            if c == 3 {
                assert!(vals[r * 4..r * 4 + 4].contains(&g), "row {r}: {g}");
            } else {
                assert_eq!(g, host[r * 33 + c]);
            }
        }
    }
    // Errors name the op; empty indices change nothing.
    assert!(matches!(
        xt.put_along_axis(&f(&d, &[0.0], &[1, 1]), &f(&d, &[0.0], &[1, 1]), 1),
        Err(Error::DType {
            op: "put_along_axis",
            ..
        })
    ));
    assert!(matches!(
        xt.put_along_axis(&idx, &f(&d, &[0.0; 5], &[5]), 1),
        Err(Error::ShapeMismatch {
            op: "put_along_axis",
            ..
        })
    ));
    let e = xt
        .put_along_axis(&i(&d, &[], &[7, 0]), &f(&d, &[], &[7, 0]), 1)
        .unwrap();
    assert_eq!(e.to_vec::<f32>().unwrap(), host);
    drop((base, xt, idx, e));
    assert_empty(&d);
}

#[test]
fn put_along_axis_writes_where_values_broadcast_the_indices() {
    // Indices [2, 1] broadcast by values [2, 3]: each whole row is
    // written, not only its first column (the mark of written places once
    // had the indices' shape alone).
    let d = device();
    let x = f(&d, &[0.0; 9], &[3, 3]);
    let idx = i(&d, &[2, 0], &[2, 1]);
    let v = f(&d, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let y = x.put_along_axis(&idx, &v, 0).unwrap();
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![4.0, 5.0, 6.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]
    );
    drop((x, idx, v, y));
    assert_empty(&d);
}

/// NumPy's `put_along_axis` on the host: `indices` (shape `ishape`) and
/// `values` (shape `vshape`, at most `shape`'s rank) broadcast together,
/// then against `x` (shape `shape`) on every axis but `axis`; each position
/// writes `values` at its coordinates with `axis` replaced by the index
/// (negative from the end). Where `x`'s axis has length 1 and theirs is
/// longer, they all write one element: the candidates are returned beside
/// the result, per element, for such writes.
#[allow(clippy::type_complexity)]
fn put_reference(
    x: &[f64],
    shape: &[usize],
    idx: &[i64],
    ishape: &[usize],
    vals: &[f64],
    vshape: &[usize],
    axis: usize,
) -> (Vec<f64>, Vec<Vec<f64>>) {
    let nd = shape.len();
    let vfull: Vec<usize> = std::iter::repeat_n(1, nd - vshape.len())
        .chain(vshape.iter().copied())
        .collect();
    let b: Vec<usize> = (0..nd).map(|d| ishape[d].max(vfull[d])).collect();
    let grid: Vec<usize> = (0..nd)
        .map(|d| if d == axis { b[d] } else { b[d].max(shape[d]) })
        .collect();
    let at = |s: &[usize], c: &[usize]| {
        let c: Vec<usize> = c
            .iter()
            .zip(s)
            .map(|(&i, &n)| if n == 1 { 0 } else { i })
            .collect();
        ravel(&c, s)
    };
    let mut out = x.to_vec();
    let mut candidates = vec![Vec::new(); x.len()];
    let len = shape[axis] as i64;
    for p in 0..grid.iter().product() {
        let u = unravel(p, &grid);
        let j = idx[at(ishape, &u)];
        let mut c: Vec<usize> = u.iter().zip(shape).map(|(&i, &n)| i.min(n - 1)).collect();
        c[axis] = (if j < 0 { j + len } else { j }).clamp(0, len - 1) as usize;
        let v = vals[at(&vfull, &u)];
        let k = ravel(&c, shape);
        out[k] = v;
        candidates[k].push(v);
    }
    (out, candidates)
}

#[test]
fn put_along_axis_broadcasts_indices_and_values_against_the_array() {
    let d = device();
    // MLX's test_put_along_axis: indices [1, 1, 4, 1] on zeros [1, 1, 8, 32]
    // along -2 write every column of rows 0, 2, 4 and 5 (column 0 only
    // before).
    let source = Array::zeros(&[1, 1, 8, 32], DType::F32, &d).unwrap();
    let indices = i(&d, &[0, 2, 4, 5], &[4]).reshape(&[1, 1, 4, 1]).unwrap();
    let update = Array::scalar(1.0, DType::F32, &d).unwrap();
    let out = source.put_along_axis(&indices, &update, -2).unwrap();
    let got = out.to_vec::<f32>().unwrap();
    for r in 0..8 {
        let want = if [0, 2, 4, 5].contains(&r) { 1.0 } else { 0.0 };
        assert_eq!(&got[r * 32..r * 32 + 32], &[want; 32][..], "row {r}");
    }
    // take_along_axis reads back what was written, with the same
    // broadcast.
    let back = out.take_along_axis(&indices, Some(-2)).unwrap();
    assert_eq!(back.shape(), &[1, 1, 4, 32]);
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.0; 128]);
    drop((source, indices, update, out, back));

    // MLX's loop over axes (None, 0, 1, 2) on arange(16) as [2, 2, 4] i32,
    // with distinct indices broadcast to the values' shape.
    let mut rng = Rng::new(36);
    let a: Vec<f64> = (0..16).map(f64::from).collect();
    for ax in [None, Some(0usize), Some(1), Some(2)] {
        let x = of_dtype(&d, &a, &[2, 2, 4], DType::I32);
        let ax = match ax {
            None => {
                let mut perm: Vec<i32> = (0..16).collect();
                for k in (1..16).rev() {
                    perm.swap(k, (rng.next_u64() % (k as u64 + 1)) as usize);
                }
                let v: Vec<f64> = (0..16).map(|_| (rng.next_u64() % 100) as f64).collect();
                let y = x
                    .ravel()
                    .put_along_axis(
                        &i(&d, &perm, &[16]),
                        &of_dtype(&d, &v, &[16], DType::I32),
                        0,
                    )
                    .unwrap();
                let mut want = a.clone();
                for (k, &p) in perm.iter().enumerate() {
                    want[p as usize] = v[k];
                }
                assert_eq!(y.to_f64_vec().unwrap(), want, "axis None");
                continue;
            }
            Some(ax) => ax,
        };
        let mut shape = vec![2usize, 2, 4];
        shape[ax] = 2;
        let len = [2usize, 2, 4][ax] as i32;
        let first = (rng.next_u64() % len as u64) as i32;
        let second = (first + 1 + (rng.next_u64() % (len as u64 - 1)) as i32) % len;
        // np.expand_dims(idx, range(1, 2 - ax + 1)), then broadcast_to.
        let mut ishape = vec![2usize];
        ishape.extend(std::iter::repeat_n(1, 2 - ax));
        let idx = i(&d, &[first, second], &ishape)
            .broadcast_to(&shape)
            .unwrap();
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n).map(|_| (rng.next_u64() % 100) as f64).collect();
        let y = x
            .put_along_axis(&idx, &of_dtype(&d, &v, &shape, DType::I32), ax as isize)
            .unwrap();
        let idx_host: Vec<i64> = idx
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect();
        let (want, _) = put_reference(&a, &[2, 2, 4], &idx_host, &shape, &v, &shape, ax);
        assert_eq!(y.to_f64_vec().unwrap(), want, "axis {ax}");
    }

    // Every way indices and values broadcast against a [5, 7, 33] array,
    // distinct indices along the axis, negative ones too, on a poisoned
    // pool; and where the array's axis has length 1 ([1, 7, 33] against
    // indices 5 long there), one of the candidates.
    poison_pool(&d, 5 * 7 * 33 * 4);
    // (array, indices, values, axis) shapes.
    type Case<'a> = (&'a [usize], &'a [usize], &'a [usize], usize);
    let cases: &[Case] = &[
        (&[5, 7, 33], &[5, 3, 1], &[1], 1),
        (&[5, 7, 33], &[1, 1, 4], &[5, 1, 4], 2),
        (&[5, 7, 33], &[2, 7, 1], &[33], 0),
        (&[5, 7, 33], &[1, 2, 1], &[1, 1, 2, 33], 1),
        (&[1, 7, 33], &[5, 3, 1], &[5, 3, 33], 1),
    ];
    for &(shape, ishape, vshape, axis) in cases {
        let n: usize = shape.iter().product();
        let len = shape[axis] as i32;
        // Distinct along the axis for each of the other coordinates.
        let mut raw = vec![0i32; ishape.iter().product()];
        let outer: Vec<usize> = (0..ishape.len()).filter(|&k| k != axis).collect();
        let lines: usize = outer.iter().map(|&k| ishape[k]).product();
        for line in 0..lines {
            let mut perm: Vec<i32> = (0..len).collect();
            for k in (1..len as usize).rev() {
                perm.swap(k, (rng.next_u64() % (k as u64 + 1)) as usize);
            }
            let mut rest = line;
            let mut c = vec![0usize; ishape.len()];
            for &k in outer.iter().rev() {
                c[k] = rest % ishape[k];
                rest /= ishape[k];
            }
            for (j, &p) in perm.iter().enumerate().take(ishape[axis]) {
                c[axis] = j;
                raw[ravel(&c, ishape)] = if p % 2 == 1 { p - len } else { p };
            }
        }
        let xv: Vec<f64> = (0..n).map(|_| rng.f32() as f64).collect();
        let vsize: usize = vshape.iter().product();
        let vv: Vec<f64> = (0..vsize).map(|_| 10.0 + rng.f32() as f64).collect();
        let x = of_dtype(&d, &xv, shape, DType::F32);
        let y = x
            .put_along_axis(
                &i(&d, &raw, ishape),
                &of_dtype(&d, &vv, vshape, DType::F32),
                axis as isize,
            )
            .unwrap();
        assert_eq!(y.shape(), shape);
        let idx64: Vec<i64> = raw.iter().map(|&j| j as i64).collect();
        let vshape_nd: Vec<usize> = vshape[vshape.len().saturating_sub(shape.len())..].to_vec();
        let (want, candidates) = put_reference(
            &xv.iter().map(|&v| v as f32 as f64).collect::<Vec<_>>(),
            shape,
            &idx64,
            ishape,
            &vv.iter().map(|&v| v as f32 as f64).collect::<Vec<_>>(),
            &vshape_nd,
            axis,
        );
        let got = y.to_f64_vec().unwrap();
        for k in 0..n {
            if candidates[k].len() > 1 {
                assert!(
                    candidates[k].contains(&got[k]),
                    "{shape:?} {ishape:?} at {k}"
                );
            } else {
                assert_eq!(got[k], want[k], "{shape:?} {ishape:?} {vshape:?} at {k}");
            }
        }
    }

    // Indices shorter than the array but longer than 1 on another axis do
    // not broadcast (NumPy raises too); scatter_add keeps PyTorch's rule.
    let x = f(&d, &[0.0; 12], &[3, 4]);
    let idx = i(&d, &[0, 1, 2, 0], &[2, 2]);
    assert!(matches!(
        x.put_along_axis(&idx, &f(&d, &[1.0; 4], &[2, 2]), 0),
        Err(Error::ShapeMismatch {
            op: "put_along_axis",
            ..
        })
    ));
    let s = x
        .scatter_add(&idx, &f(&d, &[1.0; 4], &[2, 2]), 0)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(
        s,
        vec![1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    );
    drop((x, idx));
    assert_empty(&d);
}
