//! `concatenate`, `stack`, `topk` and `max_with_index` against host f64
//! references: random data, odd sizes, many inputs (several dispatch
//! groups), 16-bit dtypes, dtype promotion, transposed and step-sliced
//! inputs, NaN and ties, poisoned pools, typed errors and lifetimes.

mod common;

use common::reference::{strides, unravel};
use common::{Rng, assert_empty, device, poison_pool};
use wgarray::{Array, DType, Device, Error, Slice, concatenate, stack};

/// Row-major host array.
#[derive(Clone, Debug)]
struct Host {
    data: Vec<f64>,
    shape: Vec<usize>,
}

impl Host {
    fn random(shape: &[usize], rng: &mut Rng) -> Host {
        let n = shape.iter().product();
        // Quarter steps in [-4, 4]: exact in every dtype, with ties.
        let data = (0..n)
            .map(|_| (rng.f32() as f64 * 16.0).round() / 4.0)
            .collect();
        Host {
            data,
            shape: shape.to_vec(),
        }
    }

    fn at(&self, idx: &[usize]) -> f64 {
        let s = strides(&self.shape);
        self.data[idx.iter().zip(&s).map(|(i, s)| i * s).sum::<usize>()]
    }

    /// All axes reversed (the data of `x.transpose()`).
    fn transposed(&self) -> Host {
        let shape: Vec<usize> = self.shape.iter().rev().copied().collect();
        let n = self.data.len();
        let data = (0..n)
            .map(|i| {
                let mut idx = unravel(i, &shape);
                idx.reverse();
                self.at(&idx)
            })
            .collect();
        Host { data, shape }
    }

    /// Axis 0 sliced `::step` (negative steps from the end).
    fn stepped(&self, step: isize) -> Host {
        let len = self.shape[0] as isize;
        let rows: Vec<isize> = if step > 0 {
            (0..len).step_by(step as usize).collect()
        } else {
            (0..len).rev().step_by((-step) as usize).collect()
        };
        let inner: usize = self.shape[1..].iter().product();
        let mut data = Vec::new();
        for r in &rows {
            data.extend_from_slice(&self.data[*r as usize * inner..(*r as usize + 1) * inner]);
        }
        let mut shape = self.shape.clone();
        shape[0] = rows.len();
        Host { data, shape }
    }

    fn upload(&self, dtype: DType, d: &Device) -> Array {
        let a = match dtype {
            DType::F32 => self.put(d, |x| x as f32),
            DType::F16 => self.put(d, half::f16::from_f64),
            DType::BF16 => self.put(d, half::bf16::from_f64),
            DType::I32 => self.put(d, |x| (x * 4.0) as i32),
            DType::U32 => self.put(d, |x| ((x + 4.0) * 4.0) as u32 * 0x0100_0001),
            DType::Bool => self.put(d, |x| x > 0.0),
            DType::I8 => self.put(d, |x| (x * 4.0) as i8),
            DType::U8 => self.put(d, |x| ((x + 4.0) * 4.0) as u8 * 7),
            DType::I16 => self.put(d, |x| (x * 4.0) as i16 * 1001),
            DType::U16 => self.put(d, |x| ((x + 4.0) * 4.0) as u16 * 2001),
            DType::F64 => Array::from_slice(&self.data, &self.shape, d),
            d => panic!("{d} has no element values"),
        };
        a.unwrap()
    }

    /// The values mapped by `f` to `T`, uploaded in this shape.
    fn put<T: wgarray::Element>(&self, d: &Device, f: impl Fn(f64) -> T) -> wgarray::Result<Array> {
        let v: Vec<T> = self.data.iter().map(|&x| f(x)).collect();
        Array::from_slice(&v, &self.shape, d)
    }

