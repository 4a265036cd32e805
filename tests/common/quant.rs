//! Host references for quantized weights, written from the formats'
//! published definitions: ggml's block structs (ggml-common.h) and
//! `dequantize_row_*` (ggml-quants.c), and MLX's affine quantization
//! (mlx/ops.cpp `affine_quantize`, its CPU kernel in
//! mlx/backend/cpu/quantized.cpp). Each computes in f32 in ggml's (MLX's)
//! order of operations, so results compare bit for bit; the exact value
//! in f64 is the same number (every product in them is exact).

use super::Rng;
use wgarray::DType;
use wgarray::half::f16;

/// A random finite f16 of magnitude in about [2^-12, 2^3], either sign.
pub fn rand_f16(rng: &mut Rng) -> f16 {
    let e = 3 + rng.next_u64() % 16; // biased exponent 3..18
    let m = rng.next_u64() & 0x3ff;
    let s = rng.next_u64() & 1;
    f16::from_bits(((s << 15) | (e << 10) | m) as u16)
}

/// `blocks` random blocks of `dtype`: random quants, random finite scales.
pub fn random_blocks(dtype: DType, blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let size = dtype.size_in_bytes();
    let mut out = Vec::with_capacity(blocks * size);
    for _ in 0..blocks {
        let mut b: Vec<u8> = (0..size).map(|_| rng.next_u64() as u8).collect();
        // The f16 fields, made finite.
        let halves: &[usize] = match dtype {
            DType::Q4_0 | DType::Q8_0 => &[0],
            DType::Q4_1 | DType::Q4K => &[0, 2],
            DType::Q6K => &[208],
            _ => panic!("not a block format: {dtype}"),
        };
        for &at in halves {
            b[at..at + 2].copy_from_slice(&rand_f16(rng).to_le_bytes());
        }
        out.extend(b);
    }
    out
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// ggml's get_scale_min_k4.
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// ggml's `dequantize_row_*` of one block of `dtype` (`b` its bytes).
pub fn dequantize_block(dtype: DType, b: &[u8]) -> Vec<f32> {
    let mut y = Vec::with_capacity(dtype.block_size());
    match dtype {
        DType::Q4_0 => {
            let d = f16_at(b, 0);
            let mut hi = Vec::new();
            for j in 0..16 {
                y.push(((b[2 + j] & 0x0F) as i32 - 8) as f32 * d);
                hi.push(((b[2 + j] >> 4) as i32 - 8) as f32 * d);
            }
            y.extend(hi);
        }
        DType::Q4_1 => {
            let (d, m) = (f16_at(b, 0), f16_at(b, 2));
            let mut hi = Vec::new();
            for j in 0..16 {
                y.push((b[4 + j] & 0x0F) as f32 * d + m);
                hi.push((b[4 + j] >> 4) as f32 * d + m);
            }
            y.extend(hi);
        }
        DType::Q8_0 => {
            let d = f16_at(b, 0);
            for j in 0..32 {
                y.push(b[2 + j] as i8 as f32 * d);
            }
        }
        DType::Q4K => {
            let (d, min) = (f16_at(b, 0), f16_at(b, 2));
            let scales = &b[4..16];
            let mut q = &b[16..144];
            let mut is = 0;
            for _ in (0..256).step_by(64) {
                let (sc, m) = scale_min_k4(is, scales);
                let (d1, m1) = (d * sc as f32, min * m as f32);
                let (sc, m) = scale_min_k4(is + 1, scales);
                let (d2, m2) = (d * sc as f32, min * m as f32);
                for &ql in &q[..32] {
                    y.push(d1 * (ql & 0xF) as f32 - m1);
                }
                for &ql in &q[..32] {
                    y.push(d2 * (ql >> 4) as f32 - m2);
                }
                q = &q[32..];
                is += 2;
            }
        }
        DType::Q6K => {
            let d = f16_at(b, 208);
            y.resize(256, 0.0);
            for n in 0..2 {
                let (ql, qh) = (&b[64 * n..], &b[128 + 32 * n..]);
                let sc = |i: usize| b[192 + 8 * n + i] as i8 as f32;
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                    let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                    let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                    let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                    y[128 * n + l] = d * sc(is) * q1 as f32;
                    y[128 * n + l + 32] = d * sc(is + 2) * q2 as f32;
                    y[128 * n + l + 64] = d * sc(is + 4) * q3 as f32;
                    y[128 * n + l + 96] = d * sc(is + 6) * q4 as f32;
                }
            }
        }
        _ => panic!("not a block format: {dtype}"),
    }
    y
}

