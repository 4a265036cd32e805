//! The array handle and its shape: constructors and printing, 0-d and
//! rank-8 arrays, empty dimensions, views (negative-step slices, transposes,
//! broadcasts, odd offsets of 2-byte dtypes), split, reshape and squeeze
//! rules, size overflow and the largest storage binding, and typed errors
//! (that leak nothing) while building a graph.
//!
//! A test whose comment starts with a severity (HIGH, MEDIUM, LOW) pins a
//! bug an adversarial review found; the comment says what went wrong and on
//! which backend. All are fixed.

mod common;

use common::arrays::{f, i};
use common::reference::{ravel, unravel};
use common::{R, Rng, assert_empty, device, poison_pool};
use half::{bf16, f16};
use wgarray::shape::INFER;
use wgarray::{Array, DType, Error, Limit, Slice, eval, stack};

#[test]
fn constructors_and_printing() {
    let d = device();
    assert_eq!(
        Array::full(&[3], 2.5, DType::F32, &d)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![2.5; 3]
    );
    assert_eq!(
        Array::ones(&[5], DType::F16, &d)
            .unwrap()
            .to_vec::<half::f16>()
            .unwrap(),
        vec![half::f16::ONE; 5]
    );
    assert_eq!(
        Array::zeros(&[2], DType::Bool, &d)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        vec![false; 2]
    );
    assert_eq!(
        Array::full(&[3], -4.0, DType::I32, &d)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![-4; 3]
    );
    assert_eq!(
        Array::arange(0.0, 1.0, 0.25, DType::F32, &d)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![0.0, 0.25, 0.5, 0.75]
    );
    let r = Array::arange(5.0, 0.0, -2.0, DType::BF16, &d).unwrap();
    assert_eq!(r.shape(), &[3]);
    assert_eq!(r.to_f64_vec().unwrap(), vec![5.0, 3.0, 1.0]);
    assert!(Array::arange(0.0, 1.0, 0.0, DType::F32, &d).is_err());
    let a = Array::from_slice(&[1.0f32, 2.5, 3.0, 4.0, 5.0, 6.0], &[2, 3], &d).unwrap();
    assert_eq!(a.to_string(), "[[1.  2.5 3. ]\n [4.  5.  6. ]]");
    assert_eq!(
        format!("{a:?}"),
        "array([[1. , 2.5, 3. ],\n       [4. , 5. , 6. ]], dtype=float32)"
    );
    assert_eq!(a.ndim(), 2);
    assert_eq!(a.size(), 6);
    assert_eq!(a.nbytes(), 24);
    let s = Array::scalar(7.0, DType::I32, &d).unwrap();
    assert_eq!(s.item::<i32>().unwrap(), 7);
    assert_eq!(s.to_string(), "7");
    let big = Array::arange(0.0, 2000.0, 1.0, DType::I32, &d).unwrap();
    assert_eq!(big.to_string(), "[   0    1    2 ... 1997 1998 1999]");
}

/// Elementwise, readback, reductions, split, take and argmax on the
/// all-axes transpose of a rank-`nd` array.
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
        let s_all = t.sum(None, false)?.item::<f32>()?;
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
        let tk = t.take(&idx, 2)?;
        tk.eval()?;
        let m = t.max(None, false)?.item::<f32>()?;
        assert_eq!(m, (n - 1) as f32);
        let am = t.argmax(None, false)?.item::<u32>()?;
        assert_eq!(got[am as usize], (n - 1) as f32);
    }
    assert_empty(&d);
    Ok(())
}