    /// The values `upload(dtype)` stores, as f64.
    fn as_dtype(&self, dtype: DType) -> Host {
        let f = |x: f64| match dtype {
            DType::I32 => (x * 4.0) as i32 as f64,
            DType::U32 => (((x + 4.0) * 4.0) as u32 * 0x0100_0001) as f64,
            DType::Bool => (x > 0.0) as u32 as f64,
            DType::I8 => (x * 4.0) as i8 as f64,
            DType::U8 => (((x + 4.0) * 4.0) as u8 * 7) as f64,
            DType::I16 => ((x * 4.0) as i16 * 1001) as f64,
            DType::U16 => (((x + 4.0) * 4.0) as u16 * 2001) as f64,
            _ => x,
        };
        Host {
            data: self.data.iter().map(|&x| f(x)).collect(),
            shape: self.shape.clone(),
        }
    }
}

/// A device array whose logical contents are `h` (as `dtype`), laid out as
/// `kind`: 0 dense, 1 transposed view, 2 a `::-3` slice of a taller array.
fn make(h: &Host, dtype: DType, kind: usize, rng: &mut Rng, d: &Device) -> (Array, Host) {
    match kind {
        0 => (h.upload(dtype, d), h.as_dtype(dtype)),
        1 => {
            let t = h.transposed();
            (t.upload(dtype, d).transpose(), h.as_dtype(dtype))
        }
        _ => {
            let mut shape = h.shape.clone();
            shape[0] *= 3;
            let tall = Host::random(&shape, rng);
            let view = tall.upload(dtype, d).slice(&[Slice::step(-3)]).unwrap();
            let logical = tall.stepped(-3);
            assert_eq!(logical.shape, view.shape());
            (view, logical.as_dtype(dtype))
        }
    }
}

fn host_concat(parts: &[Host], axis: usize) -> Host {
    let mut shape = parts[0].shape.clone();
    shape[axis] = parts.iter().map(|p| p.shape[axis]).sum();
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|i| {
            let mut idx = unravel(i, &shape);
            let mut j = 0;
            while idx[axis] >= parts[j].shape[axis] {
                idx[axis] -= parts[j].shape[axis];
                j += 1;
            }
            parts[j].at(&idx)
        })
        .collect();
    Host { data, shape }
}

fn same(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g == w || (g.is_nan() && w.is_nan()),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

#[test]
fn concatenate_matches_the_host_on_every_axis_dtype_and_layout() {
    let d = device();
    let mut rng = Rng::new(17);
    for dtype in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
    ] {
        for (base, axis, count) in [
            (vec![7usize], 0usize, 1usize),
            (vec![33], 0, 3),
            (vec![3, 7], 1, 9),
            (vec![7, 3], 0, 2),
            (vec![3, 5, 7], 1, 17),
            (vec![1, 1025], 1, 2),
            (vec![2, 3, 1], 2, 8),
        ] {
            let mut parts = Vec::new();
            let mut hosts = Vec::new();
            for j in 0..count {
                // Odd, varying lengths along the axis (one input is empty).
                let mut shape = base.clone();
                shape[axis] = if j == 1 && count > 2 {
                    0
                } else {
                    base[axis] + j % 3
                };
                let h = Host::random(&shape, &mut rng);
                // Transposed and stepped views need rank >= 2 and a
                // non-empty first axis.
                let kind = if shape.len() >= 2 && shape[0] > 0 {
                    j % 3
                } else {
                    0
                };
                let (a, logical) = make(&h, dtype, kind, &mut rng, &d);
                parts.push(a);
                hosts.push(logical);
            }
            let want = host_concat(&hosts, axis);
            poison_pool(&d, want.data.len());
            let refs: Vec<&Array> = parts.iter().collect();
            let got = concatenate(&refs, axis as isize).unwrap();
            assert_eq!(got.shape(), &want.shape[..]);
            assert_eq!(got.dtype(), dtype);
            same(
                &got.to_f64_vec().unwrap(),
                &want.data,
                &format!("{dtype} {base:?} axis {axis} x{count}"),
            );
            // Negative axes name the same axis.
            let neg = concatenate(&refs, axis as isize - base.len() as isize).unwrap();
            same(&neg.to_f64_vec().unwrap(), &want.data, "negative axis");
        }
    }
    drop(d);
}

