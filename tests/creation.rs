//! Arrays made from arrays (zeros_like, diag, diagonal, trace, tile,
//! repeat, meshgrid, pad, roll, broadcast_arrays, atleast_nd), the axis
//! arguments added with them (moveaxis, expand_dims with several axes,
//! flatten(start, end), concatenate of flattened inputs, softmax over
//! several axes) and the products outer, inner, tensordot: each against a
//! host reference written from NumPy's definition, on odd sizes, every
//! dtype, dense and non-contiguous inputs (transposed, step-sliced,
//! reversed, broadcast) and empty arrays; each typed error, with nothing
//! left behind.

mod common;

use common::host::{Host, dense, layouts, read, upload};
use common::reference::unravel;
use common::word_dtypes;
use common::{Rng, assert_empty, device};
use wgarray::{Array, DType, Error, Indexing, PadMode, Slice};

/// Shapes every data-movement op is tried on (odd sizes, 1, empty).
const SHAPES: [&[usize]; 5] = [&[7], &[1, 33], &[5, 3, 2], &[3, 0], &[2, 7, 3]];

/// Run `check` on every dtype, every shape and every layout of a random
/// input holding small integers (exact in every dtype).
fn each_input(mut check: impl FnMut(&str, DType, &Host, &Array)) {
    let d = device();
    let mut rng = Rng::new(21);
    for dtype in word_dtypes() {
        for shape in SHAPES {
            let h = Host::random(shape, dtype, &mut rng);
            for (name, x) in layouts(&d, &h, dtype) {
                check(name, dtype, &h, &x);
            }
        }
    }
}

fn assert_host(got: &Array, want: &Host, what: &str) {
    assert_eq!(got.shape(), &want.shape[..], "{what}: shape");
    let g = read(got);
    assert_eq!(g.data, want.data, "{what}: values");
}

#[test]
fn like_constructors_keep_shape_and_dtype() {
    let d = device();
    for dtype in word_dtypes() {
        for shape in SHAPES {
            let x = Array::zeros(shape, dtype, &d).unwrap();
            let n: usize = shape.iter().product();
            for (got, v) in [
                (x.zeros_like(), 0.0),
                (x.ones_like(), 1.0),
                (
                    x.full_like(3.0).unwrap(),
                    if dtype == DType::Bool { 1.0 } else { 3.0 },
                ),
            ] {
                assert_eq!(got.dtype(), dtype);
                assert_eq!(got.shape(), shape);
                assert_eq!(got.to_f64_vec().unwrap(), vec![v; n], "{dtype} {shape:?}");
            }
        }
    }
}

#[test]
fn tile_matches_numpy() {
    let reps_list: [&[usize]; 5] = [&[3], &[2, 1], &[1, 4, 2], &[0, 2], &[2, 1, 1, 3]];
    each_input(|name, dtype, h, x| {
        for reps in reps_list {
            let dims = h.shape.len().max(reps.len());
            let mut shape = vec![1; dims - h.shape.len()];
            shape.extend(&h.shape);
            let mut r = vec![1; dims - reps.len()];
            r.extend(reps);
            let out: Vec<usize> = shape.iter().zip(&r).map(|(a, b)| a * b).collect();
            let pad = dims - h.shape.len();
            let want = Host::from_fn(&out, |ix| {
                let src: Vec<usize> = (pad..dims).map(|a| ix[a] % shape[a]).collect();
                h.get(&src)
            });
            let got = x.tile(reps).unwrap();
            assert_host(
                &got,
                &want,
                &format!("tile {dtype} {name} {:?} by {reps:?}", h.shape),
            );
        }
    });
}

#[test]
fn repeat_with_and_without_an_axis() {
    each_input(|name, dtype, h, x| {
        for r in [1usize, 3, 0] {
            for axis in 0..h.shape.len() {
                let mut out = h.shape.clone();
                out[axis] *= r;
                let want = Host::from_fn(&out, |ix| {
                    let mut src = ix.to_vec();
                    src[axis] /= r;
                    h.get(&src)
                });
                for a in [axis as isize, axis as isize - h.shape.len() as isize] {
                    let got = x.repeat(r, a).unwrap();
                    assert_host(&got, &want, &format!("repeat {dtype} {name} {r} axis {a}"));
                }
            }
            let want = Host {
                shape: vec![h.size() * r],
                data: h
                    .data
                    .iter()
                    .flat_map(|&v| std::iter::repeat_n(v, r))
                    .collect(),
            };
            assert_host(
                &x.repeat(r, None).unwrap(),
                &want,
                &format!("repeat {dtype} {name} flat"),
            );
        }
    });
}

