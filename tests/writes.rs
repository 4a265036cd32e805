//! Functional writes against a host reference: `slice_update` (MLX),
//! `slice_assign` (NumPy `a[slices] = v`), `put` (NumPy) and `at` (MLX
//! `.at[idx].set/add`), on odd sizes, views as source and as update, empty
//! slices and every dtype; a KV-cache loop whose memory stays flat when the
//! source is donated and whose old handles keep their values when it is
//! not; typed errors that leave nothing behind.

mod common;

use common::arrays::{i, of_dtype, round_to};
use common::host::{Host, dense, layouts, read, upload};
use common::reference::{ravel, unravel};
use common::word_dtypes;
use common::{Rng, assert_empty, device};
use wgarray::{Array, Axes, DType, Device, Error, Slice};

/// The word dtypes, and where the adapter has f64 (which the host
/// layouts upload the packed integers through) the packed integers and
/// f64; `packed_dtypes_merge_their_lanes` covers the packed ones everywhere.
fn dtypes(d: &Device) -> Vec<DType> {
    let mut out = word_dtypes();
    if d.features().contains(wgarray::wgpu::Features::SHADER_F64) {
        out.extend([DType::I8, DType::U8, DType::I16, DType::U16, DType::F64]);
    }
    out
}

/// Small random integers every dtype holds exactly (unsigned for the
/// unsigned ones, 0/1 for bool).
fn values(shape: &[usize], dtype: DType, rng: &mut Rng) -> Host {
    Host::from_fn(shape, |_| {
        let v = (rng.next_u64() % 100) as f64;
        match dtype {
            DType::Bool => v % 2.0,
            DType::U32 | DType::U8 | DType::U16 => v,
            _ => v - 50.0,
        }
    })
}

/// Host `x[slices] = update` (update broadcast to the slice's shape), with
/// the slice given as per-axis (start, count, step).
fn reference(x: &Host, axes: &[(usize, usize, isize)], update: &Host) -> Host {
    let mut out = x.clone();
    let shape: Vec<usize> = axes.iter().map(|a| a.1).collect();
    let n: usize = shape.iter().product();
    let off = shape.len() - update.shape.len();
    for p in 0..n {
        let c = unravel(p, &shape);
        let dst: Vec<usize> = c
            .iter()
            .zip(axes)
            .map(|(&k, &(s, _, st))| (s as isize + k as isize * st) as usize)
            .collect();
        let src: Vec<usize> = c[off..]
            .iter()
            .zip(&update.shape)
            .map(|(&k, &len)| if len == 1 { 0 } else { k })
            .collect();
        out.data[ravel(&dst, &x.shape)] = update.get(&src);
    }
    out
}

/// NumPy's `slice.indices` for one axis: (start, count, step).
fn resolve(s: Slice, len: usize) -> (usize, usize, isize) {
    let len = len as isize;
    let norm = |v: isize| if v < 0 { v + len } else { v };
    let (start, stop) = if s.step > 0 {
        (
            s.start.map_or(0, |v| norm(v).clamp(0, len)),
            s.stop.map_or(len, |v| norm(v).clamp(0, len)),
        )
    } else {
        (
            s.start.map_or(len - 1, |v| norm(v).clamp(-1, len - 1)),
            s.stop.map_or(-1, |v| norm(v).clamp(-1, len - 1)),
        )
    };
    let count = if s.step > 0 {
        ((stop - start).max(0) + s.step - 1) / s.step
    } else {
        ((start - stop).max(0) - s.step - 1) / -s.step
    };
    (start.max(0) as usize, count as usize, s.step)
}

