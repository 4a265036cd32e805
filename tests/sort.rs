//! `sort`, `argsort`, `partition` and `argpartition` against a host stable
//! sort: every dtype, odd lengths on each side of the kernel's modes (one
//! dispatch up to 1024, the global network beyond, several global steps for a
//! row of 9000), several rows, every axis and flattened, views
//! (transposed, stepped, broadcast), NaN and signed zeros, ties (stability),
//! empty arrays, typed errors, lifetimes.

mod common;

use common::arrays::{f, i, of_dtype, random_values};
use common::reference::{ravel, unravel};
use common::{Rng, assert_empty, device, poison_pool, word_dtypes};
use std::cmp::Ordering;
use wgarray::{Array, DType, Error, Limit, Slice};

/// NumPy's ascending order: NaN last, -0 == +0.
fn order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap(),
    }
}

/// Host stable sort of `v` (of `shape`) along `axis`: (values, indices).
fn reference(v: &[f64], shape: &[usize], axis: usize) -> (Vec<f64>, Vec<u32>) {
    let len = shape[axis];
    let mut vals = vec![0.0; v.len()];
    let mut idx = vec![0u32; v.len()];
    for p in 0..v.len() {
        let ix = unravel(p, shape);
        if ix[axis] != 0 {
            continue;
        }
        let at = |r: usize| {
            let mut j = ix.clone();
            j[axis] = r;
            ravel(&j, shape)
        };
        let mut perm: Vec<usize> = (0..len).collect();
        perm.sort_by(|&a, &b| order(v[at(a)], v[at(b)]));
        for (r, &s) in perm.iter().enumerate() {
            vals[at(r)] = v[at(s)];
            idx[at(r)] = s as u32;
        }
    }
    (vals, idx)
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b
}

/// Sort and argsort of `x` along each of `axes` against the host.
fn check(x: &Array, axes: &[Option<isize>], what: &str) {
    let host = x.to_f64_vec().unwrap();
    for &axis in axes {
        let (shape, a) = match axis {
            None => (vec![x.size()], 0),
            Some(a) => (x.shape().to_vec(), a.rem_euclid(x.ndim() as isize) as usize),
        };
        let (want_v, want_i) = reference(&host, &shape, a);
        let s = x.sort(axis).unwrap();
        let i = x.argsort(axis).unwrap();
        assert_eq!(s.shape(), &shape[..]);
        assert_eq!(s.dtype(), x.dtype());
        assert_eq!(i.dtype(), DType::U32);
        let got = s.to_f64_vec().unwrap();
        for (p, (&g, &w)) in got.iter().zip(&want_v).enumerate() {
            assert!(
                same(g, w),
                "{what} {} axis {axis:?}: [{p}] {g} != {w}",
                x.dtype()
            );
        }
        assert_eq!(
            i.to_vec::<u32>().unwrap(),
            want_i,
            "{what} {} axis {axis:?}: indices",
            x.dtype()
        );
    }
}

/// Values with many ties (stability matters), NaN among floats.
fn data(rng: &mut Rng, n: usize, dtype: DType) -> Vec<f64> {
    let mut v = random_values(rng, n, dtype);
    if dtype.is_float() {
        for (j, x) in v.iter_mut().enumerate() {
            if j % 17 == 3 {
                *x = f64::NAN;
            }
        }
    }
    v
}

#[test]
fn sorts_match_the_host_in_every_dtype() {
    let d = device();
    poison_pool(&d, 1 << 14);
    let mut rng = Rng::new(1);
    for len in [1usize, 7, 33, 1024, 1025, 2500] {
        for dtype in word_dtypes() {
            let x = of_dtype(&d, &data(&mut rng, 3 * len, dtype), &[3, len], dtype);
            check(&x, &[Some(-1)], &format!("[3, {len}]"));
        }
    }
}

/// The packed integers: elements read from their shared words, and
/// written with atomics on them, rows of odd lengths so that rows start
/// inside a word, and a transposed view.
#[test]
fn packed_integers_sort_like_the_host() {
    let d = device();
    poison_pool(&d, 1 << 14);
    let mut rng = Rng::new(7);
    for dtype in [DType::I8, DType::U8, DType::I16, DType::U16] {
        for len in [1usize, 7, 33, 1025] {
            let x = of_dtype(&d, &data(&mut rng, 3 * len, dtype), &[3, len], dtype);
            check(&x, &[Some(-1)], &format!("[3, {len}]"));
        }
        let x = of_dtype(&d, &data(&mut rng, 5 * 9, dtype), &[5, 9], dtype);
        check(
            &x.transpose(),
            &[Some(0), Some(1), None],
            "transposed [9, 5]",
        );
    }
}

