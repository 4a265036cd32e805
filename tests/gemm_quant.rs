//! The quantized GEMM family (`GemmKernel::Quant`): `quantized_matmul`
//! reading the packed weights as stored and dequantizing them in
//! registers, with the GEMM's fused epilogue. Every product is compared
//! with an f64 reference over the weights dequantized on the host from the
//! formats' published definitions (tests/common/quant.rs), on random data,
//! odd sizes, views and poisoned outputs; products the family does not run
//! (more than 8 rows of x, Q6_K) take the dequantize-then-GEMM lowering and
//! are checked the same way. The family's default kernel is forced
//! (`Device::set_gemm_kernel`), so no test here pays for tuning (that the
//! tuned path is right is tests/quant.rs's part).

mod common;

use common::quant::{affine_dequantize_arrays, dequantize_blocks, random_blocks};
use common::reference::{assert_close_scaled, weights_matmul_ref};
use common::{Rng, device, eval_dispatches, poison_pool};
use wgarray::tuning::GemmKernel;
use wgarray::{Array, DType, Device, Slice, quantize, quantized_matmul};

/// Weights in one of the formats the family reads.
#[derive(Clone, Copy, Debug)]
enum Format {
    Blocks(DType),
    Affine { bits: u32, group: usize },
}

/// Quantized weights on the device and their values on the host.
struct Weights {
    w: Array,
    scales: Option<Array>,
    biases: Option<Array>,
    /// `[rows, cols]` row-major, dequantized on the host.
    values: Vec<f32>,
    format: Format,
}

/// The K (or the columns) `format`'s rows are whole blocks or groups of.
fn unit(format: Format) -> usize {
    match format {
        Format::Blocks(d) => d.block_size(),
        Format::Affine { group, .. } => group,
    }
}

/// Random `rows x cols` weights in `format` (quantized along `cols`),
/// affine scales in `scales`.
fn weights(
    format: Format,
    rows: usize,
    cols: usize,
    scales: DType,
    rng: &mut Rng,
    d: &Device,
) -> Weights {
    match format {
        Format::Blocks(dt) => {
            let bytes = random_blocks(dt, rows * cols / dt.block_size(), rng);
            Weights {
                w: Array::from_blocks(&bytes, &[rows, cols], dt, d).unwrap(),
                scales: None,
                biases: None,
                values: dequantize_blocks(dt, &bytes),
                format,
            }
        }
        Format::Affine { bits, group } => {
            let w = Array::from_slice(&rng.vec_f32(rows * cols), &[rows, cols], d)
                .unwrap()
                .astype(scales)
                .unwrap();
            let (wq, s, b) = quantize(&w, group, bits).unwrap();
            let values = affine_dequantize_arrays(&wq, &s, &b, cols, group, bits);
            Weights {
                w: wq,
                scales: Some(s),
                biases: Some(b),
                values,
                format,
            }
        }
    }
}

impl Weights {
    fn matmul(&self, x: &Array, transpose: bool) -> Array {
        let (g, bits) = match self.format {
            Format::Blocks(_) => (None, None),
            Format::Affine { bits, group } => (Some(group), Some(bits)),
        };
        quantized_matmul(
            x,
            &self.w,
            self.scales.as_ref(),
            self.biases.as_ref(),
            transpose,
            g,
            bits,
        )
        .unwrap()
    }
}

/// A device with the family's default matrix-vector kernel forced.
fn forced_device() -> Device {
    let d = device();
    let k: GemmKernel = "quant 8 1 8 6 1".parse().unwrap();
    d.set_gemm_kernel(Some(k)).unwrap();
    d
}

const FORMATS: [Format; 8] = [
    Format::Blocks(DType::Q4_0),
    Format::Blocks(DType::Q4_1),
    Format::Blocks(DType::Q8_0),
    Format::Blocks(DType::Q4K),
    Format::Blocks(DType::Q6K),
    Format::Affine { bits: 4, group: 64 },
    Format::Affine { bits: 8, group: 32 },
    Format::Affine {
        bits: 3,
        group: 128,
    },
];

#[test]
fn every_format_matches_f64_at_odd_sizes() {
    let d = forced_device();
    let mut rng = Rng::new(31);
    for (i, format) in FORMATS.into_iter().enumerate() {
        let scales = [DType::F32, DType::F16, DType::BF16][i % 3];
        let k = 2 * unit(format);
        for n in [1, 7, 33, 1025] {
            let w = weights(format, n, k, scales, &mut rng, &d);
            for m in [1, 7, 33] {
                let x = rng.vec_f32(m * k);
                let xa = Array::from_slice(&x, &[m, k], &d).unwrap();
                poison_pool(&d, m * n);
                let y = w.matmul(&xa, true).astype(DType::F32).unwrap();
                assert_eq!(y.shape(), &[m, n]);
                let want = weights_matmul_ref(&x, m, &w.values, k, n, true);
                let tol = if scales == DType::F32 { 1e-5 } else { 4e-3 };
                assert_close_scaled(
                    &y.to_vec::<f32>().unwrap(),
                    &want,
                    tol,
                    &format!("{format:?} {m}x{k}x{n}"),
                );
            }
        }
    }
    // x @ W with W [k, n] affine along n (spans of 32 columns).
    let format = Format::Affine { bits: 4, group: 32 };
    for (m, k, n) in [(1, 7, 64), (7, 33, 96), (33, 5, 160)] {
        let w = weights(format, k, n, DType::F32, &mut rng, &d);
        let x = rng.vec_f32(m * k);
        poison_pool(&d, m * n);
        let y = w.matmul(&Array::from_slice(&x, &[m, k], &d).unwrap(), false);
        let want = weights_matmul_ref(&x, m, &w.values, k, n, false);
        assert_close_scaled(
            &y.to_vec::<f32>().unwrap(),
            &want,
            1e-5,
            &format!("x @ W {m}x{k}x{n}"),
        );
    }
}