#[test]
fn slice_assign_matches_the_host_for_views_dtypes_and_odd_sizes() {
    let d = device();
    let mut rng = Rng::new(21);
    let cases: Vec<(Vec<usize>, Vec<Slice>)> = vec![
        (vec![1], vec![Slice::FULL]),
        (vec![7], vec![Slice::range(2, 5)]),
        (vec![33], vec![Slice::new(Some(-30), None, 3)]),
        (vec![1025], vec![Slice::new(Some(1000), Some(3), -7)]),
        (vec![1025], vec![Slice::range(5, 5)]),  // empty
        (vec![7, 33], vec![Slice::range(3, 4)]), // one row: a KV write
        (vec![7, 33], vec![Slice::step(-2), Slice::range(1, 32)]),
        (
            vec![3, 5, 7],
            vec![Slice::FULL, Slice::range(1, 4), Slice::step(3)],
        ),
    ];
    for dtype in dtypes(&d) {
        for (shape, slices) in &cases {
            let ax: Vec<(usize, usize, isize)> = shape
                .iter()
                .enumerate()
                .map(|(a, &len)| resolve(slices.get(a).copied().unwrap_or(Slice::FULL), len))
                .collect();
            let sshape: Vec<usize> = ax.iter().map(|a| a.1).collect();
            let x = values(shape, dtype, &mut rng);
            // The update: the slice's shape in every layout, and broadcast
            // from its last axis.
            let u = values(&sshape, dtype, &mut rng);
            let last = &sshape[sshape.len() - 1..];
            let ub = values(last, dtype, &mut rng);
            let mut updates = layouts(&d, &u, dtype);
            updates.push(("broadcast", dense(&d, &ub, dtype)));
            for (uname, update) in &updates {
                let uh = if *uname == "broadcast" { &ub } else { &u };
                let want = reference(&x, &ax, uh);
                for (xname, src) in layouts(&d, &x, dtype) {
                    let y = src.slice_assign(slices, update).unwrap();
                    assert_eq!(y.dtype(), dtype);
                    let what = format!("{dtype} {shape:?} {slices:?} x {xname} u {uname}");
                    assert_eq!(read(&y), want, "{what}");
                    // The source is still held: it keeps its values.
                    assert_eq!(read(&src), x, "{what}: the source changed");
                }
                // Donated: nothing else holds the source.
                let y = dense(&d, &x, dtype).slice_assign(slices, update).unwrap();
                assert_eq!(read(&y), want, "{dtype} {shape:?} {slices:?} donated");
            }
        }
    }
    assert_empty(&d);
}

#[test]
fn slice_update_writes_at_starts_on_the_given_axes() {
    let d = device();
    let mut rng = Rng::new(5);
    // (array shape, update shape, starts, axes)
    type Case<'a> = (&'a [usize], &'a [usize], &'a [isize], Option<&'a [isize]>);
    let cases: &[Case] = &[
        (&[1025], &[33], &[992], None),
        (&[1025], &[1], &[0], Some(&[-1])),
        (&[7, 33], &[1, 33], &[6], Some(&[0])),
        (&[7, 33], &[7, 5], &[28], Some(&[1])),
        (&[7, 33], &[2, 7], &[5, 26], None),
        (&[3, 5, 7], &[3, 2, 1], &[6, 3], Some(&[2, 1])),
        (&[3, 5, 7], &[3, 0, 7], &[5], Some(&[1])), // empty, at the end
    ];
    for dtype in [DType::F32, DType::F16, DType::I32, DType::Bool] {
        for &(shape, ushape, starts, axes) in cases {
            let nd = shape.len();
            let axes_n: Vec<usize> = match axes {
                None => (0..nd).collect(),
                Some(a) => a
                    .iter()
                    .map(|&a| a.rem_euclid(nd as isize) as usize)
                    .collect(),
            };
            let mut ax: Vec<(usize, usize, isize)> = ushape.iter().map(|&n| (0, n, 1)).collect();
            for (&a, &s) in axes_n.iter().zip(starts) {
                ax[a].0 = s as usize;
            }
            let x = values(shape, dtype, &mut rng);
            let u = values(ushape, dtype, &mut rng);
            let want = reference(&x, &ax, &u);
            let axes: Axes = axes.map_or(Axes::All, |a| a.into());
            for (uname, update) in layouts(&d, &u, dtype) {
                let src = dense(&d, &x, dtype);
                let y = src.slice_update(&update, starts, axes.clone()).unwrap();
                assert_eq!(read(&y), want, "{dtype} {shape:?} {starts:?} {uname}");
                assert_eq!(read(&src), x, "{dtype} {shape:?}: the source changed");
            }
        }
    }
    assert_empty(&d);
}

#[test]
fn packed_dtypes_merge_their_lanes() {
    // 1- and 2-byte elements share words: a strided slice at odd offsets
    // writes some lanes of a word and must keep the others.
    let d = device();
    let mut rng = Rng::new(11);
    let (shape, slices) = (
        [7usize, 33],
        [Slice::new(Some(5), None, -2), Slice::new(Some(3), None, 5)],
    );
    let ax = [resolve(slices[0], 7), resolve(slices[1], 33)];
    let sshape = [ax[0].1, ax[1].1];
    for dtype in [DType::I8, DType::U8, DType::I16, DType::U16] {
        let x = values(&shape, dtype, &mut rng);
        let u = values(&sshape, dtype, &mut rng);
        let want = reference(&x, &ax, &u);
        let src = of_dtype(&d, &x.data, &shape, dtype);
        // The update as a transposed view.
        let ut = u.permute(&[1, 0]);
        let update = of_dtype(&d, &ut.data, &ut.shape, dtype).transpose();
        let y = src.slice_assign(&slices, &update).unwrap();
        assert_eq!(read(&y), want, "{dtype} copy");
        assert_eq!(read(&src), x, "{dtype}: the source changed");
        drop(src);
        let y = of_dtype(&d, &x.data, &shape, dtype)
            .slice_assign(&slices, &update)
            .unwrap();
        assert_eq!(read(&y), want, "{dtype} donated");
        // One element at an odd position of a 1025-element vector.
        let v = values(&[1025], dtype, &mut rng);
        let mut w = v.clone();
        w.data[513] = 7.0;
        let y = of_dtype(&d, &v.data, &[1025], dtype)
            .slice_update(&of_dtype(&d, &[7.0], &[1], dtype), &[513], 0)
            .unwrap();
        assert_eq!(read(&y), w, "{dtype} one element");
    }
    assert_empty(&d);
}

