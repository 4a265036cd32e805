//! `wgarray::fast` (MLX's `mx.fast`): scaled dot-product attention against
//! an f64 host reference, the one-dispatch decode kernel and the
//! composition alike; grouped-query heads, odd sizes, strided views, f16
//! and bf16, a key length read at run time, inside `compile`, bad input.

mod common;

use common::arrays::round_to;
use common::{Rng, device, poison_pool};
use wgarray::fast::{AttentionMask, scaled_dot_product_attention};
use wgarray::{Array, DType, Device, Error, Slice};

/// Host attention in f64: q `[b, hq, tq, d]`, k and v `[b, hkv, tk, d]`
/// (row-major), `keep(b, h, i, j)` whether query i of head h attends key
/// j, `add` added to the scaled scores. NaN for a row with no key.
#[allow(clippy::too_many_arguments)]
fn reference(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    [b, hq, tq, d]: [usize; 4],
    hkv: usize,
    tk: usize,
    scale: f64,
    keep: impl Fn(usize, usize, usize, usize) -> bool,
    add: impl Fn(usize, usize, usize, usize) -> f64,
) -> Vec<f64> {
    let g = hq / hkv;
    let mut out = vec![0.0; b * hq * tq * d];
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / g;
            for i in 0..tq {
                let qr = &q[((bi * hq + h) * tq + i) * d..][..d];
                let mut s = vec![f64::NEG_INFINITY; tk];
                for (j, sj) in s.iter_mut().enumerate() {
                    if keep(bi, h, i, j) {
                        let kr = &k[((bi * hkv + kh) * tk + j) * d..][..d];
                        let dot: f64 = qr.iter().zip(kr).map(|(a, b)| a * b).sum();
                        *sj = dot * scale + add(bi, h, i, j);
                    }
                }
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = s.iter().map(|&x| (x - m).exp()).collect();
                let sum: f64 = w.iter().sum();
                let o = &mut out[((bi * hq + h) * tq + i) * d..][..d];
                for (j, wj) in w.iter().enumerate() {
                    let vr = &v[((bi * hkv + kh) * tk + j) * d..][..d];
                    for (x, &y) in o.iter_mut().zip(vr) {
                        *x += wj * y;
                    }
                }
                for x in o.iter_mut() {
                    *x = if sum > 0.0 { *x / sum } else { f64::NAN };
                }
            }
        }
    }
    out
}

/// Random values rounded to `dtype` (what the device holds).
fn values(rng: &mut Rng, n: usize, dtype: DType) -> Vec<f64> {
    (0..n).map(|_| round_to(rng.f32() as f64, dtype)).collect()
}

fn upload(d: &Device, v: &[f64], shape: &[usize], dtype: DType) -> Array {
    common::arrays::of_dtype(d, v, shape, dtype)
}

/// Worst absolute error against the reference, with NaN where both agree
/// counting as 0 and NaN on one side as infinite.
fn max_err(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(a, b)| match (a.is_nan(), b.is_nan()) {
            (true, true) => 0.0,
            (false, false) => (a - b).abs(),
            _ => f64::INFINITY,
        })
        .fold(0.0, f64::max)
}

fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 2e-5,
        DType::F16 => 2e-3,
        _ => 1.6e-2,
    }
}

