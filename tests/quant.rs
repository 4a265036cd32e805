//! Quantized weights against host references written from the formats'
//! definitions (tests/common/quant.rs): ggml's block formats dequantized
//! bit for bit, MLX's affine quantize, dequantize and quantized_matmul, the
//! block formats as arrays (views, memory, bytes as stored), and typed
//! errors for every op that cannot take a block format.

mod common;

use common::quant::{
    affine_dequantize, affine_dequantize_arrays, affine_quant, affine_quantize, dequantize_blocks,
    random_blocks, round_to,
};
use common::reference::{assert_close_scaled, weights_matmul_ref};
use common::{Rng, assert_empty, device, poison_pool};
use wgarray::{Array, DType, Device, Error, Slice, dequantize, quantize, quantized_matmul};

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// An array of `dtype` (f32, f16 or bf16) holding `v` rounded to it, and
/// the rounded values.
fn float_array(v: &[f32], shape: &[usize], dtype: DType, d: &Device) -> (Array, Vec<f32>) {
    let rounded: Vec<f32> = v.iter().map(|&x| round_to(x, dtype)).collect();
    let a = Array::from_slice(&rounded, shape, d)
        .unwrap()
        .astype(dtype)
        .unwrap();
    (a, rounded)
}

fn f32s(a: &Array) -> Vec<f32> {
    a.astype(DType::F32).unwrap().to_vec::<f32>().unwrap()
}

/// Bits of `got` and `want` equal (as f32 bits), else the first mismatch.
fn assert_bits(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!(
            "{what}: element {i} is {} ({:#x}), want {} ({:#x})",
            got[i],
            got[i].to_bits(),
            want[i],
            want[i].to_bits()
        );
    }
}

#[test]
fn block_formats_dequantize_bit_for_bit_as_ggml() {
    let d = device();
    let mut rng = Rng::new(33);
    for dtype in DType::BLOCK_FORMATS {
        let b = dtype.block_size();
        for (n, blocks) in [(1, 1), (7, 3), (33, 2), (1025, 1)] {
            let k = blocks * b;
            let bytes = random_blocks(dtype, n * blocks, &mut rng);
            let want = dequantize_blocks(dtype, &bytes);
            let w = Array::from_blocks(&bytes, &[n, k], dtype, &d).unwrap();
            assert_eq!(w.nbytes(), bytes.len());
            assert_eq!(w.to_blocks().unwrap(), bytes, "{dtype}: stored as given");
            for out in FLOATS {
                poison_pool(&d, n * k);
                let x = dequantize(&w, None, None, None, None, out).unwrap();
                assert_eq!((x.shape(), x.dtype()), (&[n, k][..], out));
                let want: Vec<f32> = want.iter().map(|&v| round_to(v, out)).collect();
                assert_bits(&f32s(&x), &want, &format!("{dtype} [{n}, {k}] to {out}"));
            }
        }
    }
}

