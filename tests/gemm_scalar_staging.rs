//! The workgroup-memory GEMM's staging in f32 arrays, the form Metal and
//! D3D12 get (`Context::scalar_staging`: there a store into one component
//! of a workgroup vec4 is a read-modify-write of the whole vector, and
//! several threads store into one quad in the same step). Other adapters
//! stage through vec4 arrays; `WGARRAY_GEMM_SCALAR_STAGING=1`, set here
//! before the binary's only device is made, gives them the f32 form, which
//! this test then checks against f64 on random operands: odd sizes (edges
//! and K tails), transposed and strided operands, batches, a bias, f32,
//! f16 and bf16. On llvmpipe through GL each such kernel takes over a
//! minute to compile cold, so there the test checks the register family's
//! product only (the staging does not apply to it) and the f32 form runs on
//! Vulkan.

mod common;

use common::{Rng, device, is_gl, matmul_ref, rel_frobenius};
use half::{bf16, f16};
use wgarray::tuning::GemmKernel;
use wgarray::{Array, DType, Device, Slice};

fn round_to(dtype: DType, x: &[f32]) -> Vec<f32> {
    match dtype {
        DType::F16 => x.iter().map(|&v| f16::from_f32(v).to_f32()).collect(),
        DType::BF16 => x.iter().map(|&v| bf16::from_f32(v).to_f32()).collect(),
        _ => x.to_vec(),
    }
}

/// `values` (`[rows, cols]`) as `dtype`: dense, a transposed view of the
/// stored transpose, or every other stored column.
fn operand(
    d: &Device,
    values: &[f32],
    [rows, cols]: [usize; 2],
    layout: u8,
    dtype: DType,
) -> Array {
    match layout {
        0 => Array::from_slice(values, &[rows, cols], d),
        1 => {
            let t: Vec<f32> = (0..cols * rows)
                .map(|i| values[(i % rows) * cols + i / rows])
                .collect();
            Array::from_slice(&t, &[cols, rows], d).and_then(|a| a.swapaxes(0, 1))
        }
        _ => {
            let s: Vec<f32> = values.iter().flat_map(|&v| [v, f32::NAN]).collect();
            Array::from_slice(&s, &[rows, 2 * cols], d)
                .and_then(|a| a.slice(&[Slice::FULL, Slice::new(None, None, 2)]))
        }
    }
    .and_then(|a| a.astype(dtype))
    .unwrap()
}

/// `x @ y + bias` of `[m, k] @ [k, n]`: the relative Frobenius error
/// against f64.
#[allow(clippy::too_many_arguments)]
fn error(d: &Device, rng: &mut Rng, dtype: DType, [m, k, n]: [usize; 3], la: u8, lb: u8) -> f64 {
    let x = round_to(dtype, &rng.vec_f32(m * k));
    let y = round_to(dtype, &rng.vec_f32(k * n));
    let c = round_to(dtype, &rng.vec_f32(n));
    let a = operand(d, &x, [m, k], la, dtype);
    let b = operand(d, &y, [k, n], lb, dtype);
    let bias = Array::from_slice(&c, &[n], d)
        .unwrap()
        .astype(dtype)
        .unwrap();
    let got = bias
        .addmm(&a, &b, 1.0, 1.0)
        .and_then(|r| r.astype(DType::F32))
        .and_then(|r| r.to_vec::<f32>())
        .unwrap();
    let want: Vec<f64> = matmul_ref(&x, &y, 1, m, k, n)
        .iter()
        .enumerate()
        .map(|(i, v)| v + c[i % n] as f64)
        .collect();
    rel_frobenius(&got, &want)
}

#[test]
fn scalar_staging_matches_f64_in_every_layout() {
    // SAFETY: set before this binary's one device is made, and no other
    // thread reads the environment then (a single test).
    unsafe { std::env::set_var("WGARRAY_GEMM_SCALAR_STAGING", "1") };
    let d = device();
    let mut rng = Rng::new(41);
    let tol = |dtype| match dtype {
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 1e-5,
    };
    let mut failures = Vec::new();
    let kernels: Vec<&str> = if is_gl(&d) {
        vec!["register 8 8 4 1"]
    } else {
        vec![
            "shared 16 16 8 2 8",
            "shared 16 16 4 1 16",
            "shared 16 16 8 2 16",
        ]
    };
    for (i, name) in kernels.iter().enumerate() {
        let kernel: GemmKernel = name.parse().unwrap();
        d.set_gemm_kernel(Some(kernel)).unwrap();
        // The first kernel in every layout pair of f32; the others dense.
        let pairs: Vec<(u8, u8)> = if i == 0 {
            (0..3).flat_map(|a| (0..3).map(move |b| (a, b))).collect()
        } else {
            vec![(0, 0)]
        };
        for (la, lb) in pairs {
            for dims in [[33, 70, 65], [130, 17, 260]] {
                let e = error(&d, &mut rng, DType::F32, dims, la, lb);
                if e.is_nan() || e >= tol(DType::F32) {
                    failures.push(format!("{name} f32 {dims:?} layouts {la} {lb}: {e:e}"));
                }
            }
        }
        for dtype in [DType::F16, DType::BF16] {
            if dtype == DType::F16 && !d.features().contains(wgarray::wgpu::Features::SHADER_F16) {
                continue;
            }
            let e = error(&d, &mut rng, dtype, [65, 33, 70], 0, 1);
            if e.is_nan() || e >= tol(dtype) {
                failures.push(format!("{name} {dtype} [65, 33, 70]: {e:e}"));
            }
        }
    }
    d.set_gemm_kernel(None).unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