#[test]
fn pad_constant_and_edge_with_per_axis_widths() {
    each_input(|name, dtype, h, x| {
        let nd = h.shape.len();
        let per_axis: Vec<(usize, usize)> = (0..nd).map(|a| (a % 2 + 1, (a + 1) % 3)).collect();
        for widths in [per_axis, vec![(2, 1)], vec![(0, 0); nd]] {
            let w: Vec<(usize, usize)> = if widths.len() == 1 {
                vec![widths[0]; nd]
            } else {
                widths.clone()
            };
            let out: Vec<usize> = h.shape.iter().zip(&w).map(|(s, p)| s + p.0 + p.1).collect();
            let value = if dtype == DType::Bool { 1.0 } else { 5.0 };
            let constant = Host::from_fn(&out, |ix| {
                let src: Option<Vec<usize>> = ix
                    .iter()
                    .zip(&w)
                    .zip(&h.shape)
                    .map(|((&i, p), &s)| (i >= p.0 && i - p.0 < s).then(|| i - p.0))
                    .collect();
                src.map_or(value, |s| h.get(&s))
            });
            let got = x.pad(&widths, PadMode::Constant(5.0)).unwrap();
            assert_host(
                &got,
                &constant,
                &format!("pad constant {dtype} {name} {widths:?}"),
            );
            let empty_padded = h
                .shape
                .iter()
                .zip(&w)
                .any(|(&s, p)| s == 0 && p.0 + p.1 > 0);
            let got = x.pad(&widths, PadMode::Edge);
            if empty_padded {
                assert!(
                    matches!(got, Err(Error::InvalidArgument(_))),
                    "edge on empty axis"
                );
                continue;
            }
            let edge = Host::from_fn(&out, |ix| {
                let src: Vec<usize> = ix
                    .iter()
                    .zip(&w)
                    .zip(&h.shape)
                    .map(|((&i, p), &s)| (i.saturating_sub(p.0)).min(s - 1))
                    .collect();
                h.get(&src)
            });
            assert_host(
                &got.unwrap(),
                &edge,
                &format!("pad edge {dtype} {name} {widths:?}"),
            );
        }
    });
}

#[test]
fn roll_with_and_without_an_axis() {
    each_input(|name, dtype, h, x| {
        for shift in [1isize, -2, 0, 40] {
            for axis in 0..h.shape.len() {
                let n = h.shape[axis] as isize;
                let want = Host::from_fn(&h.shape, |ix| {
                    let mut src = ix.to_vec();
                    src[axis] = (ix[axis] as isize - shift).rem_euclid(n) as usize;
                    h.get(&src)
                });
                let got = x.roll(shift, axis as isize).unwrap();
                assert_host(
                    &got,
                    &want,
                    &format!("roll {dtype} {name} {shift} axis {axis}"),
                );
            }
            let n = h.size() as isize;
            let want = Host {
                shape: h.shape.clone(),
                data: (0..n)
                    .map(|i| h.data[(i - shift).rem_euclid(n.max(1)) as usize])
                    .collect(),
            };
            assert_host(
                &x.roll(shift, None).unwrap(),
                &want,
                &format!("roll {dtype} {name} flat"),
            );
        }
    });
}