/// One decode case: q `[b, hq, 1, dh]` against `tk` keys of `hkv` heads,
/// keys up to `len` (a run-time length) or all; checks the result and the
/// number of dispatches (`vector`: the one kernel).
#[allow(clippy::too_many_arguments)]
fn decode_case(
    d: &Device,
    rng: &mut Rng,
    b: usize,
    hq: usize,
    hkv: usize,
    tk: usize,
    dh: usize,
    len: Option<usize>,
    dtype: DType,
) {
    let qv = values(rng, b * hq * dh, dtype);
    let kv = values(rng, b * hkv * tk * dh, dtype);
    let vv = values(rng, b * hkv * tk * dh, dtype);
    let q = upload(d, &qv, &[b, hq, 1, dh], dtype);
    let k = upload(d, &kv, &[b, hkv, tk, dh], dtype);
    let v = upload(d, &vv, &[b, hkv, tk, dh], dtype);
    let len_a = len.map(|l| Array::from_slice(&[l as u32], &[1], d).unwrap());
    let mask = match &len_a {
        Some(a) => AttentionMask::KeyLength(a),
        None => AttentionMask::None,
    };
    let scale = 1.0 / (dh as f64).sqrt();
    poison_pool(d, b * hq * dh + 64);
    let before = d.dispatches();
    let out = scaled_dot_product_attention(&q, &k, &v, scale, mask).unwrap();
    out.eval().unwrap();
    let dispatches = d.dispatches() - before;
    let want = reference(
        &qv,
        &kv,
        &vv,
        [b, hq, 1, dh],
        hkv,
        tk,
        scale,
        |_, _, _, j| j < len.unwrap_or(tk),
        |_, _, _, _| 0.0,
    );
    let got = out.to_f64_vec().unwrap();
    let err = max_err(&got, &want);
    assert!(
        err <= tolerance(dtype),
        "b {b} hq {hq} hkv {hkv} keys {tk} d {dh} len {len:?} {dtype}: error {err}"
    );
    assert_eq!(out.shape(), &[b, hq, 1, dh]);
    assert_eq!(out.dtype(), dtype);
    assert_eq!(dispatches, 1, "one kernel for keys {tk}, d {dh}");
}

#[test]
fn decode_matches_reference_odd_sizes() {
    let d = device();
    let mut rng = Rng::new(34);
    // Grouped-query (9 query heads over 3 KV heads), odd key counts.
    for tk in [1, 7, 33, 1025] {
        decode_case(&d, &mut rng, 1, 9, 3, tk, 64, None, DType::F32);
    }
    // Multi-head (group 1), multi-query (one KV head), batches, small d.
    decode_case(&d, &mut rng, 2, 7, 7, 33, 4, None, DType::F32);
    decode_case(&d, &mut rng, 3, 5, 1, 65, 8, None, DType::F32);
    decode_case(&d, &mut rng, 1, 16, 1, 130, 128, None, DType::F32);
}

#[test]
fn decode_reads_keys_up_to_a_run_time_length() {
    let d = device();
    let mut rng = Rng::new(35);
    for len in [1, 7, 64, 65, 200] {
        decode_case(&d, &mut rng, 1, 9, 3, 256, 64, Some(len), DType::F32);
    }
    // A length past the keys reads them all.
    decode_case(&d, &mut rng, 1, 9, 3, 33, 64, Some(1000), DType::F32);
}

#[test]
fn decode_in_half_precision() {
    let d = device();
    let mut rng = Rng::new(36);
    // Decoded from their bits: no SHADER_F16 needed, GL included.
    for dtype in [DType::F16, DType::BF16] {
        decode_case(&d, &mut rng, 1, 9, 3, 33, 64, Some(20), dtype);
        decode_case(&d, &mut rng, 2, 6, 2, 7, 12, None, dtype);
    }
}

#[test]
fn zero_length_gives_nan() {
    let d = device();
    let mut rng = Rng::new(37);
    let q = upload(
        &d,
        &values(&mut rng, 9 * 8, DType::F32),
        &[1, 9, 1, 8],
        DType::F32,
    );
    let k = upload(
        &d,
        &values(&mut rng, 3 * 5 * 8, DType::F32),
        &[1, 3, 5, 8],
        DType::F32,
    );
    let len = Array::from_slice(&[0i32], &[], &d).unwrap();
    let out = scaled_dot_product_attention(&q, &k, &k, 0.5, AttentionMask::KeyLength(&len))
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(out.iter().all(|x| x.is_nan()), "{out:?}");
}