#[test]
fn views_of_x_are_read_through_their_strides() {
    let d = forced_device();
    let mut rng = Rng::new(32);
    for format in [
        Format::Blocks(DType::Q4_1),
        Format::Affine { bits: 4, group: 64 },
    ] {
        let (n, k) = (33, 2 * unit(format));
        let w = weights(format, n, k, DType::F32, &mut rng, &d);
        // Transposed: x [m, k] as the transpose of [k, m].
        for m in [1, 3] {
            let xt = rng.vec_f32(k * m);
            let x: Vec<f32> = (0..m * k).map(|i| xt[(i % k) * m + i / k]).collect();
            let xa = Array::from_slice(&xt, &[k, m], &d).unwrap().transpose();
            poison_pool(&d, m * n);
            let want = weights_matmul_ref(&x, m, &w.values, k, n, true);
            assert_close_scaled(
                &w.matmul(&xa, true).to_vec::<f32>().unwrap(),
                &want,
                1e-5,
                &format!("{format:?} x transposed, m {m}"),
            );
        }
        // Every other column of a wider x, and a batch of single rows.
        let wide = rng.vec_f32(2 * 2 * k);
        let x: Vec<f32> = wide.iter().step_by(2).copied().collect();
        let xa = Array::from_slice(&wide, &[2, 2 * k], &d)
            .unwrap()
            .slice(&[Slice::FULL, Slice::step(2)])
            .unwrap();
        poison_pool(&d, 2 * n);
        let want = weights_matmul_ref(&x, 2, &w.values, k, n, true);
        assert_close_scaled(
            &w.matmul(&xa, true).to_vec::<f32>().unwrap(),
            &want,
            1e-5,
            &format!("{format:?} strided x"),
        );
        let xb = Array::from_slice(&x, &[2, 1, k], &d).unwrap();
        let y = w.matmul(&xb, true);
        assert_eq!(y.shape(), &[2, 1, n]);
        assert_close_scaled(
            &y.to_vec::<f32>().unwrap(),
            &want,
            1e-5,
            &format!("{format:?} batched x"),
        );
        let v = w.matmul(&Array::from_slice(&x[k..], &[k], &d).unwrap(), true);
        assert_eq!(v.shape(), &[n]);
        assert_close_scaled(
            &v.to_vec::<f32>().unwrap(),
            &want[n..],
            1e-5,
            &format!("{format:?} 1-D x"),
        );
    }
}

#[test]
fn the_epilogue_fuses_and_matches_the_unfused_product() {
    let d = forced_device();
    let mut rng = Rng::new(33);
    for format in [
        Format::Blocks(DType::Q4_0),
        Format::Blocks(DType::Q8_0),
        Format::Affine { bits: 4, group: 32 },
    ] {
        for m in [1, 5] {
            let (n, k) = (7, 2 * unit(format));
            let w = weights(format, n, k, DType::F32, &mut rng, &d);
            let (x, bias, res) = (rng.vec_f32(m * k), rng.vec_f32(n), rng.vec_f32(m * n));
            let xa = Array::from_slice(&x, &[m, k], &d).unwrap();
            let ba = Array::from_slice(&bias, &[n], &d).unwrap();
            let ra = Array::from_slice(&res, &[m, n], &d).unwrap();
            // Bias, activation, residual and a cast, after the product.
            let build = || {
                let h = (&w.matmul(&xa, true) + &ba).unwrap().silu().unwrap();
                (&h + &ra).unwrap().astype(DType::F16).unwrap()
            };
            d.set_fusion(true);
            poison_pool(&d, m * n);
            let fused = build();
            assert_eq!(
                eval_dispatches(&d, &fused),
                1,
                "{format:?} m {m}: one kernel"
            );
            let fused = fused.astype(DType::F32).unwrap().to_vec::<f32>().unwrap();
            d.set_fusion(false);
            let unfused = build().astype(DType::F32).unwrap().to_vec::<f32>().unwrap();
            d.set_fusion(true);
            let p = weights_matmul_ref(&x, m, &w.values, k, n, true);
            let want: Vec<f64> = (0..m * n)
                .map(|e| {
                    let h = p[e] + bias[e % n] as f64;
                    h / (1.0 + (-h).exp()) + res[e] as f64
                })
                .collect();
            let what = format!("{format:?} m {m}");
            assert_close_scaled(&fused, &want, 2e-3, &format!("{what} fused"));
            assert_close_scaled(&unfused, &want, 2e-3, &format!("{what} unfused"));
        }
    }
}