#[test]
fn diagonal_and_trace_of_every_pair_of_axes() {
    each_input(|name, dtype, h, x| {
        let nd = h.shape.len();
        if nd < 2 {
            assert!(matches!(
                x.diagonal(0, 0, 1),
                Err(Error::InvalidArgument(_))
            ));
            return;
        }
        for (a1, a2) in [(0, 1), (1, 0), (nd - 1, 0)] {
            for k in [0isize, 1, -1, 2, -5] {
                let (m, n) = (h.shape[a1], h.shape[a2]);
                let (r0, c0) = if k >= 0 {
                    (0, k as usize)
                } else {
                    ((-k) as usize, 0)
                };
                let len = m.saturating_sub(r0).min(n.saturating_sub(c0));
                let rest: Vec<usize> = (0..nd).filter(|&a| a != a1 && a != a2).collect();
                let mut out: Vec<usize> = rest.iter().map(|&a| h.shape[a]).collect();
                out.push(len);
                let want = Host::from_fn(&out, |ix| {
                    let mut src = vec![0; nd];
                    for (j, &a) in rest.iter().enumerate() {
                        src[a] = ix[j];
                    }
                    src[a1] = r0 + ix[nd - 2];
                    src[a2] = c0 + ix[nd - 2];
                    h.get(&src)
                });
                let what = format!("diagonal {dtype} {name} {:?} k={k} axes {a1},{a2}", h.shape);
                let got = x.diagonal(k, a1 as isize, a2 as isize).unwrap();
                assert_host(&got, &want, &what);
                // trace: the sum over the diagonal, in sum's dtype.
                let t = x.trace(k, a1 as isize, a2 as isize).unwrap();
                let sum_dtype = if dtype == DType::Bool {
                    DType::I32
                } else {
                    dtype
                };
                assert_eq!(t.dtype(), sum_dtype, "{what}: trace dtype");
                let mut sums = vec![0.0; want.size() / len.max(1)];
                if len == 0 {
                    sums = vec![0.0; out[..nd - 2].iter().product()];
                }
                for (i, v) in want.data.iter().enumerate() {
                    sums[i / len] += v;
                }
                let sums: Vec<f64> = sums.iter().map(|&s| round_to(s, sum_dtype)).collect();
                assert_eq!(t.to_f64_vec().unwrap(), sums, "{what}: trace");
            }
        }
    });
}

/// `x` rounded to `dtype` (the one rounding of an f32 sum).
fn round_to(x: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F16 => half::f16::from_f64(x).to_f64(),
        DType::BF16 => half::bf16::from_f64(x).to_f64(),
        DType::F32 => x as f32 as f64,
        _ => x,
    }
}

#[test]
fn diag_builds_and_extracts() {
    let d = device();
    let mut rng = Rng::new(5);
    for dtype in word_dtypes() {
        for n in [1usize, 7, 33, 0] {
            let v = Host::random(&[n], dtype, &mut rng);
            for k in [0isize, 1, 3, -1, -4] {
                let side = n + k.unsigned_abs();
                let want = Host::from_fn(&[side, side], |ix| {
                    let (i, j) = (ix[0] as isize, ix[1] as isize);
                    if j - i == k {
                        v.data[(i.min(j)) as usize]
                    } else {
                        0.0
                    }
                });
                for (name, x) in layouts(&d, &v, dtype) {
                    let m = x.diag(k).unwrap();
                    assert_host(&m, &want, &format!("diag {dtype} {name} n={n} k={k}"));
                    // Back: the 2-D case extracts the same vector.
                    assert_host(
                        &m.diag(k).unwrap(),
                        &v,
                        &format!("diag(diag) {dtype} {name}"),
                    );
                }
            }
        }
    }
    let x3 = Array::zeros(&[2, 2, 2], DType::F32, &d).unwrap();
    assert!(matches!(x3.diag(0), Err(Error::InvalidArgument(_))));
    let x0 = Array::zeros(&[], DType::F32, &d).unwrap();
    assert!(matches!(x0.diag(0), Err(Error::InvalidArgument(_))));
}

#[test]
fn a_diagonal_of_a_dense_matrix_is_a_view() {
    let d = device();
    let x = upload(
        &d,
        &(0..35).map(f64::from).collect::<Vec<_>>(),
        &[5, 7],
        DType::F32,
    );
    x.eval().unwrap();
    let before = d.active_memory();
    let diag = x.diagonal(1, 0, 1).unwrap();
    diag.eval().unwrap();
    // Evaluated without a buffer of its own: it reads x's.
    assert_eq!(d.active_memory(), before);
    assert_eq!(
        diag.to_vec::<f32>().unwrap(),
        vec![1.0, 9.0, 17.0, 25.0, 33.0]
    );
}