#[test]
fn concatenate_at_rank_8_splits_into_groups() {
    // Rank 8 with no axis of length 1: 5 inputs fit one dispatch's
    // parameters, so 7 inputs take two dispatches.
    let d = device();
    let mut rng = Rng::new(3);
    let mut parts = Vec::new();
    let mut hosts = Vec::new();
    for j in 0..7 {
        let h = Host::random(&[2, 2, 2, 2, 2, 2, 2, 1 + j], &mut rng);
        let (a, l) = make(&h, DType::F16, j % 2, &mut rng, &d);
        parts.push(a);
        hosts.push(l);
    }
    let refs: Vec<&Array> = parts.iter().collect();
    let want = host_concat(&hosts, 7);
    poison_pool(&d, want.data.len());
    let got = concatenate(&refs, -1).unwrap();
    same(&got.to_f64_vec().unwrap(), &want.data, "rank 8");
}

#[test]
fn concatenate_promotes_dtypes_and_reads_broadcast_views() {
    let d = device();
    let a = Array::from_slice(&[1i32, -2, 3], &[3], &d).unwrap();
    let b = Array::from_slice(&[0.5f32, 1.5], &[2], &d).unwrap();
    let c = Array::from_slice(&[true, false], &[2], &d).unwrap();
    let ab = concatenate(&[&a, &b, &c], 0).unwrap();
    assert_eq!(ab.dtype(), DType::F32);
    assert_eq!(
        ab.to_vec::<f32>().unwrap(),
        vec![1.0, -2.0, 3.0, 0.5, 1.5, 1.0, 0.0]
    );
    let ac = concatenate(&[&c, &a], 0).unwrap();
    assert_eq!(ac.dtype(), DType::I32);
    assert_eq!(ac.to_vec::<i32>().unwrap(), vec![1, 0, 1, -2, 3]);
    let h = Array::from_slice(&[half::f16::from_f32(0.25)], &[1], &d).unwrap();
    let bf = Array::from_slice(&[half::bf16::from_f32(-8.0)], &[1], &d).unwrap();
    let hb = concatenate(&[&h, &bf], 0).unwrap();
    assert_eq!(hb.dtype(), DType::F32);
    assert_eq!(hb.to_vec::<f32>().unwrap(), vec![0.25, -8.0]);
    // A broadcast view (stride 0) is read in place.
    let s = Array::scalar(7.0, DType::F32, &d)
        .unwrap()
        .broadcast_to(&[2, 3])
        .unwrap();
    let m = Array::from_slice(&[1.0f32, 2.0], &[2, 1], &d).unwrap();
    let sm = concatenate(&[&s, &m], 1).unwrap();
    assert_eq!(
        sm.to_vec::<f32>().unwrap(),
        vec![7.0, 7.0, 7.0, 1.0, 7.0, 7.0, 7.0, 2.0]
    );
}

#[test]
fn stack_matches_the_host() {
    let d = device();
    let mut rng = Rng::new(8);
    for (shape, axis) in [
        (vec![7usize], 0isize),
        (vec![7], 1),
        (vec![3, 33], 1),
        (vec![3, 33], -1),
        (vec![5, 1, 7], 0),
    ] {
        for count in [1usize, 2, 12] {
            let mut parts = Vec::new();
            let mut hosts = Vec::new();
            for j in 0..count {
                let h = Host::random(&shape, &mut rng);
                let kind = if shape.len() >= 2 { j % 3 } else { 0 };
                let (a, l) = make(&h, DType::F32, kind, &mut rng, &d);
                parts.push(a);
                hosts.push(l);
            }
            let nd = shape.len() + 1;
            let ax = if axis < 0 {
                (axis + nd as isize) as usize
            } else {
                axis as usize
            };
            // Host: insert a length-1 axis, then concatenate.
            let expanded: Vec<Host> = hosts
                .iter()
                .map(|h| {
                    let mut s = h.shape.clone();
                    s.insert(ax, 1);
                    Host {
                        data: h.data.clone(),
                        shape: s,
                    }
                })
                .collect();
            let want = host_concat(&expanded, ax);
            let refs: Vec<&Array> = parts.iter().collect();
            let got = stack(&refs, axis).unwrap();
            assert_eq!(got.shape(), &want.shape[..]);
            same(
                &got.to_f64_vec().unwrap(),
                &want.data,
                &format!("stack {shape:?} axis {axis} x{count}"),
            );
        }
    }
}

