//! `Array::from_ndarray` and `Array::to_ndarray` (feature `ndarray`) on
//! standard, transposed, permuted, reversed, stepped and broadcast
//! ndarray inputs; ndarray's own iteration order is the reference.

mod common;

use common::{Rng, device};
use ndarray::{Array2, Array3, ArrayD, Axis, Ix1, Ix2, Ix3, IxDyn, s};
use wgarray::half::f16;
use wgarray::{Array, DType, Error};

fn random_3d(rng: &mut Rng, shape: (usize, usize, usize)) -> Array3<f32> {
    let v = rng.vec_f32(shape.0 * shape.1 * shape.2);
    Array3::from_shape_vec(shape, v).unwrap()
}

/// The ndarray's elements in logical (row-major) order.
fn logical<T: Copy, D: ndarray::Dimension>(a: &ndarray::ArrayView<'_, T, D>) -> Vec<T> {
    a.iter().copied().collect()
}

#[test]
fn every_layout_uploads_its_logical_elements() {
    let device = device();
    let mut rng = Rng::new(21);
    let a = random_3d(&mut rng, (7, 33, 3));
    let views: Vec<(&str, ndarray::ArrayView3<'_, f32>)> = vec![
        ("standard", a.view()),
        ("transposed", a.t()),
        ("permuted", a.view().permuted_axes([1, 0, 2])),
        ("reversed axis", a.slice(s![..;-1, .., ..])),
        (
            "reversed and permuted",
            a.slice(s![.., ..;-1, ..]).permuted_axes([2, 0, 1]),
        ),
        ("stepped", a.slice(s![1..;2, ..;3, ..])),
        ("one column", a.slice(s![.., 5..6, 1..2])),
        ("negative steps", a.slice(s![..;-2, 3..;-4, ..])),
        ("a single element", a.slice(s![6..7, 32..33, 2..3])),
        ("empty", a.slice(s![3..3, .., ..])),
    ];
    for (what, v) in &views {
        let x = Array::from_ndarray(v, &device).unwrap();
        assert_eq!(x.shape(), v.shape(), "{what}");
        assert_eq!(x.dtype(), DType::F32);
        assert_eq!(x.to_vec::<f32>().unwrap(), logical(v), "{what}");
        // Ops read it through its strides: a reduction and an elementwise op.
        let sum = x.sum(-1isize, false).unwrap().to_vec::<f32>().unwrap();
        let want: Vec<f32> = v.sum_axis(Axis(2)).iter().copied().collect();
        assert_eq!(sum.len(), want.len(), "{what}");
        for (g, w) in sum.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{what}: {g} vs {w}"
            );
        }
        let doubled = (&x * 2.0).unwrap().to_ndarray::<f32, Ix3>().unwrap();
        assert_eq!(doubled, v.mapv(|e| e * 2.0), "{what}");
        // read_into agrees.
        let mut out = vec![0.0f32; v.len()];
        x.read_into(&mut out).unwrap();
        assert_eq!(out, logical(v), "{what}");
    }
    // A broadcast view (stride 0).
    let row = ndarray::Array1::from_vec(rng.vec_f32(33));
    let b = row.broadcast((7, 33)).unwrap();
    let x = Array::from_ndarray(&b, &device).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), logical(&b));
    drop((views, x));
    common::assert_empty(&device);
}