#[test]
fn meshgrid_xy_and_ij() {
    let d = device();
    let mut rng = Rng::new(9);
    for dtype in [DType::F32, DType::I32, DType::BF16] {
        let hs: Vec<Host> = [7usize, 3, 2]
            .iter()
            .map(|&n| Host::random(&[n], dtype, &mut rng))
            .collect();
        // The third input as a 2-D array of 2 elements: NumPy flattens it.
        let xs: Vec<Array> = vec![
            layouts(&d, &hs[0], dtype).remove(3).1,
            dense(&d, &hs[1], dtype),
            dense(&d, &hs[2], dtype).reshape(&[1, 2]).unwrap(),
        ];
        let refs: Vec<&Array> = xs.iter().collect();
        for (indexing, shape) in [(Indexing::Xy, [3, 7, 2]), (Indexing::Ij, [7, 3, 2])] {
            let grids = wgarray::meshgrid(&refs, indexing).unwrap();
            for (i, g) in grids.iter().enumerate() {
                let axis = match (indexing, i) {
                    (Indexing::Xy, 0) => 1,
                    (Indexing::Xy, 1) => 0,
                    _ => i,
                };
                let want = Host::from_fn(&shape, |ix| hs[i].data[ix[axis]]);
                assert_host(g, &want, &format!("meshgrid {dtype} {indexing:?} {i}"));
            }
        }
        // One input: xy is ij.
        let one = wgarray::meshgrid(&refs[..1], Indexing::Xy).unwrap();
        assert_eq!(one[0].shape(), &[7]);
    }
    assert!(wgarray::meshgrid(&[], Indexing::Ij).unwrap().is_empty());
}

#[test]
fn broadcast_arrays_and_atleast_nd() {
    let d = device();
    let a = upload(&d, &[1.0, 2.0, 3.0], &[3], DType::F32);
    let b = upload(&d, &[10.0, 20.0], &[2, 1], DType::I32);
    let c = Array::full(&[], 7.0, DType::U32, &d).unwrap();
    let out = wgarray::broadcast_arrays(&[&a, &b, &c]).unwrap();
    assert_eq!(
        out[0].to_f64_vec().unwrap(),
        vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    );
    assert_eq!(
        out[1].to_f64_vec().unwrap(),
        vec![10.0, 10.0, 10.0, 20.0, 20.0, 20.0]
    );
    assert_eq!(out[2].to_f64_vec().unwrap(), vec![7.0; 6]);
    for o in &out {
        assert_eq!(o.shape(), &[2, 3]);
    }
    let e = Array::zeros(&[4], DType::F32, &d).unwrap();
    assert!(matches!(
        wgarray::broadcast_arrays(&[&a, &e]),
        Err(Error::ShapeMismatch {
            op: "broadcast_arrays",
            ..
        })
    ));
    let s = Array::full(&[], 1.0, DType::F32, &d).unwrap();
    let v = Array::zeros(&[5], DType::F32, &d).unwrap();
    let m = Array::zeros(&[2, 5], DType::F32, &d).unwrap();
    let t = Array::zeros(&[2, 5, 3, 1], DType::F32, &d).unwrap();
    let shapes = |x: &Array| {
        [
            x.atleast_1d().shape().to_vec(),
            x.atleast_2d().shape().to_vec(),
            x.atleast_3d().shape().to_vec(),
        ]
    };
    assert_eq!(shapes(&s), [vec![1], vec![1, 1], vec![1, 1, 1]]);
    assert_eq!(shapes(&v), [vec![5], vec![1, 5], vec![1, 5, 1]]);
    assert_eq!(shapes(&m), [vec![2, 5], vec![2, 5], vec![2, 5, 1]]);
    assert_eq!(shapes(&t)[2], vec![2, 5, 3, 1]);
    assert_eq!(s.atleast_3d().to_vec::<f32>().unwrap(), vec![1.0]);
}