#[test]
fn concatenate_and_stack_errors_are_typed() {
    let d = device();
    let a = Array::zeros(&[2, 3], DType::F32, &d).unwrap();
    let b = Array::zeros(&[2, 4], DType::F32, &d).unwrap();
    let v = Array::zeros(&[3], DType::F32, &d).unwrap();
    let s = Array::scalar(1.0, DType::F32, &d).unwrap();
    // Which error each bad call gives, as a word.
    let kind = |r: wgarray::Result<Array>| match r {
        Ok(_) => "ok",
        Err(Error::InvalidArgument(_)) => "argument",
        Err(Error::ShapeMismatch { .. }) => "shape",
        Err(Error::InvalidAxis { .. }) => "axis",
        Err(Error::DeviceMismatch {
            op: "concatenate", ..
        }) => "device",
        Err(e) => panic!("{e}"),
    };
    let other = device();
    let o = Array::zeros(&[2, 3], DType::F32, &other).unwrap();
    let cases = [
        ("concatenate of none", concatenate(&[], 0), "argument"),
        ("stack of none", stack(&[], 0), "argument"),
        ("concatenate axis 0", concatenate(&[&a, &b], 0), "shape"),
        ("concatenate axis 1", concatenate(&[&a, &b], 1), "ok"),
        ("concatenate ranks", concatenate(&[&a, &v], 1), "shape"),
        ("concatenate axis 2", concatenate(&[&a, &a], 2), "axis"),
        ("concatenate axis -3", concatenate(&[&a, &a], -3), "axis"),
        ("concatenate scalars", concatenate(&[&s, &s], 0), "argument"),
        ("stack shapes", stack(&[&a, &b], 0), "shape"),
        ("stack axis 3", stack(&[&a, &a], 3), "axis"),
        (
            "concatenate across devices",
            concatenate(&[&a, &o], 0),
            "device",
        ),
    ];
    for (what, r, want) in cases {
        assert_eq!(kind(r), want, "{what}");
    }
    assert_eq!(
        stack(&[&s, &s], 0).unwrap().to_vec::<f32>().unwrap(),
        vec![1.0, 1.0]
    );
}

#[test]
fn concatenate_is_one_node_and_releases_everything() {
    let d = device();
    poison_pool(&d, 4096);
    {
        let mut rng = Rng::new(1);
        let a = Host::random(&[33, 7], &mut rng).upload(DType::F32, &d);
        let b = Host::random(&[7, 33], &mut rng)
            .upload(DType::F32, &d)
            .transpose();
        let nodes = d.live_nodes();
        let c = concatenate(&[&a, &b, &a], 1).unwrap();
        assert_eq!(d.live_nodes(), nodes + 1, "same dtype: one node");
        drop((a, b));
        c.eval().unwrap();
        assert_eq!(d.live_nodes(), 0);
        let s = stack(&[&c, &c], 0).unwrap();
        drop(c);
        s.eval().unwrap();
    }
    assert_empty(&d);
}

// ---- topk -------------------------------------------------------------

