//! One way to name an axis across the API (`wgarray::axis`): one axis is
//! any integer type, `None` is every axis / the flattened array for every
//! op with that mode (and `Some(axis)` works wherever `None` does), a list
//! where an op takes several. These tests are mostly compile-pass checks
//! of the forms a NumPy, MLX or candle user writes, each result checked
//! against a host computation on random data (shape 3 x 7).

mod common;

use common::arrays::{f, i};
use common::{R, Rng, assert_empty, device, poison_pool};
use wgarray::{Array, Error, concatenate, stack};

const ROWS: usize = 3;
const COLS: usize = 7;

fn data(seed: u64) -> Vec<f32> {
    Rng::new(seed).vec_f32(ROWS * COLS)
}

fn row_sums(v: &[f32]) -> Vec<f64> {
    v.chunks(COLS)
        .map(|r| r.iter().map(|&x| x as f64).sum())
        .collect()
}

fn close(got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((*g as f64 - w).abs() < 1e-5, "{got:?} vs {want:?}");
    }
}

/// The index of the first maximum of `v`.
fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (k, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = k;
        }
    }
    best as u32
}

#[test]
fn one_axis_is_any_integer_type_for_every_op() -> R {
    let d = device();
    poison_pool(&d, 1 << 10);
    let v = data(1);
    let x = f(&d, &v, &[ROWS, COLS]);
    let want = row_sums(&v);
    let (a_i32, a_i64, a_isize): (i32, i64, isize) = (1, -1, -1);
    let (a_usize, a_u32): (usize, u32) = (1, 1);
    // Reductions and the ops that take one axis or None: a literal, and a
    // variable of each integer type.
    for s in [
        x.sum(-1, false)?,
        x.sum(1usize, false)?,
        x.sum(a_i32, false)?,
        x.sum(a_i64, false)?,
        x.sum(a_isize, false)?,
        x.sum(a_usize, false)?,
        x.sum(a_u32, false)?,
        x.sum(Some(-1), false)?,
        x.sum([1], false)?,
    ] {
        close(&s.to_vec::<f32>()?, &want);
    }
    let want_arg: Vec<u32> = v.chunks(COLS).map(argmax).collect();
    for a in [
        x.argmax(-1, false)?,
        x.argmax(a_usize, false)?,
        x.argmax(a_i64, false)?,
        x.argmax(Some(1), false)?,
    ] {
        assert_eq!(a.to_vec::<u32>()?, want_arg);
    }
    let mut want_sorted = v.clone();
    for r in want_sorted.chunks_mut(COLS) {
        r.sort_by(f32::total_cmp);
    }
    assert_eq!(x.sort(-1)?.to_vec::<f32>()?, want_sorted);
    assert_eq!(x.sort(a_u32)?.to_vec::<f32>()?, want_sorted);
    let mut want_cum = Vec::new();
    for r in v.chunks(COLS) {
        let mut acc = 0.0f64;
        for &y in r {
            acc += y as f64;
            want_cum.push(acc);
        }
    }
    close(&x.cumsum(-1, false, true)?.to_vec::<f32>()?, &want_cum);
    close(&x.cumsum(a_usize, false, true)?.to_vec::<f32>()?, &want_cum);
    // Ops on exactly one axis: the same integers.
    let (tv, ti) = x.topk(1, a_usize)?;
    assert_eq!(ti.reshape(&[ROWS])?.to_vec::<u32>()?, want_arg);
    let (mv, _) = x.max_with_index(-1, false)?;
    assert_eq!(mv.to_vec::<f32>()?, tv.reshape(&[ROWS])?.to_vec::<f32>()?);
    let parts = x.split(7, a_i32)?;
    assert_eq!(parts.len(), COLS);
    assert_eq!(parts[2].to_vec::<f32>()?, vec![v[2], v[9], v[16]]);
    let st = stack(&[&x, &x], 2usize)?;
    assert_eq!(st.shape(), &[ROWS, COLS, 2]);
    assert_eq!(x.swapaxes(0usize, -1)?.shape(), &[COLS, ROWS]);
    assert_eq!(x.moveaxis(a_u32, 0)?.shape(), &[COLS, ROWS]);
    assert_eq!(x.flatten(0usize, a_i64)?.to_vec::<f32>()?, v);
    let diag = x.diagonal(0, 0usize, a_i32)?.to_vec::<f32>()?;
    assert_eq!(diag, vec![v[0], v[COLS + 1], v[2 * COLS + 2]]);
    assert_eq!(x.permute([1usize, 0])?.shape(), &[COLS, ROWS]);
    Ok(())
}