#[test]
fn update_is_cast_to_the_arrays_dtype() {
    let d = device();
    {
        let x = Array::zeros(&[2, 3], DType::I32, &d).unwrap();
        let u = Array::from_slice(&[1.7f32, -2.2, 3.9], &[1, 3], &d).unwrap();
        let y = x.slice_update(&u, &[1, 0], None).unwrap();
        assert_eq!(y.dtype(), DType::I32);
        assert_eq!(y.to_vec::<i32>().unwrap(), vec![0, 0, 0, 1, -2, 3]);
    }
    {
        // An f32 update into bf16 rounds once, as astype.
        let x = Array::zeros(&[5], DType::BF16, &d).unwrap();
        let u = Array::from_slice(&[1.0f32 / 3.0], &[1], &d).unwrap();
        let y = x.slice_assign(&[Slice::range(1, 4)], &u).unwrap();
        let third = round_to(1.0 / 3.0, DType::BF16);
        assert_eq!(y.to_f64_vec().unwrap(), vec![0.0, third, third, third, 0.0]);
    }
    assert_empty(&d);
}

#[test]
fn empty_arrays_and_empty_slices_write_nothing() {
    let d = device();
    {
        let x = Array::zeros(&[0, 3], DType::F32, &d).unwrap();
        let u = Array::zeros(&[0, 2], DType::F32, &d).unwrap();
        let y = x.slice_update(&u, &[1], 1).unwrap();
        assert_eq!(y.shape(), &[0, 3]);
        assert_eq!(y.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    }
    {
        let x = Array::from_slice(&[1i32, 2, 3], &[3], &d).unwrap();
        let u = Array::from_slice(&[9i32], &[1], &d).unwrap();
        let y = x.slice_assign(&[Slice::range(2, 1)], &u).unwrap();
        assert_eq!(y.to_vec::<i32>().unwrap(), vec![1, 2, 3]);
    }
    assert_empty(&d);
}

/// A KV cache `[steps, width]` written one row per step.
fn kv_rows(steps: usize, width: usize, dtype: DType, rng: &mut Rng) -> Vec<Host> {
    (0..steps)
        .map(|_| values(&[1, width], dtype, rng))
        .collect()
}

#[test]
fn kv_cache_writes_in_place_when_donated_and_copies_when_held() {
    let d = device();
    let mut rng = Rng::new(77);
    for dtype in [DType::F32, DType::F16] {
        let (steps, width) = (33, 65);
        let rows = kv_rows(steps, width, dtype, &mut rng);
        let mut want = Host::from_fn(&[steps, width], |_| 0.0);
        let mut cache = Array::zeros(&[steps, width], dtype, &d).unwrap();
        cache.eval().unwrap();
        let flat = d.active_memory();
        let cache_bytes = flat;
        for (t, row) in rows.iter().enumerate() {
            let r = dense(&d, row, dtype);
            r.eval().unwrap();
            d.reset_peak_memory();
            cache = cache.slice_update(&r, &[t as isize, 0], None).unwrap();
            cache.eval().unwrap();
            // Donated: the cache's buffer was written in place, so no
            // cache-sized buffer was taken at any point of the step.
            assert!(
                d.peak_memory() < 2 * cache_bytes,
                "{dtype} step {t}: peak {} for a cache of {cache_bytes}",
                d.peak_memory()
            );
            drop(r);
            assert_eq!(
                d.active_memory(),
                flat,
                "{dtype} step {t}: active memory grew"
            );
            want.data[t * width..(t + 1) * width].copy_from_slice(&row.data);
        }
        assert_eq!(read(&cache), want, "{dtype} donated cache");

        // The same loop keeping every old handle: each step copies, and
        // every old cache keeps the rows it had.
        let mut history = vec![Array::zeros(&[steps, width], dtype, &d).unwrap()];
        for (t, row) in rows.iter().enumerate().take(7) {
            let r = dense(&d, row, dtype);
            let next = history[t].slice_update(&r, &[t as isize, 0], None).unwrap();
            next.eval().unwrap();
            history.push(next);
        }
        for (t, h) in history.iter().enumerate() {
            let mut w = Host::from_fn(&[steps, width], |_| 0.0);
            w.data[..t * width].copy_from_slice(&want.data[..t * width]);
            assert_eq!(read(h), w, "{dtype} kept cache {t}");
        }
        drop((cache, history));
    }
    assert_empty(&d);
}

#[test]
fn a_source_read_by_another_node_is_not_written() {
    let d = device();
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], &d).unwrap();
    x.eval().unwrap();
    let u = Array::from_slice(&[-1.0f32], &[1], &d).unwrap();
    // `x` is dropped, but `s` (another consumer in the same eval) reads it.
    let y = x.slice_update(&u, &[0], 0).unwrap();
    let s = x.sum(None, false).unwrap();
    let v = x.reshape(&[2, 2]).unwrap();
    drop(x);
    wgarray::eval(&[&y, &s, &v]).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![-1.0, 2.0, 3.0, 4.0]);
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![10.0]);
    assert_eq!(v.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    // A lazy source computed in the same eval is donated safely too.
    let z = Array::arange(0.0, 5.0, 1.0, DType::F32, &d)
        .unwrap()
        .multiply(2.0)
        .unwrap()
        .slice_assign(&[Slice::range(1, 3)], &u)
        .unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0, -1.0, -1.0, 6.0, 8.0]);
    drop((u, y, s, v, z));
    assert_empty(&d);
}