/// Host top-k along `axis`: NaN largest, -0 == +0, ties by lower index.
fn host_topk(x: &Host, axis: usize, k: usize) -> (Vec<f64>, Vec<u32>) {
    let mut out_shape = x.shape.clone();
    out_shape[axis] = k;
    let n: usize = out_shape.iter().product();
    let mut vals = vec![0.0; n];
    let mut idxs = vec![0u32; n];
    let outer: Vec<usize> = (0..x.shape.len()).filter(|&a| a != axis).collect();
    let rows: usize = outer.iter().map(|&a| x.shape[a]).product();
    let os = strides(&out_shape);
    for r in 0..rows {
        let mut idx = vec![0; x.shape.len()];
        let mut rem = r;
        for &a in outer.iter().rev() {
            idx[a] = rem % x.shape[a];
            rem /= x.shape[a];
        }
        let mut row: Vec<(f64, usize)> = (0..x.shape[axis])
            .map(|i| {
                idx[axis] = i;
                (x.at(&idx), i)
            })
            .collect();
        row.sort_by(|a, b| match (a.0.is_nan(), b.0.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            _ => b.0.partial_cmp(&a.0).unwrap(),
        });
        for (q, (v, i)) in row.iter().take(k).enumerate() {
            idx[axis] = q;
            let o: usize = idx.iter().zip(&os).map(|(a, b)| a * b).sum();
            vals[o] = *v;
            idxs[o] = *i as u32;
        }
    }
    (vals, idxs)
}

fn check_topk(x: &Array, h: &Host, k: usize, axis: usize, what: &str) {
    let (v, i) = x.topk(k, axis as isize).unwrap();
    let mut shape = h.shape.clone();
    shape[axis] = k;
    assert_eq!(v.shape(), &shape[..], "{what}");
    assert_eq!(i.shape(), &shape[..], "{what}");
    assert_eq!(v.dtype(), x.dtype());
    assert_eq!(i.dtype(), DType::U32);
    let (wv, wi) = host_topk(h, axis, k);
    assert_eq!(i.to_vec::<u32>().unwrap(), wi, "{what}: indices");
    same(&v.to_f64_vec().unwrap(), &wv, &format!("{what}: values"));
}

#[test]
fn topk_matches_the_host_for_odd_sizes_axes_and_layouts() {
    let d = device();
    let mut rng = Rng::new(5);
    for len in [1usize, 7, 33, 256, 257, 1025, 5000] {
        for (shape, axis) in [
            (vec![len], 0usize),
            (vec![3, len], 1),
            (vec![len, 5], 0),
            (vec![2, len, 3], 1),
        ] {
            if shape.iter().product::<usize>() > 20_000 && shape.len() > 1 {
                continue;
            }
            let h = Host::random(&shape, &mut rng);
            for (kind, dtype) in [
                (0, DType::F32),
                (1, DType::F32),
                (2, DType::F32),
                (0, DType::F16),
            ] {
                if kind > 0 && (shape.len() < 2 || shape[0] == 0) {
                    continue;
                }
                let (x, logical) = make(&h, dtype, kind, &mut rng, &d);
                for k in [1usize, 3, 7, 33, 64] {
                    if k > len {
                        continue;
                    }
                    poison_pool(&d, 2 * shape.iter().product::<usize>() / len * k + 1);
                    check_topk(
                        &x,
                        &logical,
                        k,
                        axis,
                        &format!("{dtype} {shape:?} kind {kind} k {k}"),
                    );
                }
            }
        }
    }
}