#[test]
fn moveaxis_expand_dims_flatten_and_flat_concatenate() {
    each_input(|name, dtype, h, x| {
        let nd = h.shape.len() as isize;
        // moveaxis: the permutation with `src` taken out and put at `dst`.
        for (src, dst) in [(0isize, -1isize), (-1, 0), (nd - 1, nd - 1)] {
            let s = src.rem_euclid(nd) as usize;
            let t = dst.rem_euclid(nd) as usize;
            let mut order: Vec<usize> = (0..nd as usize).filter(|&a| a != s).collect();
            order.insert(t, s);
            let got = x.moveaxis(src, dst).unwrap();
            assert_host(
                &got,
                &h.permute(&order),
                &format!("moveaxis {dtype} {name}"),
            );
        }
        // expand_dims with several axes: the values stay, the shape gains 1s.
        let got = x.expand_dims([0, -1]).unwrap();
        let mut shape = vec![1];
        shape.extend(&h.shape);
        shape.push(1);
        assert_host(
            &got,
            &Host {
                shape,
                data: h.data.clone(),
            },
            "expand_dims",
        );
        // flatten(start, end) of every range.
        for start in 0..nd {
            for end in start..nd {
                let (s, e) = (start as usize, end as usize);
                let mut shape = h.shape[..s].to_vec();
                shape.push(h.shape[s..=e].iter().product());
                shape.extend(&h.shape[e + 1..]);
                let got = x.flatten(start, end - nd).unwrap();
                let want = Host {
                    shape,
                    data: h.data.clone(),
                };
                assert_host(
                    &got,
                    &want,
                    &format!("flatten {dtype} {name} {start}..={end}"),
                );
            }
        }
        // Flattened inputs of any shapes, joined.
        let y = x.transpose();
        let got = wgarray::concatenate(&[x, &y], None).unwrap();
        let mut data = h.data.clone();
        let rev: Vec<usize> = (0..h.shape.len()).rev().collect();
        data.extend(h.permute(&rev).data);
        assert_host(
            &got,
            &Host {
                shape: vec![2 * h.size()],
                data,
            },
            "concatenate None",
        );
    });
}