/// Host `np.put` with NumPy's cycling of `v`, negative indices wrapping
/// and out-of-range ones clamped.
fn put_reference(x: &[f64], idx: &[i32], v: &[f64]) -> Vec<f64> {
    let mut out = x.to_vec();
    let n = x.len() as i64;
    if v.is_empty() {
        return out;
    }
    for (k, &j) in idx.iter().enumerate() {
        let j = j as i64;
        let j = if j < 0 { j + n } else { j }.clamp(0, n - 1);
        out[j as usize] = v[k % v.len()];
    }
    out
}

#[test]
fn put_matches_numpy_with_cycling_wrapping_and_clamping() {
    let d = device();
    let mut rng = Rng::new(3);
    for (shape, n_idx, n_val) in [
        (vec![1usize], 1usize, 1usize),
        (vec![7], 5, 2),
        (vec![3, 11], 33, 33),
        (vec![1025], 7, 40),
        (vec![5, 7], 9, 0),
        (vec![5, 7], 0, 3),
    ] {
        let size: usize = shape.iter().product();
        // Distinct positions (one value wins where indices repeat), in
        // every form: plain, negative, past the end (clamped to the last).
        let mut pos: Vec<i32> = (0..size as i32).collect();
        for k in (1..pos.len()).rev() {
            pos.swap(k, rng.next_u64() as usize % (k + 1));
        }
        let idx: Vec<i32> = pos
            .iter()
            .take(n_idx)
            .enumerate()
            .map(|(k, &p)| match k % 3 {
                1 => p - size as i32,
                2 if p == size as i32 - 1 => p + 5,
                _ => p,
            })
            .collect();
        let n_idx = idx.len();
        for dtype in [DType::F32, DType::F16, DType::I32, DType::Bool] {
            let x = values(&shape, dtype, &mut rng);
            let v = values(&[n_val], dtype, &mut rng);
            let want = put_reference(&x.data, &idx, &v.data);
            // The values also as a reversed view.
            for (vname, va) in layouts(&d, &v, dtype) {
                let y = dense(&d, &x, dtype)
                    .put(&i(&d, &idx, &[n_idx]), &va)
                    .unwrap();
                assert_eq!(y.shape(), &shape[..]);
                assert_eq!(y.to_f64_vec().unwrap(), want, "{dtype} {shape:?} {vname}");
            }
        }
    }
    assert_empty(&d);
}

#[test]
fn at_set_and_add_scatter_rows() {
    let d = device();
    let mut rng = Rng::new(9);
    let (rows, width) = (7usize, 33usize);
    let idx = [3i32, -1, 0, 3, 99, 3];
    let norm =
        |j: i32| (if j < 0 { j + rows as i32 } else { j }).clamp(0, rows as i32 - 1) as usize;
    for dtype in [DType::F32, DType::F16, DType::I32] {
        let x = values(&[rows, width], dtype, &mut rng);
        let v = values(&[idx.len(), width], dtype, &mut rng);
        let xa = dense(&d, &x, dtype);
        let ia = i(&d, &idx, &[2, 3]);
        let va = upload(&d, &v.data, &[2, 3, width], dtype);
        // add: duplicates (3 three times, 6 twice via -1 and 99) accumulate.
        let mut want = x.clone();
        for (k, &j) in idx.iter().enumerate() {
            for c in 0..width {
                want.data[norm(j) * width + c] += v.data[k * width + c];
            }
        }
        let y = xa.at(&ia).add(&va).unwrap();
        assert_eq!(read(&y), want, "{dtype} at.add");
        // set with distinct rows, a broadcast value row.
        let iu = i(&d, &[5, -7], &[2]);
        let row = values(&[width], dtype, &mut rng);
        let mut want = x.clone();
        for r in [5usize, 0] {
            want.data[r * width..(r + 1) * width].copy_from_slice(&row.data);
        }
        let y = xa.at(&iu).set(&dense(&d, &row, dtype)).unwrap();
        assert_eq!(read(&y), want, "{dtype} at.set");
    }
    assert_empty(&d);
}