#[test]
fn topk_in_every_dtype() {
    let d = device();
    let mut rng = Rng::new(6);
    // f64 has no topk (64-bit keys): a typed error, tested below.
    for dtype in DType::ALL.into_iter().filter(|&t| t != DType::F64) {
        for shape in [vec![5usize, 7], vec![3, 300], vec![7, 33]] {
            let h = Host::random(&shape, &mut rng);
            let x = h.upload(dtype, &d);
            for k in [1usize, 2, 5, 7] {
                check_topk(
                    &x,
                    &h.as_dtype(dtype),
                    k,
                    1,
                    &format!("{dtype} {shape:?} k {k}"),
                );
                check_topk(
                    &x,
                    &h.as_dtype(dtype),
                    k.min(3),
                    0,
                    &format!("{dtype} {shape:?} axis 0"),
                );
            }
        }
    }
    // i32 extremes and u32 above 2^31.
    let x = Array::from_slice(&[i32::MIN, -1, 0, i32::MAX, 5], &[5], &d).unwrap();
    let (v, i) = x.topk(5, 0).unwrap();
    assert_eq!(
        v.to_vec::<i32>().unwrap(),
        vec![i32::MAX, 5, 0, -1, i32::MIN]
    );
    assert_eq!(i.to_vec::<u32>().unwrap(), vec![3, 4, 2, 1, 0]);
    let x = Array::from_slice(&[0u32, u32::MAX, 1 << 31, 7], &[4], &d).unwrap();
    let (v, _) = x.topk(4, 0).unwrap();
    assert_eq!(v.to_vec::<u32>().unwrap(), vec![u32::MAX, 1 << 31, 7, 0]);
}

#[test]
fn topk_ranks_nan_first_and_keeps_signed_zeros_in_index_order() {
    let d = device();
    let nan = f32::NAN;
    let data = [
        1.0f32,
        nan,
        -0.0,
        0.0,
        f32::INFINITY,
        nan,
        f32::NEG_INFINITY,
        2.0,
    ];
    let x = Array::from_slice(&data, &[8], &d).unwrap();
    let (v, i) = x.topk(8, 0).unwrap();
    assert_eq!(i.to_vec::<u32>().unwrap(), vec![1, 5, 4, 7, 0, 2, 3, 6]);
    let v = v.to_vec::<f32>().unwrap();
    assert!(v[0].is_nan() && v[1].is_nan());
    assert_eq!(&v[2..5], &[f32::INFINITY, 2.0, 1.0]);
    assert!(v[5] == 0.0 && v[5].is_sign_negative(), "-0 keeps its sign");
    assert!(v[6] == 0.0 && v[6].is_sign_positive());
    assert_eq!(v[7], f32::NEG_INFINITY);
    // The same in a long row (one workgroup per row) and in f16.
    let mut long = vec![-5.0f32; 3000];
    long[2999] = nan;
    long[1000] = 7.0;
    long[10] = 7.0;
    let x = Array::from_slice(&long, &[3000], &d).unwrap();
    let (_, i) = x.topk(4, 0).unwrap();
    assert_eq!(i.to_vec::<u32>().unwrap(), vec![2999, 10, 1000, 0]);
    let h: Vec<half::f16> = data.iter().map(|&x| half::f16::from_f32(x)).collect();
    let x = Array::from_slice(&h, &[8], &d).unwrap();
    let (_, i) = x.topk(8, 0).unwrap();
    assert_eq!(i.to_vec::<u32>().unwrap(), vec![1, 5, 4, 7, 0, 2, 3, 6]);
}

#[test]
fn topk_of_long_ascending_rows_stays_within_llvmpipe_loop_limits() {
    // Ascending: every element enters its thread's list (the worst case).
    let d = device();
    let n = 300_000;
    let x = Array::arange(0.0, n as f64, 1.0, DType::F32, &d).unwrap();
    let (v, i) = x.topk(64, 0).unwrap();
    let want: Vec<u32> = (0..64).map(|j| (n - 1 - j) as u32).collect();
    assert_eq!(i.to_vec::<u32>().unwrap(), want);
    assert_eq!(
        v.to_vec::<f32>().unwrap(),
        want.iter().map(|&j| j as f32).collect::<Vec<_>>()
    );
    // Two long rows, descending, one of them reversed by a view.
    let x = Array::arange(0.0, 2.0 * 70_000.0, 1.0, DType::F32, &d)
        .unwrap()
        .reshape(&[2, 70_000])
        .unwrap()
        .slice(&[Slice::FULL, Slice::step(-1)])
        .unwrap();
    let (_, i) = x.topk(3, 1).unwrap();
    assert_eq!(i.to_vec::<u32>().unwrap(), vec![0, 1, 2, 0, 1, 2]);
}