#[test]
fn none_is_every_axis_or_the_flattened_array_for_every_op() -> R {
    let d = device();
    poison_pool(&d, 1 << 10);
    let v = data(2);
    let x = f(&d, &v, &[ROWS, COLS]);
    let total: f64 = v.iter().map(|&y| y as f64).sum();
    // Reductions: every axis.
    close(&x.sum(None, false)?.to_vec::<f32>()?, &[total]);
    close(&x.mean(None, true)?.to_vec::<f32>()?, &[total / 21.0]);
    assert_eq!(x.sum(None, true)?.shape(), &[1, 1]);
    let softmax = x.softmax(None)?.to_vec::<f32>()?;
    let m = v.iter().cloned().fold(f32::MIN, f32::max) as f64;
    let z: f64 = v.iter().map(|&y| (y as f64 - m).exp()).sum();
    let want: Vec<f64> = v.iter().map(|&y| (y as f64 - m).exp() / z).collect();
    close(&softmax, &want);
    // Ops on one axis or the flattened array.
    assert_eq!(x.argmax(None, false)?.item::<u32>()?, argmax(&v));
    let mut sorted = v.clone();
    sorted.sort_by(f32::total_cmp);
    assert_eq!(x.sort(None)?.to_vec::<f32>()?, sorted);
    let axis: Option<isize> = None;
    assert_eq!(x.sort(axis)?.to_vec::<f32>()?, sorted);
    let mut acc = 0.0f64;
    let cum: Vec<f64> = v
        .iter()
        .map(|&y| {
            acc += y as f64;
            acc
        })
        .collect();
    close(&x.cumsum(None, false, true)?.to_vec::<f32>()?, &cum);
    let idx = i(&d, &[20, 0, 8], &[3]);
    assert_eq!(
        x.take(&idx, None)?.to_vec::<f32>()?,
        vec![v[20], v[0], v[8]]
    );
    let idx1 = i(&d, &[5], &[1]);
    assert_eq!(x.take_along_axis(&idx1, None)?.to_vec::<f32>()?, vec![v[5]]);
    let both = concatenate(&[&x, &x.slice(&[wgarray::Slice::range(0, 1)])?], None)?;
    assert_eq!(both.to_vec::<f32>()?, [&v[..], &v[..COLS]].concat());
    assert_eq!(x.repeat(2, None)?.shape(), &[2 * ROWS * COLS]);
    let rolled = x.roll(1, None)?.to_vec::<f32>()?;
    assert_eq!(rolled, [&v[20..], &v[..20]].concat());
    // Shape ops: squeeze every length-1 axis, permute reverses.
    assert_eq!(
        x.reshape(&[1, ROWS, 1, COLS])?.squeeze(None)?.shape(),
        &[ROWS, COLS]
    );
    assert_eq!(
        x.permute(None)?.to_vec::<f32>()?,
        x.transpose().to_vec::<f32>()?
    );
    drop((x, idx, idx1, both));
    assert_empty(&d);
    Ok(())
}

#[test]
fn a_list_where_one_axis_is_expected_is_refused_naming_the_op() {
    let d = device();
    let x = f(&d, &data(3), &[ROWS, COLS]);
    let idx = i(&d, &[0], &[1]);
    let named = |r: wgarray::Result<Array>, op: &str| match r {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.starts_with(op), "{op}: {m}");
            assert!(m.contains("one axis"), "{op}: {m}");
        }
        other => panic!("{op}: expected InvalidArgument, got {other:?}"),
    };
    named(x.argmax([0, 1], false), "argmax");
    named(x.sort([0, 1]), "sort");
    named(x.cumsum(vec![0usize, 1], false, true), "cumsum");
    named(x.take(&idx, [0, 1]), "take");
    named(concatenate(&[&x, &x], [0, 1]), "concatenate");
    named(x.roll(1, [0, 1]), "roll");
    // An axis out of range is InvalidAxis whatever its integer type.
    assert!(matches!(
        x.sum(2usize, false),
        Err(Error::InvalidAxis {
            op: "sum",
            axis: 2,
            ndim: 2
        })
    ));
    assert!(matches!(
        x.topk(1, usize::MAX),
        Err(Error::InvalidAxis { op: "topk", .. })
    ));
    assert!(matches!(
        x.split(1, -3i64),
        Err(Error::InvalidAxis {
            op: "split",
            axis: -3,
            ..
        })
    ));
    // expand_dims needs positions: None is refused.
    assert!(matches!(
        x.expand_dims(None),
        Err(Error::InvalidArgument(_))
    ));
}