#[test]
fn bad_inputs_are_typed_errors_and_leave_nothing_behind() {
    let d = device();
    let x = Array::zeros(&[4, 5], DType::F32, &d).unwrap();
    x.eval().unwrap();
    let u = Array::zeros(&[1, 5], DType::F32, &d).unwrap();
    u.eval().unwrap();
    let (active, nodes) = (d.active_memory(), d.live_nodes());
    let invalid = |r: Result<Array, Error>, op: &str, arg: &str| match r {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.starts_with(op) && m.contains(arg), "{m}")
        }
        other => panic!("{op} {arg}: {other:?}"),
    };
    invalid(
        x.slice_update(&u, &[-1], 0),
        "slice_update",
        "start_indices[0]",
    );
    invalid(
        x.slice_update(&u, &[4], 0),
        "slice_update",
        "passes the end",
    );
    invalid(
        x.slice_update(&u, &[0, 1], 0),
        "slice_update",
        "start_indices",
    );
    invalid(
        x.slice_update(&u, &[0, 1], [0, 0]),
        "slice_update",
        "repeat",
    );
    invalid(
        x.slice_update(&Array::zeros(&[5], DType::F32, &d).unwrap(), &[0], 0),
        "slice_update",
        "`update` has 1",
    );
    assert!(matches!(
        x.slice_update(&u, &[0], 2),
        Err(Error::InvalidAxis {
            op: "slice_update",
            ..
        })
    ));
    invalid(
        x.slice_assign(&[Slice::FULL; 3], &u),
        "slice_assign",
        "`slices`",
    );
    invalid(
        x.slice_assign(&[Slice::step(0)], &u),
        "slice_assign",
        "step",
    );
    assert!(matches!(
        x.slice_assign(&[Slice::range(0, 2), Slice::range(0, 3)], &u),
        Err(Error::ShapeMismatch {
            op: "slice_assign",
            ..
        })
    ));
    let fi = Array::zeros(&[2], DType::F32, &d).unwrap();
    assert!(matches!(
        x.put(&fi, &u),
        Err(Error::DType { op: "put", .. })
    ));
    let idx = i(&d, &[0, 1], &[2]);
    assert!(matches!(
        x.astype(DType::U8).unwrap().put(&idx, &u),
        Err(Error::OpDType { op: "put", .. })
    ));
    assert!(matches!(
        x.at(&idx)
            .set(&Array::zeros(&[3, 5], DType::F32, &d).unwrap()),
        Err(Error::ShapeMismatch { op: "at.set", .. })
    ));
    assert!(matches!(
        x.astype(DType::Bool).unwrap().at(&idx).add(&u),
        Err(Error::DType { op: "at.add", .. })
    ));
    let other = device();
    let far = Array::zeros(&[1, 5], DType::F32, &other).unwrap();
    assert!(matches!(
        x.slice_update(&far, &[0], 0),
        Err(Error::DeviceMismatch {
            op: "slice_update",
            ..
        })
    ));
    drop((fi, idx, far));
    assert_eq!(d.active_memory(), active, "an error path kept memory");
    assert_eq!(d.live_nodes(), nodes, "an error path recorded a node");
    drop((x, u));
    assert_empty(&d);
}

#[test]
fn dispatch_counts_match_the_op_table() {
    // docs/OPS.md: slice_update 1 donated, 2 as a copy; put and at.set 5
    // (two scatters of two and a where), put with values to cycle 7;
    // at.add 3 (a scatter of two and an add).
    let d = device();
    let count = |make: &dyn Fn() -> Array| {
        let y = make();
        let before = d.dispatches();
        y.eval().unwrap();
        d.dispatches() - before
    };
    let ready = |shape: &[usize]| {
        let a = Array::zeros(shape, DType::F32, &d).unwrap();
        a.eval().unwrap();
        a
    };
    let (u, idx) = (ready(&[1, 8]), i(&d, &[1, 3], &[2]));
    idx.eval().unwrap();
    assert_eq!(
        count(&|| ready(&[4, 8]).slice_update(&u, &[2, 0], None).unwrap()),
        1,
        "donated"
    );
    let held = ready(&[4, 8]);
    assert_eq!(
        count(&|| held.slice_update(&u, &[2, 0], None).unwrap()),
        2,
        "copy"
    );
    let two = ready(&[2]);
    assert_eq!(count(&|| held.put(&idx, &two).unwrap()), 5, "put");
    // Values to cycle: an index ramp and a gather more.
    assert_eq!(count(&|| held.put(&idx, &u).unwrap()), 7, "put, cycled");
    assert_eq!(count(&|| held.at(&idx).set(&u).unwrap()), 5, "at.set");
    assert_eq!(count(&|| held.at(&idx).add(&u).unwrap()), 3, "at.add");
    drop((u, idx, held, two));
    assert_empty(&d);
}

