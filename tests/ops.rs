//! Results of the foundation ops against f64 references, on random data,
//! odd sizes and poisoned pools.

mod common;

use common::{Rng, device, matmul_ref, poison_pool, rel_frobenius};
use wgarray::{Array, DType, Error};

const SIZES: [usize; 5] = [1, 7, 33, 1025, 70_000];

#[test]
fn add_and_mul_match_the_reference_at_odd_sizes() {
    let d = device();
    let mut rng = Rng::new(1);
    for &n in &SIZES {
        poison_pool(&d, n);
        let (x, y) = (rng.vec_f32(n), rng.vec_f32(n));
        let a = Array::from_slice(&x, &[n], &d).unwrap();
        let b = Array::from_slice(&y, &[n], &d).unwrap();
        let s = (&a + &b).unwrap();
        let p = (&a * &b).unwrap();
        let q = a.subtract(&b).unwrap().maximum(&a).unwrap();
        wgarray::eval(&[&s, &p, &q]).unwrap();
        let (s, p, q) = (
            s.to_vec::<f32>().unwrap(),
            p.to_vec::<f32>().unwrap(),
            q.to_vec::<f32>().unwrap(),
        );
        for i in 0..n {
            assert_eq!(s[i], x[i] + y[i], "add n={n} i={i}");
            assert_eq!(p[i], x[i] * y[i], "mul n={n} i={i}");
            assert_eq!(q[i], (x[i] - y[i]).max(x[i]), "sub/max n={n} i={i}");
        }
    }
}

#[test]
fn integer_ops_and_broadcasting() {
    let d = device();
    let mut rng = Rng::new(2);
    poison_pool(&d, 7 * 33);
    let (x, y) = (rng.vec_i32(7 * 33, 1000), rng.vec_i32(33, 1000));
    let a = Array::from_slice(&x, &[7, 33], &d).unwrap();
    let b = Array::from_slice(&y, &[33], &d).unwrap();
    let c = (&a * &b).unwrap();
    assert_eq!(c.shape(), &[7, 33]);
    let got = c.to_vec::<i32>().unwrap();
    for i in 0..7 {
        for j in 0..33 {
            assert_eq!(got[i * 33 + j], x[i * 33 + j] * y[j]);
        }
    }
    // [7, 1] + [1, 33] -> [7, 33]
    let col = Array::from_slice(&x[..7], &[7, 1], &d).unwrap();
    let row = Array::from_slice(&y, &[1, 33], &d).unwrap();
    let got = (&col + &row).unwrap().to_vec::<i32>().unwrap();
    for i in 0..7 {
        for j in 0..33 {
            assert_eq!(got[i * 33 + j], x[i] + y[j]);
        }
    }
    // Scalars take the array's dtype.
    let got = (&a + 3.0).unwrap().to_vec::<i32>().unwrap();
    assert_eq!(got[5], x[5] + 3);
}