/// Issue 37: an axis named twice is refused (NumPy: "duplicate value in
/// 'axis'"), where it was silently deduplicated; -1 and 1 of a 2-d array
/// are the same axis.
#[test]
fn an_axis_named_twice_is_refused() {
    let d = device();
    let x = f(&d, &data(4), &[ROWS, COLS]);
    for (r, op) in [
        (x.sum([0, 0], false), "sum"),
        (x.max(&[1isize, -1][..], true), "max"),
        (x.mean(vec![0usize, 1, 0], false), "mean"),
        (x.softmax([1, -1]), "softmax"),
        (x.var([0, 0], false, 0), "var"),
    ] {
        match r {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.starts_with(op) && m.contains("twice"), "{op}: {m}")
            }
            other => panic!("{op}: expected InvalidArgument, got {other:?}"),
        }
    }
    // Distinct axes in any order are fine.
    assert_eq!(x.sum([1, 0], false).unwrap().shape(), &[] as &[usize]);
    drop(x);
    assert_empty(&d);
}

/// Issue 37: `take` clamps (its docs' first line says so), `take_checked`
/// raises at the call with the offending index; both give the same values
/// for indices in range, negative ones included, against the host.
#[test]
fn take_checked_raises_where_take_clamps() -> R {
    let d = device();
    poison_pool(&d, 1 << 10);
    let v = data(5);
    let x = f(&d, &v, &[ROWS, COLS]);
    let ok = i(&d, &[2, -1, 0, -3], &[4]);
    let want: Vec<f32> = [2usize, 2, 0, 0]
        .iter()
        .flat_map(|&r| v[r * COLS..(r + 1) * COLS].to_vec())
        .collect();
    assert_eq!(x.take_checked(&ok, 0)?.to_vec::<f32>()?, want);
    assert_eq!(x.take(&ok, 0)?.to_vec::<f32>()?, want);
    let cols = wgarray::Array::from_slice(&[6u32, 0], &[2], &d)?;
    let wantc: Vec<f32> = (0..ROWS)
        .flat_map(|r| [v[r * COLS + 6], v[r * COLS]])
        .collect();
    assert_eq!(x.take_checked(&cols, -1)?.to_vec::<f32>()?, wantc);
    for (idx, axis, bad, len) in [
        (vec![0, 3], Some(0), 3i64, ROWS),
        (vec![-4, 1], Some(0), -4, ROWS),
        (vec![7, 8, 1], Some(1), 8, COLS),
        (vec![21], None, 21, ROWS * COLS),
    ] {
        let ids = i(&d, &idx, &[idx.len()]);
        match x.take_checked(&ids, axis) {
            Err(e @ Error::IndexOutOfRange { .. }) => {
                assert_eq!(
                    e,
                    Error::IndexOutOfRange {
                        op: "take_checked",
                        index: bad,
                        len
                    }
                );
                assert!(e.to_string().contains(&format!("index {bad}")), "{e}");
            }
            r => panic!("{idx:?}: expected IndexOutOfRange, got {r:?}"),
        }
        // take clamps the same indices silently.
        assert!(x.take(&ids, axis)?.to_vec::<f32>().is_ok());
    }
    // Shape and dtype errors name take_checked, before any read-back.
    let fl = f(&d, &[0.0], &[1]);
    assert!(matches!(
        x.take_checked(&fl, 0),
        Err(Error::OpDType {
            op: "take_checked",
            ..
        })
    ));
    drop((x, ok, cols, fl));
    assert_empty(&d);
    Ok(())
}