#[test]
fn block_format_views_move_whole_rows() {
    let d = device();
    let mut rng = Rng::new(7);
    for dtype in DType::BLOCK_FORMATS {
        let b = dtype.block_size();
        let (n, k) = (9, 2 * b);
        let bytes = random_blocks(dtype, n * 2, &mut rng);
        let rows = dequantize_blocks(dtype, &bytes);
        let row = |i: usize| rows[i * k..(i + 1) * k].to_vec();
        let w = Array::from_blocks(&bytes, &[n, k], dtype, &d).unwrap();
        let deq = |a: &Array| f32s(&dequantize(a, None, None, None, None, DType::F32).unwrap());
        // Odd rows: an offset mid-word (18-byte blocks) and a step.
        let odd = w.slice(&[Slice::new(Some(1), None, 2)]).unwrap();
        let want: Vec<f32> = (1..n).step_by(2).flat_map(row).collect();
        assert_bits(&deq(&odd), &want, &format!("{dtype} odd rows"));
        assert_eq!(
            odd.to_blocks().unwrap(),
            (1..n)
                .step_by(2)
                .flat_map(|i| bytes
                    [i * 2 * dtype.size_in_bytes()..(i + 1) * 2 * dtype.size_in_bytes()]
                    .to_vec())
                .collect::<Vec<u8>>()
        );
        // The second block of every row (a slice of the last axis in whole
        // blocks), reversed rows.
        let second = w
            .slice(&[Slice::step(-1), Slice::range(b as isize, 2 * b as isize)])
            .unwrap();
        let want: Vec<f32> = (0..n).rev().flat_map(|i| row(i)[b..].to_vec()).collect();
        assert_bits(&deq(&second), &want, &format!("{dtype} second blocks"));
        // Reshapes of whole blocks, and a broadcast over a new leading axis.
        let flat = w.reshape(&[n * k]).unwrap();
        assert_bits(&deq(&flat), &rows, &format!("{dtype} flat"));
        let blocks = w.reshape(&[2 * n, b]).unwrap();
        assert_bits(&deq(&blocks), &rows, &format!("{dtype} one block a row"));
        let twice = w.broadcast_to(&[2, n, k]).unwrap();
        let want: Vec<f32> = rows.iter().chain(&rows).copied().collect();
        assert_bits(&deq(&twice), &want, &format!("{dtype} broadcast"));
        assert_bits(
            &deq(&odd.reshape(&[4 * k]).unwrap()),
            &(1..n).step_by(2).flat_map(row).collect::<Vec<_>>(),
            &format!("{dtype} copied then flat"),
        );
        // Rows gathered (an embedding lookup), joined and split.
        let idx = Array::from_slice(&[8i32, 0, 3, 3], &[4], &d).unwrap();
        let taken = w.take(&idx, Some(0)).unwrap();
        let want: Vec<f32> = [8, 0, 3, 3].into_iter().flat_map(row).collect();
        assert_bits(&deq(&taken), &want, &format!("{dtype} take"));
        let joined =
            wgarray::concatenate(&[&w, &odd, &w.slice(&[Slice::range(2, 3)]).unwrap()], 0).unwrap();
        assert_eq!(joined.shape(), &[n + 4 + 1, k]);
        let want: Vec<f32> = (0..n)
            .chain((1..n).step_by(2))
            .chain([2])
            .flat_map(row)
            .collect();
        assert_bits(&deq(&joined), &want, &format!("{dtype} concatenate rows"));
        let wide = wgarray::concatenate(&[&w, &second], 1).unwrap();
        let want: Vec<f32> = (0..n)
            .flat_map(|i| [row(i), row(n - 1 - i)[b..].to_vec()].concat())
            .collect();
        assert_bits(&deq(&wide), &want, &format!("{dtype} concatenate blocks"));
        let parts = w.split([2, 5], 0).unwrap();
        assert_bits(
            &deq(&parts[1]),
            &(2..5).flat_map(row).collect::<Vec<_>>(),
            "split rows",
        );
        let halves = w.split(2, 1).unwrap();
        assert_bits(
            &deq(&halves[0]),
            &(0..n)
                .flat_map(|i| row(i)[..b].to_vec())
                .collect::<Vec<_>>(),
            "split blocks",
        );
        // A contiguous copy keeps the bytes.
        assert_eq!(
            odd.contiguous().unwrap().to_blocks().unwrap(),
            odd.to_blocks().unwrap()
        );
    }
}

#[test]
fn views_that_split_blocks_are_typed_errors() {
    let d = device();
    let mut rng = Rng::new(1);
    let bytes = random_blocks(DType::Q4_0, 4, &mut rng);
    let w = Array::from_blocks(&bytes, &[2, 64], DType::Q4_0, &d).unwrap();
    let invalid = |r: wgarray::Result<Array>| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    };
    invalid(w.reshape(&[4, 32, 1]));
    invalid(w.reshape(&[8, 16]));
    invalid(w.permute([1, 0]));
    invalid(w.expand_dims(-1));
    invalid(w.slice(&[Slice::FULL, Slice::range(0, 16)]));
    invalid(w.slice(&[Slice::FULL, Slice::step(2)]));
    invalid(w.take(&Array::from_slice(&[0i32], &[1], &d).unwrap(), Some(1)));
    invalid(w.take(&Array::from_slice(&[0i32], &[1], &d).unwrap(), None));
    assert!(matches!(w.split([16], 1), Err(Error::InvalidArgument(_))));
    // A transpose cannot refuse at the call (it returns no Result): its
    // eval does, naming it.
    let t = w.transpose();
    match dequantize(&t, None, None, None, None, DType::F32)
        .unwrap()
        .eval()
    {
        Err(Error::OpDType {
            op: "permute",
            dtype: DType::Q4_0,
            ..
        }) => {}
        r => panic!("{r:?}"),
    }
    drop((t, w));
    assert_empty(&d);
    // Shapes and lengths of from_blocks.
    assert!(matches!(
        Array::from_blocks(&bytes, &[2, 48], DType::Q4_0, &d),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Array::from_blocks(&bytes[1..], &[2, 64], DType::Q4_0, &d),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Array::from_blocks(&bytes, &[72], DType::F32, &d),
        Err(Error::OpDType {
            op: "from_blocks",
            ..
        })
    ));
    assert!(matches!(
        Array::from_blocks(&[], &[], DType::Q8_0, &d),
        Err(Error::InvalidArgument(_))
    ));
    assert_empty(&d);
}