/// A transposed ndarray is uploaded as it lies and read through its
/// strides: a matmul on it matches an f64 reference.
#[test]
fn matmul_on_transposed_and_sliced_inputs() {
    let device = device();
    let mut rng = Rng::new(22);
    let (m, k, n) = (33, 7, 17);
    let a = Array2::from_shape_vec((k, m), rng.vec_f32(k * m)).unwrap(); // a.t() is [m, k]
    let b_big = Array2::from_shape_vec((2 * k, n + 3), rng.vec_f32(2 * k * (n + 3))).unwrap();
    let b = b_big.slice(s![..;2, 1..n + 1]); // [k, n], stepped rows
    let x = Array::from_ndarray(&a.t(), &device).unwrap();
    let y = Array::from_ndarray(&b, &device).unwrap();
    let got = x.matmul(&y).unwrap().to_ndarray::<f32, Ix2>().unwrap();
    let (at, bf) = (a.t().mapv(f64::from), b.mapv(f64::from));
    let want = at.dot(&bf);
    assert_eq!(got.dim(), (m, n));
    for (g, w) in got.iter().zip(want.iter()) {
        assert!(
            (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{g} vs {w}"
        );
    }
    drop((x, y));
    common::assert_empty(&device);
}

#[test]
fn other_dtypes_and_odd_sizes() {
    let device = device();
    let mut rng = Rng::new(23);
    for n in [1, 7, 33, 1025] {
        let ints = ndarray::Array1::from_vec(rng.vec_i32(2 * n, 1000));
        let stepped = ints.slice(s![..;2]);
        let x = Array::from_ndarray(&stepped, &device).unwrap();
        assert_eq!(x.to_ndarray::<i32, Ix1>().unwrap(), stepped);

        let halfs =
            Array2::from_shape_fn((n, 3), |(i, j)| f16::from_f32(i as f32 - j as f32 * 0.5));
        let t = halfs.t();
        let x = Array::from_ndarray(&t, &device).unwrap();
        assert_eq!(x.dtype(), DType::F16);
        assert_eq!(x.to_vec::<f16>().unwrap(), logical(&t));

        let bits = Array2::from_shape_fn((3, n), |_| rng.next_u64() & 1 == 1);
        let rev = bits.slice(s![.., ..;-1]);
        let x = Array::from_ndarray(&rev, &device).unwrap();
        assert_eq!(x.to_ndarray::<bool, Ix2>().unwrap(), rev);
        let t = bits.t();
        let x = Array::from_ndarray(&t, &device).unwrap();
        assert_eq!(x.to_vec::<bool>().unwrap(), logical(&t));

        // Packed small integers from strided views.
        let bytes = Array2::from_shape_fn((3, n), |_| rng.next_u64() as i8);
        let rev = bytes.slice(s![.., ..;-1]);
        let x = Array::from_ndarray(&rev, &device).unwrap();
        assert_eq!(x.dtype(), DType::I8);
        assert_eq!(x.to_ndarray::<i8, Ix2>().unwrap(), rev);
        let shorts = Array2::from_shape_fn((n, 3), |_| rng.next_u64() as u16);
        let t = shorts.t();
        let x = Array::from_ndarray(&t, &device).unwrap();
        assert_eq!(x.to_vec::<u16>().unwrap(), logical(&t));
        // i64 narrows to i32, checked in logical order.
        let wide = Array2::from_shape_fn((n, 2), |(i, j)| i as i64 * 3 - j as i64 * 1000);
        let t = wide.t();
        let x = Array::from_ndarray(&t, &device).unwrap();
        assert_eq!(x.dtype(), DType::I32);
        assert_eq!(x.to_vec::<i64>().unwrap(), logical(&t));
    }
    let mut wide = Array2::<i64>::zeros((3, 4));
    wide[[2, 1]] = -(1 << 35);
    let t = wide.t();
    assert!(matches!(
        Array::from_ndarray(&t, &device),
        Err(wgarray::Error::OutOfRange { index: 5, .. })
    ));
    // 0-dimensional.
    let scalar = ndarray::arr0(2.5f32);
    let x = Array::from_ndarray(&scalar, &device).unwrap();
    assert_eq!(x.shape(), &[] as &[usize]);
    assert_eq!(x.item::<f32>().unwrap(), 2.5);
    assert_eq!(x.to_ndarray::<f32, ndarray::Ix0>().unwrap(), scalar);
    drop(x);
    common::assert_empty(&device);
}

#[test]
fn to_ndarray_checks_dimension_and_dtype() {
    let device = device();
    let mut rng = Rng::new(24);
    let v = rng.vec_f32(7 * 33);
    let x = Array::from_slice(&v, &[7, 33], &device).unwrap();
    let dynamic: ArrayD<f32> = x.to_ndarray::<f32, IxDyn>().unwrap();
    assert_eq!(dynamic.shape(), &[7, 33]);
    assert_eq!(dynamic.iter().copied().collect::<Vec<_>>(), v);
    let start = (device.active_memory(), device.live_arrays());
    let err = x.to_ndarray::<f32, Ix3>().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let err = x.to_ndarray::<i32, Ix2>().unwrap_err();
    assert!(matches!(err, Error::ReadDType { .. }), "{err}");
    assert!(err.to_string().starts_with("to_ndarray::<i32>()"), "{err}");
    assert_eq!((device.active_memory(), device.live_arrays()), start);
    drop(x);
    common::assert_empty(&device);
}