#[test]
fn shape_argument_errors_name_the_op_and_leave_nothing_behind() {
    let d = device();
    {
        let x = Array::zeros(&[2, 3], DType::F32, &d).unwrap();
        assert!(matches!(
            x.moveaxis(2, 0),
            Err(Error::InvalidAxis {
                op: "moveaxis",
                axis: 2,
                ndim: 2
            })
        ));
        assert!(matches!(x.moveaxis(0, -3), Err(Error::InvalidAxis { .. })));
        assert!(matches!(
            x.expand_dims([0, 0]),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(x.expand_dims([4]), Err(Error::InvalidAxis { .. })));
        assert!(matches!(
            x.expand_dims(None),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(x.flatten(1, 0), Err(Error::InvalidArgument(m)) if m.contains("flatten")));
        assert!(matches!(x.flatten(0, 2), Err(Error::InvalidAxis { .. })));
        assert_eq!(
            Array::zeros(&[], DType::F32, &d)
                .unwrap()
                .flatten(0, -1)
                .unwrap()
                .shape(),
            &[1]
        );
        assert!(matches!(x.repeat(2, 2), Err(Error::InvalidAxis { .. })));
        assert!(matches!(x.roll(1, -3), Err(Error::InvalidAxis { .. })));
        assert!(matches!(
            x.pad(&[(1, 1), (1, 1), (1, 1)], PadMode::Edge),
            Err(Error::InvalidArgument(m)) if m.contains("pad") && m.contains("pad_width")
        ));
        assert!(matches!(
            x.diagonal(0, 1, -1),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            x.diagonal(0, 0, 5),
            Err(Error::InvalidAxis { .. })
        ));
        assert!(matches!(x.trace(0, 0, 0), Err(Error::InvalidArgument(_))));
        assert!(matches!(
            x.softmax([0, 3]),
            Err(Error::InvalidAxis { op: "softmax", .. })
        ));
        // Shapes past 8 dimensions or past usize elements are refused by
        // the call that makes them, naming it.
        let too_large = |r: wgarray::Result<Array>, name: &str| {
            assert!(
                matches!(&r, Err(Error::TooLarge { op, .. }) if *op == name),
                "{name}: {r:?}"
            );
        };
        too_large(x.expand_dims([0, 1, 2, 3, 4, 5, 6]), "expand_dims");
        too_large(x.tile(&[1; 9]), "tile");
        too_large(x.tile(&[usize::MAX, 2]), "tile");
        too_large(x.repeat(usize::MAX, 0), "repeat");
        too_large(x.pad(&[(usize::MAX, 1)], PadMode::Constant(0.0)), "pad");
        too_large(
            Array::scalar(0.0f32, DType::F32, &d)
                .and_then(|v| v.broadcast_to(&[1 << 33]))
                .and_then(|v| v.diag(0)),
            "diag",
        );
        too_large(
            x.tensordot(&x.reshape(&[1, 1, 1, 1, 1, 2, 3]).unwrap(), 0),
            "tensordot",
        );
        let ones: Vec<Array> = (0..9)
            .map(|_| Array::zeros(&[1], DType::F32, &d).unwrap())
            .collect();
        let refs: Vec<&Array> = ones.iter().collect();
        assert!(matches!(
            wgarray::meshgrid(&refs, wgarray::Indexing::Ij),
            Err(Error::TooLarge { op: "meshgrid", .. })
        ));
        assert_eq!(x.full_like(-1).unwrap().dtype(), DType::F32);
        assert!(matches!(
            Array::zeros(&[2], DType::U32, &d).unwrap().full_like(-1),
            Err(Error::InvalidArgument(m)) if m.contains("full_like")
        ));
        assert!(matches!(
            wgarray::concatenate(&[], None),
            Err(Error::InvalidArgument(_))
        ));
        let e = Array::zeros(&[0, 3], DType::F32, &d).unwrap();
        assert!(matches!(
            e.pad(&[(1, 0)], PadMode::Edge),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(
            e.pad(&[(1, 0), (0, 0)], PadMode::Constant(2.0))
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            vec![2.0; 3]
        );
    }
    assert_empty(&d);
}

/// softmax, log_softmax and logsumexp over several axes or all of them,
/// against f64 on a transposed input.
#[test]
fn softmax_family_over_several_axes() {
    let d = device();
    let mut rng = Rng::new(3);
    let shape = [5usize, 3, 7];
    let h = Host::from_fn(&shape, |_| rng.f32() as f64 * 8.0);
    let x = layouts(&d, &h, DType::F32).remove(1).1; // transposed
    for axes in [vec![0isize, 2], vec![-1, -2], vec![0, 1, 2]] {
        let keep: Vec<usize> = (0..3)
            .filter(|a| !axes.iter().any(|&b| b.rem_euclid(3) as usize == *a))
            .collect();
        // The f64 reference: logsumexp per group of the kept axes.
        let group = |ix: &[usize]| keep.iter().map(|&a| ix[a]).collect::<Vec<_>>();
        let mut lse = std::collections::HashMap::<Vec<usize>, (f64, f64)>::new();
        for i in 0..h.size() {
            let ix = unravel(i, &shape);
            let e = lse.entry(group(&ix)).or_insert((f64::NEG_INFINITY, 0.0));
            let v = h.data[i];
            if v > e.0 {
                e.1 = e.1 * (e.0 - v).exp() + 1.0;
                e.0 = v;
            } else {
                e.1 += (v - e.0).exp();
            }
        }
        let soft = x.softmax(axes.clone()).unwrap().to_vec::<f32>().unwrap();
        let logsoft = x
            .log_softmax(axes.clone())
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for i in 0..h.size() {
            let ix = unravel(i, &shape);
            let (m, s) = lse[&group(&ix)];
            let l = h.data[i] - m - s.ln();
            assert!(
                (soft[i] as f64 - l.exp()).abs() <= 1e-6 + 1e-5 * l.exp(),
                "softmax {axes:?}"
            );
            assert!(
                (logsoft[i] as f64 - l).abs() <= 1e-5 * (1.0 + l.abs()),
                "log_softmax {axes:?}"
            );
        }
        let got = x.logsumexp(axes.clone(), false).unwrap();
        let want_shape: Vec<usize> = keep.iter().map(|&a| shape[a]).collect();
        assert_eq!(got.shape(), &want_shape[..]);
    }
    let all = x.softmax(None).unwrap().sum(None, false).unwrap();
    assert!((all.item::<f32>().unwrap() - 1.0).abs() < 1e-5);
}

// ---- products ----

fn tensordot_ref(a: &Host, b: &Host, ca: &[usize], cb: &[usize]) -> Host {
    let fa: Vec<usize> = (0..a.shape.len()).filter(|x| !ca.contains(x)).collect();
    let fb: Vec<usize> = (0..b.shape.len()).filter(|x| !cb.contains(x)).collect();
    let mut out: Vec<usize> = fa.iter().map(|&x| a.shape[x]).collect();
    out.extend(fb.iter().map(|&x| b.shape[x]));
    let kshape: Vec<usize> = ca.iter().map(|&x| a.shape[x]).collect();
    let k: usize = kshape.iter().product();
    Host::from_fn(&out, |ix| {
        let mut acc = 0.0;
        for kk in 0..k {
            let kx = unravel(kk, &kshape);
            let mut ia = vec![0; a.shape.len()];
            let mut ib = vec![0; b.shape.len()];
            for (j, &x) in fa.iter().enumerate() {
                ia[x] = ix[j];
            }
            for (j, &x) in fb.iter().enumerate() {
                ib[x] = ix[fa.len() + j];
            }
            for (j, (&x, &y)) in ca.iter().zip(cb).enumerate() {
                ia[x] = kx[j];
                ib[y] = kx[j];
            }
            acc += a.get(&ia) * b.get(&ib);
        }
        acc
    })
}

fn assert_close(got: &Array, want: &Host, tol: f64, what: &str) {
    assert_eq!(got.shape(), &want.shape[..], "{what}: shape");
    let g = got.to_f64_vec().unwrap();
    let scale = want.data.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (x, y)) in g.iter().zip(&want.data).enumerate() {
        assert!((x - y).abs() <= tol * scale, "{what}[{i}]: {x} vs {y}");
    }
}

#[test]
fn tensordot_inner_outer_against_f64() {
    let d = device();
    let mut rng = Rng::new(17);
    // (a's shape, b's shape, a's axes, b's axes)
    type Case<'a> = (&'a [usize], &'a [usize], &'a [usize], &'a [usize]);
    let cases: [Case; 6] = [
        (&[7, 33], &[33, 5], &[1], &[0]),
        (&[3, 4, 5], &[5, 4, 2], &[1, 2], &[1, 0]),
        (&[2, 3], &[3, 2], &[0, 1], &[1, 0]),
        (&[6], &[4], &[], &[]),
        (&[3, 0], &[0, 4], &[1], &[0]),
        (&[1025], &[1025], &[0], &[0]),
    ];
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::I32] {
        for (sa, sb, ca, cb) in cases {
            let ha = Host::small(sa, &mut rng);
            let hb = Host::small(sb, &mut rng);
            let want = tensordot_ref(&ha, &hb, ca, cb);
            let tol = match dtype {
                DType::I32 => 0.0,
                DType::F32 => 1e-6,
                _ => 1e-2,
            };
            for ((na, a), (nb, b)) in layouts(&d, &ha, dtype)
                .into_iter()
                .zip(layouts(&d, &hb, dtype))
            {
                let axes = (
                    ca.iter().map(|&x| x as isize).collect::<Vec<_>>(),
                    cb.iter()
                        .map(|&x| x as isize - sb.len() as isize)
                        .collect::<Vec<_>>(),
                );
                let got = a.tensordot(&b, axes).unwrap();
                assert_eq!(got.dtype(), dtype);
                assert_close(
                    &got,
                    &want,
                    tol,
                    &format!("tensordot {dtype} {na}x{nb} {sa:?}.{sb:?}"),
                );
            }
            if ca.len() == 1 && ca[0] == sa.len() - 1 && cb[0] == 0 {
                // The count form: the last axis of a with the first of b.
                let got = dense(&d, &ha, dtype)
                    .tensordot(&dense(&d, &hb, dtype), 1)
                    .unwrap();
                assert_close(&got, &want, tol, "tensordot count");
            }
        }
        // inner: the last axes; outer: the flattened arrays.
        let ha = Host::small(&[4, 7], &mut rng);
        let hb = Host::small(&[3, 2, 7], &mut rng);
        let (a, b) = (dense(&d, &ha, dtype), layouts(&d, &hb, dtype).remove(1).1);
        let want = tensordot_ref(&ha, &hb, &[1], &[2]);
        assert_close(
            &a.inner(&b).unwrap(),
            &want,
            tol_for(dtype),
            &format!("inner {dtype}"),
        );
        let s = Array::full(&[], 2.0, dtype, &d).unwrap();
        assert_eq!(s.inner(&a).unwrap().shape(), &[4, 7]);
        let outer = a.outer(&b).unwrap();
        let want = Host::from_fn(&[28, 42], |ix| ha.data[ix[0]] * hb.data[ix[1]]);
        assert_close(
            &outer,
            &want,
            if dtype == DType::F16 || dtype == DType::BF16 {
                1e-2
            } else {
                0.0
            },
            "outer",
        );
    }
}

fn tol_for(dtype: DType) -> f64 {
    match dtype {
        DType::I32 => 0.0,
        DType::F32 => 1e-6,
        _ => 1e-2,
    }
}

#[test]
fn tensordot_errors_and_nothing_behind() {
    let d = device();
    {
        let a = Array::zeros(&[2, 3], DType::F32, &d).unwrap();
        let b = Array::zeros(&[4, 3], DType::F32, &d).unwrap();
        assert!(
            matches!(a.tensordot(&b, 3), Err(Error::InvalidArgument(m)) if m.contains("tensordot"))
        );
        assert!(matches!(
            a.tensordot(&b, 1),
            Err(Error::ShapeMismatch {
                op: "tensordot",
                ..
            })
        ));
        assert!(matches!(
            a.tensordot(&b, (vec![0, 0], vec![0, 1])),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            a.tensordot(&b, (vec![0], vec![0, 1])),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            a.tensordot(&b, ([2], [0])),
            Err(Error::InvalidAxis { .. })
        ));
        assert!(matches!(
            a.inner(&Array::zeros(&[2], DType::F32, &d).unwrap()),
            Err(Error::ShapeMismatch { op: "inner", .. })
        ));
        let t = a.tensordot(&b, ([1], [1])).unwrap();
        assert_eq!(t.shape(), &[2, 4]);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0; 8]);
    }
    assert_empty(&d);
}