/// Strided q, k and v (a KV cache sliced to its first keys, heads
/// transposed), through the one kernel.
#[test]
fn decode_reads_strided_views() {
    let d = device();
    let mut rng = Rng::new(38);
    let (hq, hkv, cap, tk, dh) = (9, 3, 50, 33, 64);
    let qv = values(&mut rng, hq * dh, DType::F32);
    // The cache as [keys, heads, d] in memory, seen as [1, heads, keys, d].
    let kc = values(&mut rng, cap * hkv * dh, DType::F32);
    let vc = values(&mut rng, cap * hkv * dh, DType::F32);
    let view = |v: &[f64]| {
        upload(&d, v, &[cap, hkv, dh], DType::F32)
            .slice(&[Slice::range(0, tk as isize)])
            .unwrap()
            .swapaxes(0, 1)
            .unwrap()
            .reshape(&[1, hkv, tk, dh])
            .unwrap()
    };
    // q as [1, d, heads] transposed.
    let q = upload(&d, &qv, &[1, 1, hq, dh], DType::F32)
        .permute([0, 2, 1, 3])
        .unwrap();
    let (k, v) = (view(&kc), view(&vc));
    let dense = |c: &[f64]| -> Vec<f64> {
        let mut out = vec![0.0; hkv * tk * dh];
        for h in 0..hkv {
            for j in 0..tk {
                for e in 0..dh {
                    out[(h * tk + j) * dh + e] = c[(j * hkv + h) * dh + e];
                }
            }
        }
        out
    };
    let before = d.dispatches();
    let out = scaled_dot_product_attention(&q, &k, &v, 0.125, AttentionMask::Causal).unwrap();
    let got = out.to_f64_vec().unwrap();
    assert_eq!(d.dispatches() - before, 1);
    let want = reference(
        &qv,
        &dense(&kc),
        &dense(&vc),
        [1, hq, 1, dh],
        hkv,
        tk,
        0.125,
        |_, _, _, _| true,
        |_, _, _, _| 0.0,
    );
    assert!(max_err(&got, &want) <= 2e-5);
}

/// More query rows, array masks, odd head sizes: the composition.
#[test]
fn composition_matches_reference() {
    let d = device();
    let mut rng = Rng::new(39);
    let (b, hq, hkv, tq, tk, dh) = (2, 6, 3, 7, 33, 7);
    let qv = values(&mut rng, b * hq * tq * dh, DType::F32);
    let kv = values(&mut rng, b * hkv * tk * dh, DType::F32);
    let vv = values(&mut rng, b * hkv * tk * dh, DType::F32);
    let q = upload(&d, &qv, &[b, hq, tq, dh], DType::F32);
    let k = upload(&d, &kv, &[b, hkv, tk, dh], DType::F32);
    let v = upload(&d, &vv, &[b, hkv, tk, dh], DType::F32);
    let scale = 0.3;
    let check = |mask: AttentionMask<'_>,
                 keep: &dyn Fn(usize, usize, usize, usize) -> bool,
                 add: &dyn Fn(usize, usize, usize, usize) -> f64| {
        let got = scaled_dot_product_attention(&q, &k, &v, scale, mask)
            .unwrap()
            .to_f64_vec()
            .unwrap();
        let want = reference(&qv, &kv, &vv, [b, hq, tq, dh], hkv, tk, scale, keep, add);
        let err = max_err(&got, &want);
        assert!(err <= 2e-5, "{mask:?}: error {err}");
    };
    let zero = |_, _, _, _| 0.0;
    check(AttentionMask::None, &|_, _, _, _| true, &zero);
    check(AttentionMask::Causal, &|_, _, i, j| j <= i + tk - tq, &zero);
    let len = Array::from_slice(&[20i32], &[1], &d).unwrap();
    check(
        AttentionMask::KeyLength(&len),
        &|_, _, i, j| j + tq < 20 + i + 1,
        &zero,
    );
    // A bool mask broadcast over batch and heads.
    let bits: Vec<bool> = (0..tq * tk)
        .map(|_| !rng.next_u64().is_multiple_of(3))
        .collect();
    let m = Array::from_slice(&bits, &[tq, tk], &d).unwrap();
    check(
        AttentionMask::Array(&m),
        &|_, _, i, j| bits[i * tk + j],
        &zero,
    );
    // An additive mask per head.
    let add: Vec<f32> = (0..hq * tq * tk).map(|_| rng.f32()).collect();
    let m = Array::from_slice(&add, &[1, hq, tq, tk], &d).unwrap();
    check(
        AttentionMask::Array(&m),
        &|_, _, _, _| true,
        &|_, h, i, j| add[(h * tq + i) * tk + j] as f64,
    );
}