/// Every element of rows of blocks of `dtype` (`bytes` whole blocks).
pub fn dequantize_blocks(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(dtype.size_in_bytes())
        .flat_map(|b| dequantize_block(dtype, b))
        .collect()
}

/// MLX's affine quantization of rows of `w` (f32 values of the input
/// dtype): `(w_q words, scales, biases)`, the scales and biases in f32
/// before the rounding to the input's dtype. Step for step MLX's CPU
/// kernel (`quantize` in mlx/backend/cpu/quantized.cpp).
pub fn affine_quantize(
    w: &[f32],
    k: usize,
    group_size: usize,
    bits: u32,
) -> (Vec<u32>, Vec<f32>, Vec<f32>) {
    let n_bins = ((1u32 << bits) - 1) as f32;
    let eps = 1e-7f32;
    let mut wq = vec![0u32; w.len() * bits as usize / 32];
    let (mut scales, mut biases) = (Vec::new(), Vec::new());
    let mut bit = 0usize;
    assert_eq!(w.len() % k, 0);
    for g in w.chunks_exact(group_size) {
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for &v in g {
            hi = hi.max(v);
            lo = lo.min(v);
        }
        let mask = lo.abs() > hi.abs();
        let mut scale = ((hi - lo) / n_bins).max(eps);
        scale = if mask { scale } else { -scale };
        let edge = if mask { lo } else { hi };
        let q0 = (edge / scale).round_ties_even();
        let mut bias = 0.0;
        if q0 != 0.0 {
            scale = edge / q0;
            bias = edge;
        }
        for &v in g {
            let q = ((v - bias) / scale).round_ties_even().clamp(0.0, n_bins) as u64;
            let (i, s) = (bit / 32, bit % 32);
            wq[i] |= (q << s) as u32;
            if s + bits as usize > 32 {
                wq[i + 1] |= (q >> (32 - s)) as u32;
            }
            bit += bits as usize;
        }
        scales.push(scale);
        biases.push(bias);
    }
    (wq, scales, biases)
}

/// Quant `e` of a row's bit stream of `bits`-bit values.
pub fn affine_quant(words: &[u32], e: usize, bits: u32) -> u32 {
    let b = e * bits as usize;
    let (i, s) = (b / 32, b % 32);
    let mut v = (words[i] as u64) >> s;
    if s + bits as usize > 32 {
        v |= (words[i + 1] as u64) << (32 - s);
    }
    (v & ((1u64 << bits) - 1)) as u32
}

/// MLX's affine dequantization: `q * scale + bias` of every element, in
/// f32 (the scales and biases as f32 values of their dtype).
pub fn affine_dequantize(
    wq: &[u32],
    scales: &[f32],
    biases: &[f32],
    k: usize,
    group_size: usize,
    bits: u32,
) -> Vec<f32> {
    let words = k * bits as usize / 32;
    let rows = wq.len() / words;
    let mut out = Vec::with_capacity(rows * k);
    for r in 0..rows {
        for e in 0..k {
            let q = affine_quant(&wq[r * words..(r + 1) * words], e, bits) as f32;
            let g = r * (k / group_size) + e / group_size;
            out.push(q * scales[g] + biases[g]);
        }
    }
    out
}

/// `v` rounded to `dtype` (f32, f16, bf16) and back, as f32.
pub fn round_to(v: f32, dtype: DType) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(v).to_f32(),
        DType::BF16 => wgarray::half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// [`affine_dequantize`] of device arrays: `wq` (u32 words), `scales` and
/// `biases` (any float dtype) read back to the host first.
pub fn affine_dequantize_arrays(
    wq: &wgarray::Array,
    scales: &wgarray::Array,
    biases: &wgarray::Array,
    k: usize,
    group_size: usize,
    bits: u32,
) -> Vec<f32> {
    let f32s = |a: &wgarray::Array| a.astype(DType::F32).unwrap().to_vec::<f32>().unwrap();
    affine_dequantize(
        &wq.to_vec::<u32>().unwrap(),
        &f32s(scales),
        &f32s(biases),
        k,
        group_size,
        bits,
    )
}