#[test]
fn broadcast_inputs_are_read_in_place() {
    // A broadcast operand (stride 0) through tile, pad, roll and diagonal.
    let d = device();
    let v = upload(&d, &[1.0, 2.0, 3.0], &[1, 3], DType::F32);
    let b = v.broadcast_to(&[4, 3]).unwrap();
    assert_eq!(
        b.roll(1, 1).unwrap().to_vec::<f32>().unwrap(),
        [3.0, 1.0, 2.0].repeat(4)
    );
    assert_eq!(
        b.diagonal(0, 0, 1).unwrap().to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0]
    );
    assert_eq!(b.trace(0, 0, 1).unwrap().item::<f32>().unwrap(), 6.0);
    assert_eq!(
        b.tile(&[1, 2]).unwrap().to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0].repeat(8)
    );
    let p = b.pad(&[(0, 1), (1, 0)], PadMode::Edge).unwrap();
    assert_eq!(p.shape(), &[5, 4]);
    assert_eq!(p.to_vec::<f32>().unwrap(), [1.0, 1.0, 2.0, 3.0].repeat(5));
    let s = b.slice(&[Slice::step(2)]).unwrap();
    assert_eq!(s.repeat(2, 0).unwrap().shape(), &[4, 3]);
}

/// arange's documented choices (README, "Coming from NumPy / MLX"): an
/// infinite step gives `[start]` or nothing, as NumPy and MLX; an integer
/// dtype with a fractional step converts each `start + i * step` once.
#[test]
fn arange_with_an_infinite_or_fractional_step() {
    let d = device();
    {
        let inf = f64::INFINITY;
        for (start, stop, step, want) in [
            (1.5, 4.0, inf, vec![1.5]),
            (1.5, 4.0, -inf, vec![]),
            (4.0, 1.5, -inf, vec![4.0]),
            (4.0, 4.0, inf, vec![]),
        ] {
            let a = Array::arange(start, stop, step, DType::F32, &d).unwrap();
            assert_eq!(
                a.to_vec::<f32>().unwrap(),
                want,
                "arange({start}, {stop}, {step})"
            );
        }
        let a = Array::arange(0.0, 5.0, 0.5, DType::I32, &d).unwrap();
        assert_eq!(
            a.to_vec::<i32>().unwrap(),
            vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
        );
        let a = Array::arange(-1.0, 1.0, 0.75, DType::I32, &d).unwrap();
        assert_eq!(a.to_vec::<i32>().unwrap(), vec![-1, 0, 0]);
        for (start, stop, step) in [
            (0.0, 1.0, 0.0),
            (0.0, 1.0, f64::NAN),
            (0.0, inf, 1.0),
            (f64::NAN, 1.0, 1.0),
        ] {
            assert!(
                matches!(
                    Array::arange(start, stop, step, DType::F32, &d),
                    Err(Error::InvalidArgument(_))
                ),
                "arange({start}, {stop}, {step})"
            );
        }
    }
    assert_empty(&d);
}