#[test]
fn a_compiled_step_copies_its_held_input_and_keeps_it() {
    // Inside `compile` the cache is the caller's input (still held), so
    // each replay copies: the input keeps its values on every call.
    let d = device();
    {
        let step = wgarray::compile(|x: &[Array]| {
            Ok(vec![x[0].slice_update(
                &x[1].multiply(2.0)?,
                &[1, 0],
                None,
            )?])
        });
        let cache = Array::from_slice(&[1.0f32; 6], &[3, 2], &d).unwrap();
        for k in 0..3 {
            let row = Array::from_slice(&[k as f32, -1.0], &[1, 2], &d).unwrap();
            let y = step.call(&[&cache, &row]).unwrap().pop().unwrap();
            assert_eq!(
                y.to_vec::<f32>().unwrap(),
                vec![1.0, 1.0, 2.0 * k as f32, -2.0, 1.0, 1.0]
            );
            assert_eq!(cache.to_vec::<f32>().unwrap(), vec![1.0; 6]);
        }
    }
    assert_empty(&d);
}

/// A bool target takes "is non-zero" of float values in every write (as
/// `astype(Bool)` and NumPy): 0.5 and -0.25 are true, 0 is false. `put`,
/// `at.set` and `put_along_axis` once truncated them to 0 (found by an
/// adversarial test pass).
#[test]
fn writes_into_bool_take_non_zero_as_true() {
    let d = device();
    let b = Array::from_slice(&[false; 5], &[5], &d).unwrap();
    let idx = Array::from_slice(&[1i32, 3], &[2], &d).unwrap();
    let v = Array::from_slice(&[0.5f32, -0.25], &[2], &d).unwrap();
    let want = vec![false, true, false, true, false];
    let put = b.put(&idx, &v).unwrap();
    assert_eq!(put.to_vec::<bool>().unwrap(), want, "put");
    let along = b.put_along_axis(&idx, &v, 0).unwrap();
    assert_eq!(along.to_vec::<bool>().unwrap(), want, "put_along_axis");
    let rows = b.reshape(&[5, 1]).unwrap();
    let at = rows.at(&idx).set(&v.reshape(&[2, 1]).unwrap()).unwrap();
    assert_eq!(at.to_vec::<bool>().unwrap(), want, "at.set");
    let upd = Array::from_slice(&[0.5f32, 0.0, -2.0], &[3], &d).unwrap();
    let s = b.slice_update(&upd, &[1], None).unwrap();
    assert_eq!(
        s.to_vec::<bool>().unwrap(),
        [false, true, false, true, false]
    );
    // An integer 2 is true, stored as 1.
    let two = Array::from_slice(&[2i32], &[1], &d).unwrap();
    let p = b
        .put(&Array::from_slice(&[2i32], &[1], &d).unwrap(), &two)
        .unwrap();
    assert_eq!(
        p.astype(DType::I32).unwrap().to_vec::<i32>().unwrap(),
        [0, 0, 1, 0, 0]
    );
    drop((b, idx, v, put, along, rows, at, upd, s, two, p));
    assert_empty(&d);
}

/// Steps of isize::MAX and isize::MIN select one element (NumPy's
/// `a[::sys.maxsize]`), in a view and in a write, without overflow.
#[test]
fn extreme_slice_steps_select_one_element() {
    let d = device();
    let a = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0], &[5], &d).unwrap();
    let first = a.slice(&[Slice::step(isize::MAX)]).unwrap();
    assert_eq!(first.to_vec::<f32>().unwrap(), [1.0]);
    let last = a.slice(&[Slice::step(isize::MIN)]).unwrap();
    assert_eq!(last.to_vec::<f32>().unwrap(), [5.0]);
    let nine = Array::from_slice(&[9.0f32], &[1], &d).unwrap();
    let w = a.slice_assign(&[Slice::step(isize::MAX)], &nine).unwrap();
    assert_eq!(w.to_vec::<f32>().unwrap(), [9.0, 2.0, 3.0, 4.0, 5.0]);
    let w = a.slice_assign(&[Slice::step(isize::MIN)], &nine).unwrap();
    assert_eq!(w.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0, 9.0]);
    let from = a
        .slice(&[Slice::new(Some(isize::MIN), Some(isize::MAX), 2)])
        .unwrap();
    assert_eq!(from.to_vec::<f32>().unwrap(), [1.0, 3.0, 5.0]);
}