#[test]
fn block_arrays_are_arrays_of_their_packed_size() {
    let d = device();
    d.record_memory_history(true);
    let mut rng = Rng::new(5);
    // 7 rows of one Q4_0 block: 126 bytes, padded to a word by the pool.
    let bytes = random_blocks(DType::Q4_0, 7, &mut rng);
    let w = Array::from_blocks(&bytes, &[7, 32], DType::Q4_0, &d).unwrap();
    assert_eq!(w.nbytes(), 126);
    assert_eq!(w.size(), 7 * 32);
    assert!(
        d.active_memory() >= 128 && d.active_memory() < 7 * 32 * 4,
        "{}",
        d.active_memory()
    );
    let snap = d.memory_snapshot();
    let views: Vec<_> = snap.buffers.iter().flat_map(|b| b.arrays.iter()).collect();
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].dtype, DType::Q4_0);
    assert_eq!(views[0].shape, vec![7, 32]);
    drop(snap);
    // Printing shows the dequantized values.
    let shown = format!("{w}");
    assert!(shown.starts_with('['), "{shown}");
    assert_eq!(w.to_f64_vec().unwrap().len(), 7 * 32);
    drop(w);
    d.record_memory_history(false);
    assert_empty(&d);
}

/// Random weights whose groups have a spread of magnitudes, and a few
/// groups that are all zeros, all negative, or constant.
fn weights(n: usize, k: usize, group_size: usize, rng: &mut Rng) -> Vec<f32> {
    let mut w: Vec<f32> = (0..n * k).map(|_| rng.f32() * 2.0).collect();
    for (g, chunk) in w.chunks_mut(group_size).enumerate() {
        match g % 5 {
            1 => chunk.iter_mut().for_each(|v| *v = 0.0),
            2 => chunk.iter_mut().for_each(|v| *v = -v.abs() - 0.5),
            3 => chunk.iter_mut().for_each(|v| *v *= 1e-3),
            _ => {}
        }
    }
    if n * k / group_size > 5 {
        w[4 * group_size..5 * group_size]
            .iter_mut()
            .for_each(|v| *v = 0.75);
    }
    w
}

/// Whether `a / b` in f32 lies within 1e-4 of a rounding tie (x.5): a GPU
/// division may be off by an ulp there (WGSL allows 2.5 ulp).
fn near_tie(v: f32) -> bool {
    (v - v.floor() - 0.5).abs() < 1e-4
}