/// One decode step compiled: the length is an input, so one trace serves
/// every length; memory goes back when the function goes.
#[test]
fn decode_inside_compile() {
    let d = device();
    let mut rng = Rng::new(40);
    let (hq, hkv, tk, dh) = (9, 3, 100, 64);
    let step = wgarray::compile(|x: &[Array]| {
        Ok(vec![scaled_dot_product_attention(
            &x[0],
            &x[1],
            &x[2],
            0.125,
            AttentionMask::KeyLength(&x[3]),
        )?])
    });
    let kv = values(&mut rng, hkv * tk * dh, DType::F32);
    let vv = values(&mut rng, hkv * tk * dh, DType::F32);
    let k = upload(&d, &kv, &[1, hkv, tk, dh], DType::F32);
    let v = upload(&d, &vv, &[1, hkv, tk, dh], DType::F32);
    for len in [1usize, 50, 100] {
        let qv = values(&mut rng, hq * dh, DType::F32);
        let q = upload(&d, &qv, &[1, hq, 1, dh], DType::F32);
        let l = Array::from_slice(&[len as u32], &[1], &d).unwrap();
        let out = step.call(&[&q, &k, &v, &l]).unwrap().remove(0);
        let want = reference(
            &qv,
            &kv,
            &vv,
            [1, hq, 1, dh],
            hkv,
            tk,
            0.125,
            |_, _, _, j| j < len,
            |_, _, _, _| 0.0,
        );
        assert!(max_err(&out.to_f64_vec().unwrap(), &want) <= 2e-5);
    }
    assert_eq!(step.len(), 1, "one trace for every length");
    drop((k, v, step));
    d.synchronize().unwrap();
    common::assert_empty(&d);
}

#[test]
fn bad_input_is_a_typed_error() {
    let d = device();
    let f = |shape: &[usize]| Array::zeros(shape, DType::F32, &d).unwrap();
    let (q, k) = (f(&[1, 4, 1, 8]), f(&[1, 2, 5, 8]));
    let sdpa = |q: &Array, k: &Array, v: &Array, m: AttentionMask<'_>| {
        scaled_dot_product_attention(q, k, v, 0.5, m)
    };
    let none = AttentionMask::None;
    assert!(matches!(
        sdpa(&f(&[4, 1, 8]), &k, &k, none),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        sdpa(&q, &k, &f(&[1, 2, 6, 8]), none),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        sdpa(&q, &f(&[1, 2, 5, 4]), &f(&[1, 2, 5, 4]), none),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        sdpa(&q, &f(&[1, 3, 5, 8]), &f(&[1, 3, 5, 8]), none),
        Err(Error::InvalidArgument(_))
    ));
    let ints = Array::zeros(&[1, 4, 1, 8], DType::I32, &d).unwrap();
    assert!(matches!(
        sdpa(&ints, &k, &k, none),
        Err(Error::OpDType { .. })
    ));
    let half = k.astype(DType::BF16).unwrap();
    assert!(matches!(
        sdpa(&q, &half, &half, none),
        Err(Error::OpDType { .. })
    ));
    assert!(matches!(
        scaled_dot_product_attention(&q, &k, &k, f64::NAN, none),
        Err(Error::InvalidArgument(_))
    ));
    let two = Array::from_slice(&[1u32, 2], &[2], &d).unwrap();
    assert!(matches!(
        sdpa(&q, &k, &k, AttentionMask::KeyLength(&two)),
        Err(Error::InvalidArgument(_))
    ));
    let fl = Array::from_slice(&[1.0f32], &[1], &d).unwrap();
    assert!(matches!(
        sdpa(&q, &k, &k, AttentionMask::KeyLength(&fl)),
        Err(Error::OpDType { .. })
    ));
    assert!(matches!(
        sdpa(&q, &k, &k, AttentionMask::Array(&f(&[2, 5]))),
        Err(Error::ShapeMismatch { .. })
    ));
    let im = Array::zeros(&[1, 5], DType::I32, &d).unwrap();
    assert!(matches!(
        sdpa(&q, &k, &k, AttentionMask::Array(&im)),
        Err(Error::OpDType { .. })
    ));
    drop((q, k, ints, half, two, fl, im));
    common::assert_empty(&d);
}