#[test]
fn sorts_along_every_axis_views_and_flattened() {
    let d = device();
    let mut rng = Rng::new(2);
    for dtype in [DType::F32, DType::I32, DType::F16] {
        let x = of_dtype(&d, &data(&mut rng, 5 * 33 * 7, dtype), &[5, 33, 7], dtype);
        check(
            &x,
            &[Some(0), Some(1), Some(2), Some(-2), None],
            "[5, 33, 7]",
        );
        let base = of_dtype(&d, &data(&mut rng, 40 * 1100, dtype), &[40, 1100], dtype);
        check(&base.transpose(), &[Some(0), Some(1)], "transposed");
        let s = base
            .slice(&[Slice::new(Some(1), None, 3), Slice::step(-2)])
            .unwrap();
        check(&s, &[Some(0), Some(-1)], "stepped");
        let row = of_dtype(&d, &data(&mut rng, 7, dtype), &[1, 7], dtype);
        check(
            &row.broadcast_to(&[33, 7]).unwrap(),
            &[Some(0), Some(1)],
            "broadcast",
        );
    }
}

#[test]
fn a_long_row_runs_the_global_network_and_stays_stable() {
    let d = device();
    let mut rng = Rng::new(3);
    // 9000 pads to 2^14: stages with up to 4 global steps each.
    let n = 9000;
    let v: Vec<i32> = (0..n).map(|_| (rng.next_u64() % 50) as i32 - 25).collect();
    let x = i(&d, &v, &[n]);
    let host: Vec<f64> = v.iter().map(|&a| a as f64).collect();
    let (want_v, want_i) = reference(&host, &[n], 0);
    let (s, ix) = (x.sort(0).unwrap(), x.argsort(0).unwrap());
    assert_eq!(s.to_f64_vec().unwrap(), want_v);
    assert_eq!(ix.to_vec::<u32>().unwrap(), want_i);
    drop((x, s, ix));
    assert_empty(&d);
}

#[test]
fn nan_goes_last_and_signed_zeros_keep_their_bits_and_order() {
    let d = device();
    let v = [
        0.0f32,
        -0.0,
        f32::NAN,
        -f32::INFINITY,
        -0.0,
        1.0,
        f32::INFINITY,
        0.0,
    ];
    let x = f(&d, &v, &[8]);
    let s = x.sort(0).unwrap().to_vec::<f32>().unwrap();
    let i = x.argsort(0).unwrap().to_vec::<u32>().unwrap();
    assert_eq!(i, vec![3, 0, 1, 4, 7, 5, 6, 2]);
    let bits: Vec<u32> = s.iter().map(|x| x.to_bits()).collect();
    let want: Vec<u32> = i.iter().map(|&j| v[j as usize].to_bits()).collect();
    assert_eq!(bits, want);
    drop(x);
    assert_empty(&d);
}

#[test]
fn empty_arrays_sort_to_empty_arrays() {
    let d = device();
    for (shape, axis) in [(vec![0usize, 5], 1isize), (vec![5, 0], 1), (vec![5, 0], 0)] {
        let x = f(&d, &[], &shape);
        let s = x.sort(axis).unwrap();
        assert_eq!(s.shape(), &shape[..]);
        assert!(s.to_vec::<f32>().unwrap().is_empty());
        assert!(x.argsort(axis).unwrap().to_vec::<u32>().unwrap().is_empty());
    }
    assert_empty(&d);
}

#[test]
fn partition_puts_kth_in_place() {
    let d = device();
    let mut rng = Rng::new(4);
    for len in [1usize, 7, 33, 1025] {
        let v: Vec<f32> = rng.vec_f32(2 * len);
        let x = f(&d, &v, &[2, len]);
        for kth in [0isize, len as isize / 2, -1] {
            let k = kth.rem_euclid(len as isize) as usize;
            let p = x.partition(kth, 1).unwrap().to_vec::<f32>().unwrap();
            let ip = x.argpartition(kth, -1).unwrap().to_vec::<u32>().unwrap();
            for r in 0..2 {
                let row = &v[r * len..(r + 1) * len];
                let mut sorted = row.to_vec();
                sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
                let pr = &p[r * len..(r + 1) * len];
                assert_eq!(pr[k], sorted[k]);
                assert!(pr[..k].iter().all(|&a| a <= pr[k]));
                assert!(pr[k..].iter().all(|&a| a >= pr[k]));
                let by_index: Vec<f32> = ip[r * len..(r + 1) * len]
                    .iter()
                    .map(|&j| row[j as usize])
                    .collect();
                assert_eq!(by_index[k], sorted[k]);
            }
        }
    }
    assert_empty(&d);
}