#[test]
fn affine_quantize_matches_mlx() {
    let d = device();
    let mut rng = Rng::new(11);
    let mut ties = 0usize;
    for bits in [2, 3, 4, 5, 6, 8] {
        for gs in [32, 64, 128] {
            for dtype in FLOATS {
                for (n, groups) in [(1, 1), (7, 3), (33, 2)] {
                    let k = groups * gs;
                    let (w, wv) = float_array(&weights(n, k, gs, &mut rng), &[n, k], dtype, &d);
                    poison_pool(&d, n * k);
                    let (wq, s, b) = quantize(&w, gs, bits).unwrap();
                    let what = format!("{bits} bits, group {gs}, {dtype}, [{n}, {k}]");
                    assert_eq!(wq.shape(), &[n, k * bits as usize / 32], "{what}");
                    assert_eq!(s.shape(), &[n, groups], "{what}");
                    assert_eq!(
                        (s.dtype(), b.dtype(), wq.dtype()),
                        (dtype, dtype, DType::U32)
                    );
                    let (want_q, want_s, want_b) = affine_quantize(&wv, k, gs, bits);
                    let got_q = wq.to_vec::<u32>().unwrap();
                    let (got_s, got_b) = (f32s(&s), f32s(&b));
                    let want_s: Vec<f32> = want_s.iter().map(|&v| round_to(v, dtype)).collect();
                    let want_b: Vec<f32> = want_b.iter().map(|&v| round_to(v, dtype)).collect();
                    assert_bits(&got_b, &want_b, &format!("{what}: biases"));
                    // A scale is edge / q0: equal unless the GPU's division
                    // rounded differently (then within an ulp of the dtype).
                    let ulp = match dtype {
                        DType::F32 => f32::EPSILON,
                        DType::F16 => 1.0 / 1024.0,
                        _ => 1.0 / 128.0,
                    };
                    for (g, (&got, &want)) in got_s.iter().zip(&want_s).enumerate() {
                        if got != want {
                            assert!(
                                (got - want).abs() <= ulp * want.abs(),
                                "{what}: scale {g}: {got} vs {want}"
                            );
                            ties += 1;
                        }
                    }
                    // Quants equal but where the host's value is a hair
                    // from a tie.
                    let per = k * bits as usize / 32;
                    for r in 0..n {
                        for e in 0..k {
                            let (gq, wq_) = (
                                affine_quant(&got_q[r * per..], e, bits),
                                affine_quant(&want_q[r * per..], e, bits),
                            );
                            if gq != wq_ {
                                let (_, s32, b32) =
                                    affine_quantize(&wv[r * k..(r + 1) * k], k, gs, bits);
                                let g = e / gs;
                                let v = (wv[r * k + e] - b32[g]) / s32[g];
                                assert!(
                                    near_tie(v) && gq.abs_diff(wq_) == 1,
                                    "{what}: quant ({r}, {e}) {gq} vs {wq_} ({v})"
                                );
                                ties += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(ties < 8, "{ties} quants off at ties");
}

#[test]
fn quantize_then_dequantize_is_within_a_step() {
    let d = device();
    let mut rng = Rng::new(12);
    for bits in [2, 3, 4, 5, 6, 8] {
        for gs in [32, 64, 128] {
            for dtype in FLOATS {
                let (n, k) = (7, 2 * gs);
                let (w, wv) = float_array(&weights(n, k, gs, &mut rng), &[n, k], dtype, &d);
                let (wq, s, b) = quantize(&w, gs, bits).unwrap();
                let back = dequantize(&wq, &s, &b, gs, bits, None).unwrap();
                assert_eq!(back.dtype(), dtype);
                let got = f32s(&back);
                let (sv, bv) = (f32s(&s), f32s(&b));
                let want = affine_dequantize(&wq.to_vec::<u32>().unwrap(), &sv, &bv, k, gs, bits);
                let what = format!("{bits} bits, group {gs}, {dtype}");
                for i in 0..n * k {
                    // Dequantize: q * scale + bias rounded once (an f32
                    // scale may be fused on the GPU: an ulp).
                    let w_ = round_to(want[i], dtype);
                    assert!(
                        got[i] == w_
                            || (dtype == DType::F32
                                && (got[i] - w_).abs() <= 2.0 * w_.abs() * f32::EPSILON),
                        "{what}: element {i}: {} vs {w_}",
                        got[i]
                    );
                    // Half a step from the weight where the quant did not
                    // clamp; MLX's bound, a step, everywhere (its edge rule
                    // may clamp the far end of a group). Plus the scales'
                    // and biases' rounding to f16 or bf16.
                    let g = i / gs;
                    let step = sv[g].abs();
                    let q = affine_quant(
                        &wq.to_vec::<u32>().unwrap()[(i / k) * (k * bits as usize / 32)..],
                        i % k,
                        bits,
                    );
                    let slack = match dtype {
                        DType::F32 => 1e-6 * (1.0 + wv[i].abs()),
                        DType::F16 => (q as f32 * step + bv[g].abs()) * 1e-3,
                        _ => (q as f32 * step + bv[g].abs()) * 8e-3,
                    };
                    let err = (got[i] - wv[i]).abs();
                    let clamped = q == 0 || q == (1 << bits) - 1;
                    let bound = if clamped { step } else { step / 2.0 };
                    assert!(
                        err <= bound + slack,
                        "{what}: element {i}: |{} - {}| = {err} > {bound} (q {q})",
                        got[i],
                        wv[i]
                    );
                }
                // Groups of zeros come back as zeros, exactly (MLX's test).
                for g in (0..n * k / gs).filter(|g| g % 5 == 1) {
                    assert!(
                        got[g * gs..(g + 1) * gs].iter().all(|&v| v == 0.0),
                        "{what}: zero group {g}"
                    );
                }
            }
        }
    }
}

#[test]
fn affine_views_and_leading_axes() {
    let d = device();
    let mut rng = Rng::new(13);
    let (gs, bits) = (32, 4);
    let w = Array::from_slice(&rng.vec_f32(2 * 6 * 64), &[2, 6, 64], &d).unwrap();
    let (wq, s, b) = quantize(&w, gs, bits).unwrap();
    assert_eq!(wq.shape(), &[2, 6, 8]);
    let all = f32s(&dequantize(&wq, &s, &b, gs, bits, None).unwrap());
    // Every other row of both batches: strided leading axes.
    let pick = [Slice::FULL, Slice::step(2)];
    let part = dequantize(
        &wq.slice(&pick).unwrap(),
        &s.slice(&pick).unwrap(),
        &b.slice(&pick).unwrap(),
        gs,
        bits,
        DType::BF16,
    )
    .unwrap();
    assert_eq!((part.shape(), part.dtype()), (&[2, 3, 64][..], DType::BF16));
    let want: Vec<f32> = (0..2)
        .flat_map(|bt| (0..6).step_by(2).map(move |r| bt * 6 + r))
        .flat_map(|r| all[r * 64..(r + 1) * 64].to_vec())
        .map(|v| round_to(v, DType::BF16))
        .collect();
    assert_bits(&f32s(&part), &want, "strided rows");
}

#[test]
fn quantized_matmul_of_block_formats_matches_f64() {
    let d = device();
    let mut rng = Rng::new(21);
    for dtype in DType::BLOCK_FORMATS {
        let b = dtype.block_size();
        for (m, n, blocks) in [(1, 1, 1), (7, 33, 2), (3, 1025, 1), (33, 7, 1)] {
            let k = blocks * b;
            let bytes = random_blocks(dtype, n * blocks, &mut rng);
            let wv = dequantize_blocks(dtype, &bytes);
            let w = Array::from_blocks(&bytes, &[n, k], dtype, &d).unwrap();
            let x = rng.vec_f32(m * k);
            let xa = Array::from_slice(&x, &[m, k], &d).unwrap();
            poison_pool(&d, m * n);
            let y = quantized_matmul(&xa, &w, None, None, true, None, None).unwrap();
            assert_eq!((y.shape(), y.dtype()), (&[m, n][..], DType::F32));
            let want = weights_matmul_ref(&x, m, &wv, k, n, true);
            assert_close_scaled(
                &y.to_vec::<f32>().unwrap(),
                &want,
                1e-5,
                &format!("{dtype} {m}x{k}x{n}"),
            );
        }
        // x @ W, W [k, n] with blocks along n.
        let (m, k, n) = (3, 7, 2 * b);
        let bytes = random_blocks(dtype, k * 2, &mut rng);
        let wv = dequantize_blocks(dtype, &bytes);
        let w = Array::from_blocks(&bytes, &[k, n], dtype, &d).unwrap();
        let x = rng.vec_f32(m * k);
        let y = quantized_matmul(
            &Array::from_slice(&x, &[m, k], &d).unwrap(),
            &w,
            None,
            None,
            false,
            None,
            None,
        )
        .unwrap();
        assert_eq!(y.shape(), &[m, n]);
        let want = weights_matmul_ref(&x, m, &wv, k, n, false);
        assert_close_scaled(
            &y.to_vec::<f32>().unwrap(),
            &want,
            1e-5,
            &format!("{dtype} x @ W"),
        );
        // x a transposed view (read through its strides).
        let (m, k, n) = (5, 2 * b, 3);
        let bytes = random_blocks(dtype, n * 2, &mut rng);
        let wv = dequantize_blocks(dtype, &bytes);
        let w = Array::from_blocks(&bytes, &[n, k], dtype, &d).unwrap();
        let xt = rng.vec_f32(k * m);
        let x: Vec<f32> = (0..m * k).map(|i| xt[(i % k) * m + i / k]).collect();
        let xa = Array::from_slice(&xt, &[k, m], &d).unwrap().transpose();
        let y = quantized_matmul(&xa, &w, None, None, true, None, None).unwrap();
        let want = weights_matmul_ref(&x, m, &wv, k, n, true);
        assert_close_scaled(
            &y.to_vec::<f32>().unwrap(),
            &want,
            1e-5,
            &format!("{dtype} x transposed"),
        );
        // Batched and 1-D x, and f16 and bf16 activations (the result in
        // their dtype).
        let (n, k) = (5, 2 * b);
        let bytes = random_blocks(dtype, n * 2, &mut rng);
        let wv = dequantize_blocks(dtype, &bytes);
        let w = Array::from_blocks(&bytes, &[n, k], dtype, &d).unwrap();
        for xd in FLOATS {
            // Small, so that products of K-quants' large values stay
            // within f16's range.
            let x: Vec<f32> = rng.vec_f32(2 * 3 * k).iter().map(|v| v / 1024.0).collect();
            let (xa, xr) = float_array(&x, &[2, 3, k], xd, &d);
            let y = quantized_matmul(&xa, &w, None, None, true, None, None).unwrap();
            assert_eq!((y.shape(), y.dtype()), (&[2, 3, n][..], xd));
            let want = weights_matmul_ref(&xr, 6, &wv, k, n, true);
            let tol = if xd == DType::F32 { 1e-5 } else { 1e-2 };
            assert_close_scaled(&f32s(&y), &want, tol, &format!("{dtype} batched {xd}"));
            let v = quantized_matmul(
                &xa.slice(&[Slice::range(1, 2), Slice::range(2, 3)])
                    .unwrap()
                    .reshape(&[k])
                    .unwrap(),
                &w,
                None,
                None,
                true,
                None,
                None,
            )
            .unwrap();
            assert_eq!(v.shape(), &[n]);
            assert_close_scaled(
                &f32s(&v),
                &want[5 * n..6 * n],
                tol,
                &format!("{dtype} 1-D {xd}"),
            );
        }
    }
}

#[test]
fn quantized_matmul_affine_matches_f64() {
    let d = device();
    let mut rng = Rng::new(22);
    for bits in [2, 3, 4, 5, 6, 8] {
        for gs in [32, 64, 128] {
            for (m, n, groups) in [(1, 7, 1), (7, 33, 2), (2, 1025, 1)] {
                let k = groups * gs;
                let w = Array::from_slice(&rng.vec_f32(n * k), &[n, k], &d).unwrap();
                let (wq, s, b) = quantize(&w, gs, bits).unwrap();
                let wv = affine_dequantize_arrays(&wq, &s, &b, k, gs, bits);
                let x = rng.vec_f32(m * k);
                let xa = Array::from_slice(&x, &[m, k], &d).unwrap();
                poison_pool(&d, m * n);
                let y = quantized_matmul(&xa, &wq, &s, &b, true, gs, bits).unwrap();
                let want = weights_matmul_ref(&x, m, &wv, k, n, true);
                assert_close_scaled(
                    &y.to_vec::<f32>().unwrap(),
                    &want,
                    1e-5,
                    &format!("{bits}b g{gs} {m}x{k}x{n}"),
                );
            }
        }
    }
    // Not transposed: W [k, n] quantized along n; f16 scales and
    // activations; batched weights.
    let (k, n, gs, bits) = (64, 96, 32, 4);
    let w = Array::from_slice(&rng.vec_f32(2 * k * n), &[2, k, n], &d)
        .unwrap()
        .astype(DType::F16)
        .unwrap();
    let (wq, s, b) = quantize(&w, gs, bits).unwrap();
    let wv = affine_dequantize_arrays(&wq, &s, &b, n, gs, bits);
    let x = rng.vec_f32(2 * 3 * k);
    let (xa, xr) = float_array(&x, &[2, 3, k], DType::F16, &d);
    let y = quantized_matmul(&xa, &wq, &s, &b, false, gs, bits).unwrap();
    assert_eq!((y.shape(), y.dtype()), (&[2, 3, n][..], DType::F16));
    let got = f32s(&y);
    for bt in 0..2 {
        let want = weights_matmul_ref(&xr[bt * 3 * k..], 3, &wv[bt * k * n..], k, n, false);
        assert_close_scaled(
            &got[bt * 3 * n..(bt + 1) * 3 * n],
            &want,
            2e-3,
            "batched, not transposed",
        );
    }
}

#[test]
fn quantized_errors_are_typed() {
    let d = device();
    let w48 = Array::from_slice(&[0.5f32; 2 * 48], &[2, 48], &d).unwrap();
    // K not a multiple of the group.
    assert!(matches!(
        quantize(&w48, 32, 4),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        quantize(&w48, 48, 4),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        quantize(&w48, 32, 7),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        quantize(&w48.reshape(&[96]).unwrap(), 32, 4),
        Err(Error::InvalidArgument(_))
    ));
    let w = Array::from_slice(&[0.5f32; 2 * 64], &[2, 64], &d).unwrap();
    assert!(matches!(
        quantize(&w.astype(DType::I32).unwrap(), 32, 4),
        Err(Error::OpDType { op: "quantize", .. })
    ));
    let (wq, s, b) = quantize(&w, 32, 4).unwrap();
    // Mismatched group size or bits for the shapes; missing biases.
    assert!(matches!(
        dequantize(&wq, &s, &b, 64, 4, None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        dequantize(&wq, &s, &b, 32, 8, None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        dequantize(&wq, &s, None, 32, 4, None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        dequantize(
            &wq,
            &s,
            &b.slice(&[Slice::range(0, 1)]).unwrap(),
            32,
            4,
            None
        ),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        dequantize(&wq, &s, &b, 32, 4, DType::I32),
        Err(Error::OpDType { .. })
    ));
    assert!(matches!(
        dequantize(&s, &s, &b, 32, 4, None),
        Err(Error::InvalidArgument(_)) | Err(Error::OpDType { .. })
    ));
    let x = Array::from_slice(&[1.0f32; 3 * 48], &[3, 48], &d).unwrap();
    assert!(matches!(
        quantized_matmul(&x, &wq, &s, &b, true, 32, 4),
        Err(Error::ShapeMismatch { .. })
    ));
    let xi = Array::ones(&[3, 64], DType::I32, &d).unwrap();
    assert!(matches!(
        quantized_matmul(&xi, &wq, &s, &b, true, 32, 4),
        Err(Error::OpDType {
            op: "quantized_matmul",
            ..
        })
    ));
    // A block format's array takes no scales.
    let q = Array::from_blocks(
        &common::quant::random_blocks(DType::Q8_0, 2, &mut Rng::new(1)),
        &[2, 32],
        DType::Q8_0,
        &d,
    )
    .unwrap();
    assert!(matches!(
        dequantize(&q, &s, &b, None, None, None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        dequantize(&q, None, None, 64, None, None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(dequantize(&q, None, None, 32, 8, None).is_ok());
    drop((w48, w, wq, s, b, x, xi, q));
    assert_empty(&d);
}

/// Every public op that cannot take a block format refuses one with a
/// typed error naming a dtype of a block format: when called, or (for the
/// few whose signature returns no `Result`, or whose own checks do not
/// look at dtypes) when evaluated. Never a panic, never a result.
#[test]
fn every_other_op_refuses_block_formats() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use wgarray::{Axes, PadMode, random, where_};
    let d = device();
    let mut rng = Rng::new(2);
    let q = Array::from_blocks(
        &random_blocks(DType::Q8_0, 4, &mut rng),
        &[2, 64],
        DType::Q8_0,
        &d,
    )
    .unwrap();
    let x = Array::from_slice(&rng.vec_f32(2 * 64), &[2, 64], &d).unwrap();
    let idx = Array::from_slice(&[0i32, 1], &[2, 1], &d).unwrap();
    let one = |r: wgarray::Result<Array>| r.map(|a| vec![a]);
    let two = |r: wgarray::Result<(Array, Array)>| r.map(|(a, b)| vec![a, b]);
    type Case<'a> = (
        &'static str,
        Box<dyn Fn() -> wgarray::Result<Vec<Array>> + 'a>,
    );
    // One line a case: the name, then what to call.
    fn case<'a>(name: &'static str, f: impl Fn() -> wgarray::Result<Vec<Array>> + 'a) -> Case<'a> {
        (name, Box::new(f))
    }
    let key = random::key(1, &d).unwrap();
    let mut cases: Vec<Case<'_>> = vec![
        case("astype", || one(q.astype(DType::F32))),
        case("astype to", || one(x.astype(DType::Q4_0))),
        case("exp", || one(q.exp())),
        case("negative", || one(q.negative())),
        case("abs", || one(q.abs())),
        case("logical_not", || one(q.logical_not())),
        case("bitwise_invert", || one(q.bitwise_invert())),
        case("add", || one(&q + &x)),
        case("add scalar", || one(&q + 1.0)),
        case("add int", || one(&q + 1)),
        case("multiply", || one(x.multiply(&q))),
        case("equal", || one(q.equal(&q))),
        case("bitwise_and", || one(q.bitwise_and(&q))),
        case("logaddexp", || one(q.logaddexp(&x))),
        case("arctan2", || one(q.arctan2(1.0))),
        case("divmod", || two(q.divmod(2.0))),
        case("where", || one(where_(&q, &x, &x))),
        case("where a", || one(where_(&x, &q, 0.0))),
        case("isnan", || one(q.isnan())),
        case("isfinite", || one(q.isfinite())),
        case("nan_to_num", || one(q.nan_to_num(0.0, None, None))),
        case("isclose", || one(q.isclose(&x, 1e-5, 1e-8, false))),
        case("allclose", || one(q.allclose(&x, 1e-5, 1e-8, false))),
        case("array_equal", || one(q.array_equal(&q, false))),
        case("round_decimals", || one(q.round_decimals(2))),
        case("clip", || one(q.clip(0.0, 1.0))),
        case("sum", || one(q.sum(Axes::All, false))),
        case("max", || one(q.max(-1isize, false))),
        case("mean", || one(q.mean(Axes::All, true))),
        case("all", || one(q.all(Axes::All, false))),
        case("var", || one(q.var(Axes::All, false, 0))),
        case("argmax", || one(q.argmax(Some(1), false))),
        case("moments", || two(q.moments(Axes::All, false, 0))),
        case("logsumexp", || one(q.logsumexp(-1isize, false))),
        case("softmax", || one(q.softmax(-1))),
        case("log_softmax", || one(q.log_softmax(-1))),
        case("layer_norm", || one(q.layer_norm(None, None, 1e-5))),
        case("rms_norm", || one(q.rms_norm(None, 1e-5))),
        case("cumsum", || one(q.cumsum(Some(1), false, true))),
        case("cummax", || one(q.cummax(Some(0), false, true))),
        case("sort", || one(q.sort(Some(0)))),
        case("argsort", || one(q.argsort(Some(0)))),
        case("partition", || one(q.partition(0, Some(0)))),
        case("topk", || two(q.topk(2, 0))),
        case("max_with_index", || two(q.max_with_index(0, false))),
        case("matmul", || one(q.matmul(&x.transpose()))),
        case("matmul b", || one(x.matmul(&q.transpose()))),
        case("addmm", || {
            one(Array::zeros(&[2, 2], DType::F32, &d)
                .unwrap()
                .addmm(&x, &q.transpose(), 1.0, 1.0))
        }),
        case("outer", || one(q.outer(&x))),
        case("inner", || one(q.inner(&x))),
        case("tensordot", || one(q.tensordot(&x.transpose(), 1))),
        case("scatter_add", || {
            one(q.scatter_add(
                &idx,
                &x.slice(&[Slice::FULL, Slice::range(0, 1)]).unwrap(),
                1,
            ))
        }),
        case("put_along_axis", || {
            one(q.put_along_axis(
                &idx,
                &x.slice(&[Slice::FULL, Slice::range(0, 1)]).unwrap(),
                1,
            ))
        }),
        case("take_along_axis", || one(q.take_along_axis(&idx, Some(1)))),
        case("slice_update", || {
            one(q.slice_update(&x, &[0, 0], Axes::All))
        }),
        case("slice_assign", || one(q.slice_assign(&[Slice::FULL], &x))),
        case("put", || {
            one(q.put(&Array::from_slice(&[0i32], &[1], &d).unwrap(), &x))
        }),
        case("at set", || {
            let row = x.slice(&[Slice::range(0, 1)]).unwrap();
            one(q
                .at(&Array::from_slice(&[0i32], &[1], &d).unwrap())
                .set(&row))
        }),
        case("full_like", || one(q.full_like(1.0))),
        case("zeros_like", || one(Ok(q.zeros_like()))),
        case("ones_like", || one(Ok(q.ones_like()))),
        case("diagonal", || one(q.diagonal(0, 0, 1))),
        case("diag", || one(q.diag(0))),
        case("trace", || one(q.trace(0, 0, 1))),
        case("repeat", || one(q.repeat(2, Some(1)))),
        case("pad", || {
            one(q.pad(&[(1, 1), (0, 0)], PadMode::Constant(0.0)))
        }),
        case("roll", || one(q.roll(1, Some(1)))),
        case("tril", || one(q.tril(0))),
        case("triu", || one(q.triu(0))),
        case("view", || one(q.view(DType::U8))),
        case("transpose", || one(Ok(q.transpose()))),
        case("atleast_3d", || one(Ok(q.atleast_3d()))),
        case("full", || one(Array::full(&[2, 32], 1.0, DType::Q4_0, &d))),
        case("zeros", || one(Array::zeros(&[2, 32], DType::Q4_0, &d))),
        case("empty", || one(Array::empty(&[2, 32], DType::Q4_0, &d))),
        case("scalar", || one(Array::scalar(1.0, DType::Q8_0, &d))),
        case("arange", || {
            one(Array::arange(0.0, 32.0, 1.0, DType::Q4_0, &d))
        }),
        case("eye", || one(Array::eye(32, None, 0, DType::Q8_0, &d))),
        case("linspace", || {
            one(Array::linspace(0.0, 1.0, 32, DType::Q8_0, &d))
        }),
        case("one_hot", || one(Array::one_hot(&idx, 32, DType::Q8_0))),
        case("uniform", || {
            one(random::uniform(&key, &[32], 0.0, 1.0, DType::Q4_0))
        }),
        case("normal", || {
            one(random::normal(&key, &[32], 0.0, 1.0, DType::Q4_0))
        }),
        case("randint", || {
            one(random::randint(&key, &[32], 0, 3, DType::Q4_0))
        }),
        case("quantize", || {
            quantize(&q, 32, 4).map(|(a, b, c)| vec![a, b, c])
        }),
        case("to_vec", || q.to_vec::<u8>().map(|_| Vec::new())),
        case("save_safetensors", || {
            let dir = tempfile::tempdir().unwrap();
            wgarray::io::save_safetensors(dir.path().join("q.safetensors"), &[("q", &q)])
                .map(|_| Vec::new())
        }),
    ];
    cases.push(case("to_blocks of an element dtype", || {
        x.to_blocks().map(|_| Vec::new())
    }));
    let mut wrong = Vec::new();
    for (name, case) in &cases {
        let outcome = catch_unwind(AssertUnwindSafe(|| match case() {
            Err(e) => Err(e),
            Ok(outs) => wgarray::eval(&outs.iter().collect::<Vec<_>>()).map(|()| outs.len()),
        }));
        match outcome {
            Err(_) => wrong.push(format!("{name}: panicked")),
            Ok(Ok(n)) => wrong.push(format!("{name}: gave {n} arrays")),
            Ok(Err(e @ (Error::Internal(_) | Error::Validation(_) | Error::Kernel { .. }))) => {
                wrong.push(format!("{name}: {e}"))
            }
            Ok(Err(e)) => {
                let said = e.to_string();
                let names_block = ["q8_0", "q4_0"].iter().any(|b| said.contains(b))
                    || matches!(e, Error::OpDType { .. } | Error::DType { .. });
                if !names_block {
                    wrong.push(format!("{name}: {said}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // tile is views and a copy: whole blocks, so it works.
    let deq = |a: &Array| f32s(&dequantize(a, None, None, None, None, DType::F32).unwrap());
    let tiled = q.tile(&[2, 2]).unwrap();
    assert_eq!(tiled.shape(), &[4, 128]);
    let want = f32s(
        &dequantize(&q, None, None, None, None, DType::F32)
            .unwrap()
            .tile(&[2, 2])
            .unwrap(),
    );
    assert_bits(&deq(&tiled), &want, "tile");
    drop(tiled);
    drop(cases);
    drop((q, x, idx, key));
    assert_empty(&d);
}