/// Host RoPE in f64: x `[..., L, D]` row-major.
fn rope_reference(
    x: &[f64],
    shape: &[usize],
    dims: usize,
    traditional: bool,
    base: f64,
    scale: f64,
    offset: i64,
) -> Vec<f64> {
    let d = shape[shape.len() - 1];
    let l = shape[shape.len() - 2];
    let mut out = x.to_vec();
    for (r, row) in out.chunks_mut(d).enumerate() {
        let pos = (offset + (r % l) as i64) as f64 * scale;
        let src = &x[r * d..][..d];
        for i in 0..dims / 2 {
            let (a, b) = if traditional {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + dims / 2)
            };
            let theta = pos * base.powf(-2.0 * i as f64 / dims as f64);
            let (s, c) = theta.sin_cos();
            row[a] = src[a] * c - src[b] * s;
            row[b] = src[a] * s + src[b] * c;
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn rope_case(
    d: &Device,
    rng: &mut Rng,
    shape: &[usize],
    dims: usize,
    traditional: bool,
    offset: i64,
    dynamic: bool,
    dtype: DType,
) {
    let n: usize = shape.iter().product();
    let xv = values(rng, n, dtype);
    let x = upload(d, &xv, shape, dtype);
    let off = Array::from_slice(&[offset as i32], &[1], d).unwrap();
    poison_pool(d, n + 64);
    let before = d.dispatches();
    let y = if dynamic {
        wgarray::fast::rope(&x, dims, traditional, 10000.0, 1.0, &off)
    } else {
        wgarray::fast::rope(&x, dims, traditional, 10000.0, 1.0, offset as i32)
    }
    .unwrap();
    y.eval().unwrap();
    assert_eq!(d.dispatches() - before, 1, "one kernel");
    assert_eq!((y.shape(), y.dtype()), (shape, dtype));
    let want = rope_reference(&xv, shape, dims, traditional, 10000.0, 1.0, offset);
    let err = max_err(&y.to_f64_vec().unwrap(), &want);
    let tol = match dtype {
        DType::F32 => 1e-3,
        _ => tolerance(dtype) + 1e-3,
    };
    assert!(
        err <= tol,
        "{shape:?} dims {dims} traditional {traditional} offset {offset} {dtype}: error {err}"
    );
}

#[test]
fn rope_matches_reference() {
    let d = device();
    let mut rng = Rng::new(41);
    for traditional in [true, false] {
        rope_case(
            &d,
            &mut rng,
            &[1, 9, 1, 64],
            64,
            traditional,
            1000,
            true,
            DType::F32,
        );
        rope_case(
            &d,
            &mut rng,
            &[2, 3, 7, 10],
            8,
            traditional,
            5,
            false,
            DType::F32,
        );
        rope_case(
            &d,
            &mut rng,
            &[1025, 4],
            4,
            traditional,
            -3,
            true,
            DType::F32,
        );
        rope_case(
            &d,
            &mut rng,
            &[3, 33, 6],
            2,
            traditional,
            0,
            false,
            DType::F32,
        );
    }
    for dtype in [DType::F16, DType::BF16] {
        rope_case(&d, &mut rng, &[3, 7, 64], 64, true, 17, true, dtype);
        rope_case(&d, &mut rng, &[1, 5, 6], 4, false, 0, false, dtype);
    }
}

/// A strided x (heads and rows transposed), the scale, the base.
#[test]
fn rope_reads_strided_views() {
    let d = device();
    let mut rng = Rng::new(42);
    let (l, h, dh) = (7, 3, 16);
    let xv = values(&mut rng, l * h * dh, DType::F32);
    // Stored [L, H, D], seen as [H, L, D].
    let x = upload(&d, &xv, &[l, h, dh], DType::F32)
        .swapaxes(0, 1)
        .unwrap();
    let y = wgarray::fast::rope(&x, 12, false, 500.0, 0.5, 3).unwrap();
    let mut dense = vec![0.0; l * h * dh];
    for t in 0..l {
        for hh in 0..h {
            for e in 0..dh {
                dense[(hh * l + t) * dh + e] = xv[(t * h + hh) * dh + e];
            }
        }
    }
    let want = rope_reference(&dense, &[h, l, dh], 12, false, 500.0, 0.5, 3);
    assert!(max_err(&y.to_f64_vec().unwrap(), &want) <= 1e-4);
}

#[test]
fn rope_inside_compile_takes_the_offset_at_run_time() {
    let d = device();
    let mut rng = Rng::new(43);
    let f = wgarray::compile(|x: &[Array]| {
        Ok(vec![wgarray::fast::rope(
            &x[0], 64, true, 100000.0, 1.0, &x[1],
        )?])
    });
    for pos in [0u32, 1, 300] {
        let xv = values(&mut rng, 9 * 64, DType::F32);
        let x = upload(&d, &xv, &[9, 1, 64], DType::F32);
        let p = Array::from_slice(&[pos], &[], &d).unwrap();
        let y = f.call(&[&x, &p]).unwrap().remove(0);
        let want = rope_reference(&xv, &[9, 1, 64], 64, true, 100000.0, 1.0, pos as i64);
        assert!(max_err(&y.to_f64_vec().unwrap(), &want) <= 1e-3);
    }
    assert_eq!(f.len(), 1);
    drop(f);
    d.synchronize().unwrap();
    common::assert_empty(&d);
}

#[test]
fn rope_bad_input_is_a_typed_error() {
    let d = device();
    let x = Array::zeros(&[2, 3, 8], DType::F32, &d).unwrap();
    use wgarray::fast::rope;
    let invalid = |r: wgarray::Result<Array>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(rope(
        &Array::zeros(&[8], DType::F32, &d).unwrap(),
        8,
        true,
        1e4,
        1.0,
        0
    )));
    assert!(invalid(rope(&x, 7, true, 1e4, 1.0, 0)));
    assert!(invalid(rope(&x, 10, true, 1e4, 1.0, 0)));
    assert!(invalid(rope(&x, 0, true, 1e4, 1.0, 0)));
    assert!(invalid(rope(&x, 8, true, -1.0, 1.0, 0)));
    assert!(invalid(rope(&x, 8, true, 1e4, f64::INFINITY, 0)));
    let two = Array::from_slice(&[1u32, 2], &[2], &d).unwrap();
    assert!(invalid(rope(&x, 8, true, 1e4, 1.0, &two)));
    let fl = Array::from_slice(&[1.0f32], &[1], &d).unwrap();
    assert!(matches!(
        rope(&x, 8, true, 1e4, 1.0, &fl),
        Err(Error::OpDType { .. })
    ));
    let ints = Array::zeros(&[2, 3, 8], DType::I32, &d).unwrap();
    assert!(matches!(
        rope(&ints, 8, true, 1e4, 1.0, 0),
        Err(Error::OpDType { .. })
    ));
    drop((x, two, fl, ints));
    common::assert_empty(&d);
}