/// An index still negative after wrapping once clamps to the first
/// element (row), one past the end to the last (the documented clamping).
#[test]
fn far_out_of_range_indices_clamp_to_the_nearest_end() {
    let d = device();
    let a = Array::zeros(&[3], DType::I32, &d).unwrap();
    let six = Array::from_slice(&[6i32], &[1], &d).unwrap();
    for (i, want) in [
        (-4i32, [6, 0, 0]),
        (i32::MIN, [6, 0, 0]),
        (3, [0, 0, 6]),
        (i32::MAX, [0, 0, 6]),
    ] {
        let idx = Array::from_slice(&[i], &[1], &d).unwrap();
        assert_eq!(
            a.put(&idx, &six).unwrap().to_vec::<i32>().unwrap(),
            want,
            "put {i}"
        );
        let rows = a.reshape(&[3, 1]).unwrap();
        let at = rows.at(&idx).set(&six.reshape(&[1, 1]).unwrap()).unwrap();
        assert_eq!(at.to_vec::<i32>().unwrap(), want, "at.set {i}");
    }
}

/// An update with more leading length-1 axes than the slice has is
/// accepted, as NumPy's `a[0:3] = ones((1, 1, 3))`; other extra axes are a
/// typed error naming the op.
#[test]
fn slice_assign_drops_leading_unit_axes_of_the_update() {
    let d = device();
    let a = Array::zeros(&[4], DType::F32, &d).unwrap();
    let u = Array::from_slice(&[1.0f32, 2.0, 3.0], &[1, 1, 3], &d).unwrap();
    let r = a.slice_assign(&[Slice::range(0, 3)], &u).unwrap();
    assert_eq!(r.shape(), &[4]);
    assert_eq!(r.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 0.0]);
    let bad = Array::zeros(&[2, 3], DType::F32, &d).unwrap();
    assert!(matches!(
        a.slice_assign(&[Slice::range(0, 3)], &bad),
        Err(Error::ShapeMismatch {
            op: "slice_assign",
            ..
        })
    ));
}

/// `slice_update_dynamic` against the host: every dtype, the written axis
/// first, middle and last, starts inside, at the last valid place, past it
/// (clamped) and negative (i32: once from the end of the valid starts),
/// sources as views (copied, never written), updates as views.
#[test]
fn slice_update_dynamic_writes_where_the_device_start_says() {
    let d = device();
    let mut rng = Rng::new(2034);
    for dtype in dtypes(&d) {
        for (shape, axis, n) in [
            (vec![7usize, 3], 0usize, 1usize),
            (vec![2, 33, 5], 1, 4),
            (vec![3, 2, 9], 2, 9),
            (vec![1], 0, 1),
        ] {
            let len = shape[axis];
            let mut ushape = shape.clone();
            ushape[axis] = n;
            let starts = len - n + 1;
            for (given, want) in [
                (0i64, 0usize),
                ((starts - 1) as i64, starts - 1),
                (starts as i64 + 5, starts - 1),
                (-1, starts - 1),
                (-(starts as i64) - 9, 0),
            ] {
                let x = values(&shape, dtype, &mut rng);
                let u = values(&ushape, dtype, &mut rng);
                let mut axes: Vec<(usize, usize, isize)> =
                    shape.iter().map(|&l| (0, l, 1)).collect();
                axes[axis] = (want, n, 1);
                let expect = reference(&x, &axes, &u);
                let ua = dense(&d, &u, dtype);
                let starts_u32 = [given.max(0) as u32];
                let pos = if given < 0 {
                    Array::from_slice(&[given as i32], &[], &d).unwrap()
                } else {
                    Array::from_slice(&starts_u32, &[1], &d).unwrap()
                };
                for (layout, xa) in layouts(&d, &x, dtype) {
                    let y = xa.slice_update_dynamic(&ua, &pos, axis as isize).unwrap();
                    assert_eq!(
                        read(&y),
                        expect,
                        "{dtype} {shape:?} axis {axis} start {given} ({layout})"
                    );
                    assert_eq!(read(&xa), x, "{dtype} {layout}: the source kept its values");
                }
                // A transposed update (a view) is read through its strides.
                if ushape.len() == 2 {
                    let (a, b) = (ushape[0], ushape[1]);
                    let t = Host::from_fn(&[b, a], |c| u.data[c[1] * b + c[0]]);
                    let ut = dense(&d, &t, dtype).transpose();
                    let y = dense(&d, &x, dtype)
                        .slice_update_dynamic(&ut, &pos, axis as isize)
                        .unwrap();
                    assert_eq!(read(&y), expect, "{dtype} transposed update");
                }
            }
        }
    }
    assert_empty(&d);
}