#[test]
fn max_with_index_matches_max_and_argmax() {
    let d = device();
    let mut rng = Rng::new(12);
    let h = Host::random(&[7, 1025], &mut rng);
    let x = h.upload(DType::F32, &d);
    for axis in [0isize, 1, -1] {
        let (v, i) = x.max_with_index(axis, false).unwrap();
        assert_eq!(
            v.to_vec::<f32>().unwrap(),
            x.max(axis, false).unwrap().to_vec::<f32>().unwrap()
        );
        assert_eq!(
            i.to_vec::<u32>().unwrap(),
            x.argmax(axis, false).unwrap().to_vec::<u32>().unwrap()
        );
        let (v, _) = x.max_with_index(axis, true).unwrap();
        assert_eq!(v.ndim(), 2);
    }
}

#[test]
fn topk_errors_are_typed() {
    let d = device();
    let x = Array::zeros(&[3, 5], DType::F32, &d).unwrap();
    assert!(matches!(x.topk(6, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(x.topk(2, 2), Err(Error::InvalidAxis { .. })));
    let big = Array::zeros(&[100], DType::F32, &d).unwrap();
    assert!(matches!(big.topk(65, 0), Err(Error::InvalidArgument(_))));
    let s = Array::scalar(1.0, DType::F32, &d).unwrap();
    assert!(matches!(s.topk(1, 0), Err(Error::InvalidAxis { .. })));
    let e = Array::zeros(&[0, 4], DType::F32, &d).unwrap();
    let (v, i) = e.topk(2, 1).unwrap();
    assert_eq!(v.shape(), &[0, 2]);
    assert_eq!(i.to_vec::<u32>().unwrap(), Vec::<u32>::new());
    let (v, _) = x.topk(0, 1).unwrap();
    assert_eq!(v.shape(), &[3, 0]);
    assert!(matches!(
        e.max_with_index(0, false),
        Err(Error::EmptyReduction {
            op: "max_with_index",
            ..
        })
    ));
}

#[test]
fn topk_outputs_drop_independently_before_and_after_eval() {
    let d = device();
    poison_pool(&d, 8192);
    let mut rng = Rng::new(77);
    let h = Host::random(&[33, 300], &mut rng);
    let (wv, wi) = host_topk(&h, 1, 5);
    {
        // Values dropped before eval: indices still right.
        let x = h.upload(DType::F32, &d);
        let nodes = d.live_nodes();
        let (v, i) = x.topk(5, 1).unwrap();
        assert_eq!(d.live_nodes(), nodes + 1, "both outputs share one node");
        drop((v, x));
        assert_eq!(i.to_vec::<u32>().unwrap(), wi);
        assert_eq!(d.live_nodes(), 0);
        drop(i);
        assert_empty(&d);
    }
    {
        // Indices dropped before eval.
        let x = h.upload(DType::F32, &d);
        let (v, i) = x.topk(5, 1).unwrap();
        drop((i, x));
        same(&v.to_f64_vec().unwrap(), &wv, "values");
        drop(v);
        assert_empty(&d);
    }
    {
        // Both evaluated, then dropped one at a time: memory shrinks each time.
        let x = h.upload(DType::F32, &d);
        let (v, i) = x.topk(5, 1).unwrap();
        wgarray::eval(&[&v, &i]).unwrap();
        drop(x);
        let both = d.active_memory();
        drop(v);
        let one = d.active_memory();
        assert!(one < both);
        assert_eq!(i.to_vec::<u32>().unwrap(), wi);
        drop(i);
        assert_empty(&d);
    }
    {
        // Both dropped before eval: the node and input go at once.
        let x = h.upload(DType::F32, &d);
        let (v, i) = x.topk(5, 1).unwrap();
        drop((x, i, v));
        assert_empty(&d);
    }
}