#[test]
fn scalars_0d() -> R {
    let d = device();
    {
        let s = Array::scalar(3.0, DType::F32, &d)?;
        assert_eq!(s.shape(), &[] as &[usize]);
        assert_eq!(s.sum(None, false)?.item::<f32>()?, 3.0);
        assert_eq!(s.sum(None, true)?.shape(), &[] as &[usize]);
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
fn empty_dims_everywhere() -> R {
    let d = device();
    poison_pool(&d, 1 << 12);
    {
        let z = Array::zeros(&[0, 3], DType::F32, &d).unwrap();
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
        let b = (&z + &Array::ones(&[1, 3], DType::F32, &d).unwrap())?;
        assert_eq!(b.shape(), &[0, 3]);
        assert_eq!(b.to_vec::<f32>()?.len(), 0);
        let bc = Array::ones(&[1, 3], DType::F32, &d)
            .unwrap()
            .broadcast_to(&[0, 3])?;
        assert_eq!(bc.sum(None, false)?.item::<f32>()?, 0.0);
        let t = z.transpose().contiguous()?;
        assert_eq!(t.shape(), &[3, 0]);
        t.eval()?;
        let e = Array::zeros(&[0], DType::I32, &d).unwrap();
        let ee = (&e * &e)?;
        assert_eq!(ee.to_vec::<i32>()?, Vec::<i32>::new());
        let ui = Array::zeros(&[0], DType::U32, &d).unwrap();
        assert!(matches!(
            ui.min(0, false),
            Err(Error::EmptyReduction { .. })
        ));
    }
    assert_empty(&d);
    Ok(())
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
            rr.sum(None, false)?.item::<f32>()?,
            want2.iter().sum::<f32>()
        );
        // reshape of negative-stride view must copy
        let flat = r.reshape(&[INFER])?;
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
    let tk = sb.take(&i(&d, &[2, 0, 1], &[3]), 0)?;
    assert_eq!(tk.to_vec::<bf16>()?, vec![b[5], b[3], b[4]]);
    // matmul on an odd-offset bf16 view
    let mm = xb
        .slice(&[Slice::range(1, 4)])?
        .reshape(&[1, 3])?
        .matmul(&Array::ones(&[3, 1], DType::BF16, &d).unwrap())?;
    assert_eq!(mm.to_vec::<bf16>()?, vec![bf16::from_f32(6.0)]);
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
fn split_into_empty_parts() -> R {
    let d = device();
    {
        let x = i(&d, &[0, 1, 2, 3], &[4]);
        let p = x.split([0, 0, 4, 2], 0)?;
        let sizes: Vec<usize> = p.iter().map(|a| a.size()).collect();
        assert_eq!(sizes, vec![0, 0, 4, 0, 2]); // NumPy: x[0:0], x[0:0], x[0:4], x[4:2], x[2:]
        eval(&p.iter().collect::<Vec<_>>())?;
        assert_eq!(p[2].to_vec::<i32>()?, vec![0, 1, 2, 3]);
        let z = Array::zeros(&[0, 2], DType::F32, &d).unwrap();
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
fn split_by_sections_and_indices_along_any_axis() {
    let d = device();
    let mut rng = Rng::new(5);
    let (r, c) = (7, 33);
    poison_pool(&d, r * c);
    let x = rng.vec_f32(r * c);
    let a = Array::from_slice(&x, &[r, c], &d).unwrap();
    let parts = a.split(3, 1).unwrap();
    for (p, part) in parts.iter().enumerate() {
        assert_eq!(part.shape(), &[r, 11]);
        let got = part.to_vec::<f32>().unwrap();
        for i in 0..r {
            for j in 0..11 {
                assert_eq!(got[i * 11 + j], x[i * c + p * 11 + j]);
            }
        }
    }
    let parts = a.split([2, 5, 5, 100], 0).unwrap();
    let shapes: Vec<_> = parts.iter().map(|p| p.shape()[0]).collect();
    assert_eq!(shapes, vec![2, 3, 0, 2, 0]);
    assert_eq!(parts[1].to_vec::<f32>().unwrap(), x[2 * c..5 * c].to_vec());
    assert_eq!(parts[3].to_vec::<f32>().unwrap(), x[5 * c..].to_vec());
    assert!(parts[2].to_vec::<f32>().unwrap().is_empty());
}

#[test]
fn split_of_two_byte_dtypes_is_exact() {
    let d = device();
    let vals: Vec<half::bf16> = (0..7 * 5)
        .map(|i| half::bf16::from_f32(i as f32 * 0.37 - 3.0))
        .collect();
    let a = Array::from_slice(&vals, &[7, 5], &d).unwrap();
    let parts = a.split([1, 4], 1).unwrap();
    let mid = parts[1].to_vec::<half::bf16>().unwrap();
    for i in 0..7 {
        assert_eq!(&mid[i * 3..i * 3 + 3], &vals[i * 5 + 1..i * 5 + 4]);
    }
    let hv: Vec<half::f16> = (0..9)
        .map(|i| half::f16::from_f32(i as f32 + 0.5))
        .collect();
    let h = Array::from_slice(&hv, &[9], &d).unwrap();
    let p = h.split([3], 0).unwrap();
    assert_eq!(p[1].to_vec::<half::f16>().unwrap(), hv[3..].to_vec());
}

/// Every live part of a split in one dispatch (the fused Q|K|V product's
/// split of a decode step), for 4-, 2- and 1-byte elements, and a dead
/// part skipped.
#[test]
fn split_writes_every_part_in_one_dispatch() {
    let d = device();
    let mut rng = Rng::new(6);
    let (r, c) = (3, 33);
    let x: Vec<f32> = rng.vec_f32(r * c).iter().map(|v| v * 100.0).collect();
    for dtype in [DType::F32, DType::F16, DType::U8] {
        let a = Array::from_slice(&x, &[r, c], &d)
            .unwrap()
            .astype(dtype)
            .unwrap()
            .transpose();
        let want = a.to_f64_vec().unwrap(); // [c, r], row-major
        a.eval().unwrap();
        poison_pool(&d, r * c);
        let mut parts = a.split([7, 9, 20], 0).unwrap();
        parts.remove(2); // dead: nobody reads rows 9..20
        let before = d.dispatches();
        eval(&parts.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(d.dispatches() - before, 1, "{dtype}: one dispatch");
        for (p, rows) in parts.iter().zip([0..7, 7..9, 20..c]) {
            let (lo, hi) = (rows.start, rows.end);
            assert_eq!(p.shape(), &[hi - lo, r]);
            assert_eq!(
                p.to_f64_vec().unwrap(),
                want[lo * r..hi * r].to_vec(),
                "{dtype}"
            );
        }
    }
}

// LOW: reshape([0,-1]) of a size-0 array accepted (NumPy errors)
#[test]
fn reshape_ambiguous_minus_one_on_empty() {
    // NumPy: cannot reshape array of size 0 into shape (0,newaxis)
    let d = device();
    let z = Array::zeros(&[0, 3], DType::F32, &d).unwrap();
    assert!(
        z.reshape(&[0, INFER]).is_err(),
        "reshape([0, INFER]) of size 0 accepted"
    );
}

// LOW: squeeze(&[0,0]) accepted (NumPy: repeated axis)
#[test]
fn squeeze_duplicate_axes() {
    // NumPy: ValueError: repeated axis
    let d = device();
    let z = Array::zeros(&[1, 3], DType::F32, &d).unwrap();
    assert!(z.squeeze([0, 0]).is_err());
}

// LOW, both: reshape([isize::MAX,4,0]) panicked with multiply overflow
#[test]
fn reshape_overflow_is_an_error_not_a_panic() {
    let d = device();
    let z = Array::zeros(&[0], DType::F32, &d).unwrap();
    // A 0 among the lengths: 0 elements, as NumPy (which takes this shape).
    assert_eq!(z.reshape(&[usize::MAX / 2, 4, 0]).unwrap().size(), 0);
    let one = Array::zeros(&[1], DType::F32, &d).unwrap();
    assert!(one.reshape(&[usize::MAX / 2, 4, 2]).is_err());
}

/// Assert that `r` is [`Error::TooLarge`] past `limit`, naming `op`.
fn assert_too_large(r: wgarray::Result<Array>, op: &str, limit: Limit) {
    match r {
        Err(Error::TooLarge {
            op: got, limit: l, ..
        }) if l == limit => assert_eq!(got, op),
        r => panic!("{op}: expected TooLarge ({limit:?}), got {r:?}"),
    }
}

// zeros([2^40, 2^40]) was accepted and its size saturated: now the call
// that asks for the shape says so.
#[test]
fn element_counts_past_usize_are_refused_where_the_shape_is_made() {
    let d = device();
    let too_many = |r, op| assert_too_large(r, op, Limit::Elements);
    let shape = [1 << 40, 1 << 40];
    too_many(Array::zeros(&shape, DType::F32, &d), "zeros");
    too_many(Array::ones(&shape, DType::F32, &d), "ones");
    too_many(Array::full(&shape, 2.0, DType::F32, &d), "full");
    too_many(Array::empty(&shape, DType::F32, &d), "empty");
    too_many(Array::from_slice(&[0.0f32; 0], &shape, &d), "from_slice");
    let s = Array::scalar(1.0, DType::F32, &d).unwrap();
    too_many(s.broadcast_to(&shape), "broadcast_to");
    let key = wgarray::random::key(0, &d).unwrap();
    too_many(wgarray::random::bits(&key, &shape), "random::bits");
    let msg = Array::zeros(&shape, DType::F32, &d)
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("zeros: "), "{msg}");
    assert!(msg.contains("elements"), "{msg}");
    // With a 0 among them the count is 0 (NumPy takes such shapes too).
    assert_eq!(
        Array::zeros(&[1 << 40, 1 << 40, 0], DType::F32, &d)
            .unwrap()
            .size(),
        0
    );
    drop((s, key));
    assert_empty(&d);
}

// The 8-dimension limit: the call that makes a ninth dimension says so,
// not eval.
#[test]
fn a_ninth_dimension_is_refused_where_it_is_made() {
    let d = device();
    let nine = |r: wgarray::Result<Array>, op| {
        assert!(
            matches!(
                r,
                Err(Error::TooLarge {
                    value: 9,
                    max: 8,
                    ..
                })
            ),
            "{op}: {r:?}"
        );
        assert_too_large(r, op, Limit::Dimensions);
    };
    let nine_ones = [1usize; 9];
    nine(Array::zeros(&nine_ones, DType::F32, &d), "zeros");
    nine(Array::full(&nine_ones, 1, DType::I32, &d), "full");
    nine(Array::from_slice(&[1.0f32], &nine_ones, &d), "from_slice");
    let x = Array::ones(&[1; 8], DType::F32, &d).unwrap();
    nine(x.expand_dims(0), "expand_dims");
    nine(x.reshape(&nine_ones), "reshape");
    nine(x.broadcast_to(&[2; 9]), "broadcast_to");
    nine(stack(&[&x, &x], 0), "stack");
    let idx = Array::zeros(&[1, 1], DType::I32, &d).unwrap();
    nine(x.take(&idx, 0), "take");
    let msg = x.expand_dims(0).unwrap_err().to_string();
    assert_eq!(
        msg,
        "expand_dims: 9 dimensions, but the most dimensions an array has is 8 dimensions"
    );
    drop((x, idx));
    assert_empty(&d);
}

#[test]
fn too_large_is_typed() {
    let d = device();
    // One f32 past the largest storage binding (128 MiB on Mesa, 2 GiB
    // on an H200).
    let n = (d.limits().max_storage_buffer_binding_size / 4 + 1) as usize;
    // A constructor refuses at the call; an elementwise result at eval.
    assert!(matches!(
        Array::zeros(&[n], DType::F32, &d),
        Err(Error::TooLarge { op: "zeros", .. })
    ));
    let b = Array::scalar(1.0, DType::F32, &d)
        .unwrap()
        .broadcast_to(&[n])
        .unwrap();
    let r = (&b + 1.0).and_then(|y| y.eval());
    assert!(matches!(r, Err(Error::TooLarge { op: "add", .. })), "{r:?}");
    drop(b);
    assert_empty(&d);
}

#[test]
fn errors_during_graph_building_do_not_leak() {
    let d = device();
    let x = Array::ones(&[3, 4], DType::F32, &d).unwrap();
    let y = Array::ones(&[5], DType::F32, &d).unwrap();
    assert!(matches!(&x + &y, Err(Error::ShapeMismatch { .. })));
    assert!(matches!(x.sum(2, false), Err(Error::InvalidAxis { .. })));
    assert!(matches!(x.sum(-3, false), Err(Error::InvalidAxis { .. })));
    assert!(x.reshape(&[INFER, INFER]).is_err());
    assert!(x.reshape(&[5, INFER]).is_err());
    assert!(matches!(x.split(0, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(x.split(2, 5), Err(Error::InvalidAxis { .. })));
    assert!(x.split(5, 1).is_err());
    assert!(x.permute([0, 0]).is_err());
    assert!(x.permute([0]).is_err());
    assert!(x.slice(&[Slice::step(0)]).is_err());
    assert!(x.slice(&[Slice::FULL, Slice::FULL, Slice::FULL]).is_err());
    assert!(x.broadcast_to(&[4]).is_err());
    assert!(x.broadcast_to(&[2, 4]).is_err());
    assert!(x.matmul(&x).is_err());
    // Integers take the exact matmul path; bool has none.
    assert!(matches!(
        x.astype(DType::Bool)
            .unwrap()
            .matmul(&x.transpose().astype(DType::Bool).unwrap()),
        Err(Error::DType { .. })
    ));
    assert!(
        x.matmul(&x.transpose().astype(DType::BF16).unwrap())
            .is_err()
    );
    assert!(
        Array::ones(&[1, 1, 1, 1, 1, 2, 2], DType::F32, &d)
            .unwrap()
            .matmul(&Array::ones(&[2, 2], DType::F32, &d).unwrap())
            .is_err()
    );
    assert!(Array::from_slice(&[1.0f32, 2.0], &[3], &d).is_err());
    assert!(x.item::<f32>().is_err());
    assert!(x.to_vec::<i32>().is_err());
    assert!(Array::arange(0.0, 1.0, 0.0, DType::F32, &d).is_err());
    assert!(Array::arange(0.0, f64::NAN, 1.0, DType::F32, &d).is_err());
    assert!(x.squeeze(0).is_err());
    assert!(x.expand_dims(3).is_err());
    assert!(x.expand_dims(-4).is_err());
    assert!(
        x.layer_norm(
            Some(&Array::ones(&[3], DType::F32, &d).unwrap()),
            None,
            1e-5
        )
        .is_err()
    );
    assert!(x.addmm(&x, &x.transpose(), 1.0, 1.0).is_err());
    drop((x, y));
    assert_empty(&d);
}

#[test]
fn mismatched_inputs_are_typed_errors() {
    let d = device();
    let a = Array::zeros(&[3], DType::F32, &d).unwrap();
    let b = Array::zeros(&[4], DType::F32, &d).unwrap();
    assert!(matches!(&a + &b, Err(Error::ShapeMismatch { .. })));
    let c = Array::zeros(&[3], DType::I32, &d).unwrap();
    let e = Array::zeros(&[3], DType::BF16, &d).unwrap();
    assert!(matches!(
        Array::from_slice(&[1.0f32, 2.0], &[3], &d),
        Err(Error::DataLength { .. })
    ));
    assert!(matches!(
        a.to_vec::<i32>(),
        Err(Error::ReadDType { op: "to_vec", .. })
    ));
    assert!(matches!(a.item::<f32>(), Err(Error::InvalidArgument(_))));
    let m = Array::zeros(&[2, 3], DType::F32, &d).unwrap();
    assert!(matches!(m.matmul(&m), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(m.split(4, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(m.split(2, 2), Err(Error::InvalidAxis { .. })));
    // Nothing leaked on the error paths.
    drop((a, b, c, e, m));
    assert_empty(&d);
}

#[test]
fn arrays_past_the_largest_storage_binding_are_typed_errors_and_leak_nothing() {
    let d = device();
    let max = d.limits().max_storage_buffer_binding_size;
    let n = (max / 4 + 1024) as usize;
    // A constructor says so at the call (issue 37)...
    assert!(matches!(
        Array::full(&[n], 1.0, DType::F32, &d),
        Err(Error::TooLarge {
            op: "full",
            limit: Limit::StorageBinding,
            ..
        })
    ));
    // ... an elementwise result at eval (fused into a reduction it would
    // need no buffer), under its op's name.
    let one = Array::scalar(1.0f32, DType::F32, &d).unwrap();
    let big = (&one.broadcast_to(&[n]).unwrap() + 1.0).unwrap();
    match big.eval() {
        Err(Error::TooLarge {
            op: "add",
            limit: Limit::StorageBinding,
            value,
            max: m,
        }) => {
            assert_eq!(m, max);
            assert!(value > max);
        }
        r => panic!("expected TooLarge, got {r:?}"),
    }
    drop(one);
    assert!(matches!(
        Array::empty(&[n], DType::F32, &d),
        Err(Error::TooLarge { .. })
    ));
    let host = vec![0u32; n];
    assert!(matches!(
        Array::from_slice(&host, &[n], &d),
        Err(Error::TooLarge { .. })
    ));
    drop((big, host));
    assert_empty(&d);
}