#[test]
fn mismatched_inputs_are_typed_errors() {
    let d = device();
    let a = Array::zeros(&[3], DType::F32, &d);
    let b = Array::zeros(&[4], DType::F32, &d);
    assert!(matches!(&a + &b, Err(Error::ShapeMismatch { .. })));
    let c = Array::zeros(&[3], DType::I32, &d);
    let e = Array::zeros(&[3], DType::BF16, &d);
    assert!(matches!(
        Array::from_slice(&[1.0f32, 2.0], &[3], &d),
        Err(Error::DataLength { .. })
    ));
    assert!(matches!(a.to_vec::<i32>(), Err(Error::DType { .. })));
    assert!(matches!(a.item::<f32>(), Err(Error::InvalidArgument(_))));
    let m = Array::zeros(&[2, 3], DType::F32, &d);
    assert!(matches!(m.matmul(&m), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(m.split(4, 1), Err(Error::InvalidArgument(_))));
    assert!(matches!(m.split(2, 2), Err(Error::InvalidAxis { .. })));
    // Nothing leaked on the error paths.
    drop((a, b, c, e, m));
    common::assert_empty(&d);
}

#[test]
fn f16_arithmetic_runs_everywhere_through_f32() {
    // Elementwise kernels decode f16 bits to f32 and round back, so they need
    // no SHADER_F16 (GL has none).
    let d = device();
    let a = Array::from_slice(&[half::f16::from_f32(1.5); 3], &[3], &d).unwrap();
    let s = (&a + &a).unwrap();
    assert_eq!(s.dtype(), DType::F16);
    assert_eq!(
        s.to_vec::<half::f16>().unwrap(),
        vec![half::f16::from_f32(3.0); 3]
    );
}

#[test]
fn matmul_matches_the_reference() {
    let d = device();
    let mut rng = Rng::new(3);
    for &(b, m, k, n) in &[
        (1, 1, 1, 1),
        (1, 7, 33, 5),
        (1, 33, 7, 65),
        (3, 17, 9, 33),
        (1, 64, 1025, 3),
    ] {
        poison_pool(&d, b * m * n);
        let x = rng.vec_f32(b * m * k);
        let y = rng.vec_f32(b * k * n);
        let (xs, ys): (Vec<usize>, Vec<usize>) = if b == 1 {
            (vec![m, k], vec![k, n])
        } else {
            (vec![b, m, k], vec![b, k, n])
        };
        let a = Array::from_slice(&x, &xs, &d).unwrap();
        let w = Array::from_slice(&y, &ys, &d).unwrap();
        let c = a.matmul(&w).unwrap();
        let want = matmul_ref(&x, &y, b, m, k, n);
        let err = rel_frobenius(&c.to_vec::<f32>().unwrap(), &want);
        assert!(err < 1e-5, "b={b} m={m} k={k} n={n}: rel err {err}");
    }
}

#[test]
fn matmul_broadcasts_batches_and_takes_vectors() {
    let d = device();
    let mut rng = Rng::new(4);
    let (m, k, n) = (5, 7, 3);
    let x = rng.vec_f32(2 * m * k);
    let y = rng.vec_f32(k * n);
    let a = Array::from_slice(&x, &[2, m, k], &d).unwrap();
    let w = Array::from_slice(&y, &[k, n], &d).unwrap();
    let c = a.matmul(&w).unwrap();
    assert_eq!(c.shape(), &[2, m, n]);
    let mut yy = y.clone();
    yy.extend_from_slice(&y);
    let want = matmul_ref(&x, &yy, 2, m, k, n);
    assert!(rel_frobenius(&c.to_vec::<f32>().unwrap(), &want) < 1e-5);
    // 1-D @ 2-D and 2-D @ 1-D
    let v = Array::from_slice(&x[..k], &[k], &d).unwrap();
    let r = v.matmul(&w).unwrap();
    assert_eq!(r.shape(), &[n]);
    assert!(
        rel_frobenius(
            &r.to_vec::<f32>().unwrap(),
            &matmul_ref(&x[..k], &y, 1, 1, k, n)
        ) < 1e-5
    );
    let col = Array::from_slice(&y[..n], &[n], &d).unwrap();
    let a2 = Array::from_slice(&x[..m * n], &[m, n], &d).unwrap();
    let r = a2.matmul(&col).unwrap();
    assert_eq!(r.shape(), &[m]);
    assert!(
        rel_frobenius(
            &r.to_vec::<f32>().unwrap(),
            &matmul_ref(&x[..m * n], &y[..n], 1, m, n, 1)
        ) < 1e-5
    );
    let dot = v.matmul(&v).unwrap();
    assert_eq!(dot.shape(), &[] as &[usize]);
    let want: f64 = x[..k].iter().map(|&t| t as f64 * t as f64).sum();
    assert!((dot.item::<f32>().unwrap() as f64 - want).abs() < 1e-5);
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

#[test]
fn constructors_and_printing() {
    let d = device();
    assert_eq!(
        Array::full(&[3], 2.5, DType::F32, &d)
            .to_vec::<f32>()
            .unwrap(),
        vec![2.5; 3]
    );
    assert_eq!(
        Array::ones(&[5], DType::F16, &d)
            .to_vec::<half::f16>()
            .unwrap(),
        vec![half::f16::ONE; 5]
    );
    assert_eq!(
        Array::zeros(&[2], DType::Bool, &d)
            .to_vec::<bool>()
            .unwrap(),
        vec![false; 2]
    );
    assert_eq!(
        Array::full(&[3], -4.0, DType::I32, &d)
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

#[test]
fn arrays_past_the_largest_storage_binding_are_typed_errors_and_leak_nothing() {
    let d = device();
    let max = d.limits().max_storage_buffer_binding_size;
    let n = (max / 4 + 1024) as usize;
    let big = Array::full(&[n], 1.0, DType::F32, &d);
    match big.eval() {
        Err(Error::TooLarge { bytes, max: m, .. }) => {
            assert_eq!(m, max);
            assert!(bytes > max);
        }
        r => panic!("expected TooLarge, got {r:?}"),
    }
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
    common::assert_empty(&d);
}