#[test]
fn slice_update_dynamic_refuses_bad_arguments_and_records_nothing() {
    let d = device();
    let x = Array::zeros(&[4, 3], DType::F32, &d).unwrap();
    let u = Array::zeros(&[1, 3], DType::F32, &d).unwrap();
    let pos = Array::from_slice(&[1u32], &[1], &d).unwrap();
    x.eval().unwrap();
    let (active, nodes) = (d.active_memory(), d.live_nodes());
    let bad = |r: wgarray::Result<Array>, what: &str| {
        let e = r.expect_err(what);
        assert!(
            format!("{e}").contains("slice_update_dynamic"),
            "{what}: {e}"
        );
    };
    bad(x.slice_update_dynamic(&u, &pos, 2), "axis out of range");
    bad(
        x.slice_update_dynamic(&Array::zeros(&[1, 2], DType::F32, &d).unwrap(), &pos, 0),
        "not whole on the other axis",
    );
    bad(
        x.slice_update_dynamic(&Array::zeros(&[5, 3], DType::F32, &d).unwrap(), &pos, 0),
        "longer than the axis",
    );
    bad(
        x.slice_update_dynamic(&Array::zeros(&[3], DType::F32, &d).unwrap(), &pos, 0),
        "another rank",
    );
    bad(
        x.slice_update_dynamic(&u, &Array::from_slice(&[1u32, 2], &[2], &d).unwrap(), 0),
        "two starts",
    );
    bad(
        x.slice_update_dynamic(&u, &Array::from_slice(&[1.0f32], &[1], &d).unwrap(), 0),
        "a float start",
    );
    assert_eq!(d.active_memory(), active, "an error path kept memory");
    assert_eq!(d.live_nodes(), nodes, "an error path recorded a node");
    drop((x, u, pos));
    assert_empty(&d);
}

/// The KV-cache loop of a compiled decode step: with `call_donating` the
/// cache is written in its own buffer on every replay (one dispatch, no
/// cache-sized allocation, active memory flat); with `call` it is copied
/// and the caller's cache keeps its values.
#[test]
fn a_donated_compiled_step_writes_its_cache_in_place() {
    let d = device();
    let (ctx, width) = (40usize, 33usize);
    let step = wgarray::compile(|x: &[Array]| {
        let row = x[1].multiply(2.0)?;
        Ok(vec![x[0].slice_update_dynamic(&row, &x[2], 0)?])
    });
    let mut cache = Array::zeros(&[ctx, width], DType::F32, &d).unwrap();
    cache.eval().unwrap();
    let cache_bytes = d.active_memory();
    let mut want = vec![0.0f32; ctx * width];
    for t in 0..ctx {
        let r: Vec<f32> = (0..width).map(|j| (t * 100 + j) as f32).collect();
        let row = Array::from_slice(&r, &[1, width], &d).unwrap();
        let pos = Array::from_slice(&[t as u32], &[1], &d).unwrap();
        row.eval().unwrap();
        let held = d.active_memory();
        d.reset_peak_memory();
        let before = d.dispatches();
        cache = step.call_donating(vec![cache, row, pos]).unwrap().remove(0);
        if t > 0 {
            // The first call traces (and the trace's first run plans).
            assert_eq!(
                d.dispatches() - before,
                2,
                "step {t}: the row's scale and the write"
            );
        }
        assert!(
            d.peak_memory() < held + cache_bytes / 2,
            "step {t}: peak {} with {held} held (a copy of the cache is {cache_bytes})",
            d.peak_memory()
        );
        assert_eq!(d.active_memory(), cache_bytes, "step {t}: active memory");
        for (j, v) in r.iter().enumerate() {
            want[t * width + j] = 2.0 * v;
        }
    }
    assert_eq!(cache.to_vec::<f32>().unwrap(), want);
    // Held by the caller: `call` copies and leaves the cache as it was.
    let row = Array::ones(&[1, width], DType::F32, &d).unwrap();
    let pos = Array::from_slice(&[3u32], &[1], &d).unwrap();
    let y = step.call(&[&cache, &row, &pos]).unwrap().remove(0);
    assert_eq!(
        cache.to_vec::<f32>().unwrap(),
        want,
        "the held cache is unchanged"
    );
    assert_eq!(y.to_vec::<f32>().unwrap()[3 * width], 2.0);
    // A clone kept by the caller is not written either.
    let keep = cache.clone();
    let y2 = step.call_donating(vec![cache, row, pos]).unwrap().remove(0);
    assert_eq!(
        keep.to_vec::<f32>().unwrap(),
        want,
        "a clone kept its values"
    );
    assert_eq!(y2.to_vec::<f32>().unwrap()[3 * width], 2.0);
    drop((step, keep, y, y2));
    assert_empty(&d);
}