#[test]
fn sort_errors_are_typed_and_leave_nothing_behind() {
    let d = device();
    let x = f(&d, &[1.0, 2.0, 3.0], &[3]);
    for axis in [1isize, -2] {
        assert!(matches!(
            x.sort(axis),
            Err(Error::InvalidAxis {
                op: "sort",
                ndim: 1,
                ..
            })
        ));
        assert!(matches!(
            x.argsort(axis),
            Err(Error::InvalidAxis { op: "argsort", .. })
        ));
        assert!(matches!(
            x.partition(0, axis),
            Err(Error::InvalidAxis {
                op: "partition",
                ..
            })
        ));
    }
    for kth in [3isize, -4] {
        assert!(matches!(
            x.partition(kth, 0),
            Err(Error::InvalidArgument(m)) if m.contains("partition") && m.contains("kth")
        ));
        assert!(matches!(
            x.argpartition(kth, None),
            Err(Error::InvalidArgument(m)) if m.contains("argpartition")
        ));
    }
    // f64 is refused by name (32-bit order keys).
    for dtype in [DType::F64] {
        let Ok(y) = Array::zeros(&[3], dtype, &d) else {
            continue; // f64 without SHADER_F64
        };
        let e = y.argsort(None);
        assert!(
            matches!(e, Err(Error::OpDType { op: "argsort", dtype: t, .. }) if t == dtype),
            "{e:?}"
        );
        let e = y.partition(1, 0);
        assert!(
            matches!(e, Err(Error::OpDType { op: "partition", dtype: t, .. }) if t == dtype),
            "{e:?}"
        );
    }
    let s = Array::scalar(2.0, DType::F32, &d).unwrap();
    assert!(matches!(s.sort(0), Err(Error::InvalidAxis { .. })));
    assert_eq!(s.sort(None).unwrap().to_vec::<f32>().unwrap(), vec![2.0]);
    // What the eval would need is checked at the call, on broadcast views
    // that hold no memory: a work buffer (8 bytes a padded element) past
    // the largest storage binding (on Mesa, 128 MiB: a row of 2^24 + 1
    // pads to 2^25 pairs, 256 MiB), and 2^32 padded elements past the
    // kernels' 2^31.
    let one = Array::scalar(1.0f32, DType::F32, &d).unwrap();
    let max = d.limits().max_storage_buffer_binding_size;
    let len = (max / 8) as usize + 1;
    let long = one.broadcast_to(&[len]).unwrap();
    assert!(matches!(
        long.sort(None),
        Err(Error::TooLarge {
            op: "sort",
            limit: Limit::StorageBinding,
            value,
            ..
        }) if value == 8 * len.next_power_of_two() as u64
    ));
    let wide = one.broadcast_to(&[1 << 21, 1025]).unwrap();
    assert!(matches!(
        wide.argsort(-1),
        Err(Error::TooLarge {
            op: "argsort",
            limit: Limit::KernelIndex,
            value,
            ..
        }) if value == 1 << 32
    ));
    drop((long, wide, one));
    assert_eq!(d.live_nodes(), 0);
    drop((x, s));
    assert_empty(&d);
}

#[test]
fn one_node_either_output_alone_and_the_work_buffer_goes_back() {
    let d = device();
    let x = f(&d, &vec![1.0; 3000], &[3000]);
    let input_bytes = d.active_memory();
    let i = x.argsort(None).unwrap();
    assert_eq!(d.live_nodes(), 1);
    drop(x);
    i.eval().unwrap();
    assert_eq!(d.live_nodes(), 0);
    // Only the indices remain (as large as the f32 input): the input, the
    // dead values and the work buffer went back.
    assert_eq!(d.active_memory(), input_bytes);
    assert_eq!(i.to_vec::<u32>().unwrap(), (0..3000).collect::<Vec<u32>>());
    drop(i);
    assert_empty(&d);
}
