//! Memory bandwidth in GB/s on f32 arrays: a raw wgpu vec4 copy (the
//! ceiling: the fastest of a few copy kernels, one to eight vec4s per
//! invocation), wgarray's `a + b`, and a 20-op elementwise chain through
//! wgarray's public API.
//!
//! The chain's bytes are those one fused kernel would move (x and b read
//! once, y written once): without fusion it runs 20 kernels and its GB/s is
//! low; when wgarray fuses it, the same figure rises with no change here.
//!
//! And the matrix-vector product of a decode step, `x [1, K] @ W^T` with
//! `W [N, K]` (K = 576, SmolLM2-135M's width), as GB/s of W's bytes read:
//! W packed in Q4_0, Q4_1 and Q8_0 (`quantized_matmul`, which reads W as
//! stored) and W in f32 (`matmul` on its transpose), beside the raw copy in
//! the same run: the weights dominate a decode step, so this is its speed.
//! Beside them, a prefill product (`x [128, 576] @ W^T`, W `[1536, 576]`
//! in Q4_1) in GFLOP/s, through `quantized_matmul` (the quantized family's
//! tiled kernel) and through `dequantize` then `matmul`, in the same run.

use wgarray::half::f16;
use wgarray::{Array, DType, Device};

use super::{Case, Cell, Ctx, figure, seed, settle};
use crate::measure::{self, CaseResult, Rng};
use crate::raw;
use crate::report::{Check, Group, Work};

pub const COPY: &str = "copy";
pub const ADD: &str = "a + b";
pub const CHAIN: &str = "20-op chain";
pub const RAW: &str = "raw wgpu";
pub const WGARRAY: &str = "wgarray";

/// The decode GEMV's K (SmolLM2-135M's hidden width).
pub const GEMV_K: usize = 576;

pub fn cases(ctx: &Ctx) -> Vec<Case> {
    let n = ctx.suite.stream_elements();
    let word = 4.0;
    let mut v = vec![
        Case::new(
            Group::Bandwidth,
            format!(
                "copy f32[{n}], raw wgpu (best of {} kernels)",
                raw::COPY_KINDS.len()
            ),
            move |ctx| {
                let r = copy(ctx, n);
                vec![figure(
                    Cell::new(Group::Bandwidth, COPY, RAW),
                    Work::Bytes(2.0 * word * n as f64),
                    r,
                )]
            },
        ),
        Case::new(Group::Bandwidth, format!("a + b on f32[{n}]"), move |ctx| {
            let r = add(ctx, n);
            vec![figure(
                Cell::new(Group::Bandwidth, ADD, WGARRAY),
                Work::Bytes(3.0 * word * n as f64),
                r,
            )]
        }),
        Case::new(
            Group::Bandwidth,
            format!("20-op chain on f32[{n}]"),
            move |ctx| {
                let r = chain_case(ctx, n);
                let mut f = figure(
                    Cell::new(Group::Bandwidth, CHAIN, WGARRAY),
                    Work::Bytes(3.0 * word * n as f64),
                    r,
                );
                if f.message.is_none() {
                    f.message = Some(
                        "bytes of one fused kernel (x, b read once, y written once), \
                     whether or not wgarray fuses the chain"
                            .into(),
                    );
                }
                vec![f]
            },
        ),
    ];
    // W as large as the copy's source.
    let rows = n / GEMV_K;
    for dtype in [DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::F32] {
        v.push(Case::new(
            Group::Bandwidth,
            format!("GEMV 1 x {GEMV_K} x {rows}, W in {dtype}"),
            move |ctx| {
                let r = gemv(ctx, dtype, 1, rows, false);
                let mut f = figure(
                    Cell::new(Group::Bandwidth, format!("GEMV W {dtype}"), WGARRAY),
                    Work::Bytes(dtype.nbytes(rows * GEMV_K) as f64),
                    r,
                );
                if f.message.is_none() {
                    f.message = Some(format!(
                        "x [1, {GEMV_K}] @ W^T, W [{rows}, {GEMV_K}]: bytes of W read"
                    ));
                }
                vec![f]
            },
        ));
    }
    // The prefill product: the quantized family's tiled kernel against
    // dequantize-then-GEMM, in the same run.
    let (m, n) = PREFILL;
    for dequantized in [false, true] {
        let how = if dequantized {
            "dequantize + matmul"
        } else {
            "quantized_matmul"
        };
        v.push(Case::new(
            Group::Bandwidth,
            format!("GEMM {m} x {GEMV_K} x {n}, W in Q4_1, {how}"),
            move |ctx| {
                let r = gemv(ctx, DType::Q4_1, m, n, dequantized);
                let mut f = figure(
                    Cell::new(Group::Bandwidth, format!("prefill W Q4_1, {how}"), WGARRAY),
                    Work::Flop(2.0 * (m * GEMV_K * n) as f64),
                    r,
                );
                if f.message.is_none() {
                    f.message = Some(format!(
                        "x [{m}, {GEMV_K}] @ W^T, W [{n}, {GEMV_K}] (a prompt of {m} tokens \
                         through SmolLM2-135M's MLP up-projection)"
                    ));
                }
                vec![f]
            },
        ));
    }
    v
}

/// The prefill product's rows of x and of W.
pub const PREFILL: (usize, usize) = (128, 1536);

/// `x @ W^T` for `m` rows of x, W `[rows, GEMV_K]` of `dtype` (a block
/// format through `quantized_matmul`, or through `dequantize` then
/// `matmul` where `dequantized`; f32 through `matmul`), checked
/// against an f64 product over W's values (a block format's dequantized by
/// wgarray's `dequantize`, which tests/quant.rs checks bit for bit against
/// ggml's definition).
fn gemv(
    ctx: &Ctx,
    dtype: DType,
    m: usize,
    rows: usize,
    dequantized: bool,
) -> CaseResult<(Check, measure::Timing)> {
    let k = GEMV_K;
    ctx.fits(dtype.nbytes(rows * k) as u64)?;
    let d: &Device = &ctx.device;
    let mut rng = Rng::new(seed(dtype.name()));
    let xv = rng.vec_f32(m * k);
    let x = Array::from_slice(&xv, &[m, k], d)?;
    let (w, values) = if dtype.is_quantized() {
        // Random quants; each block's f16 scale (and minimum) small and
        // finite.
        let size = dtype.size_in_bytes();
        let mut bytes: Vec<u8> = (0..dtype.nbytes(rows * k))
            .map(|_| rng.next_u64() as u8)
            .collect();
        for (i, block) in bytes.chunks_exact_mut(size).enumerate() {
            let fields = if dtype == DType::Q4_1 { 2 } else { 1 };
            for f in 0..fields {
                let v = f16::from_f32(0.01 + 0.001 * ((i + f) % 7) as f32);
                block[2 * f..2 * f + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        let w = Array::from_blocks(&bytes, &[rows, k], dtype, d)?;
        let values =
            wgarray::dequantize(&w, None, None, None, None, DType::F32)?.to_vec::<f32>()?;
        (w, values)
    } else {
        let values = rng.vec_f32(rows * k);
        (Array::from_slice(&values, &[rows, k], d)?, values)
    };
    let product = || {
        if dequantized {
            x.matmul(&wgarray::dequantize(&w, None, None, None, None, DType::F32)?.transpose())
        } else if dtype.is_quantized() {
            wgarray::quantized_matmul(&x, &w, None, None, true, None, None)
        } else {
            x.matmul(&w.transpose())
        }
    };
    let mut got = product()?.to_f64_vec()?;
    let want: Vec<f64> = xv
        .chunks_exact(k)
        .flat_map(|xr| {
            values
                .chunks_exact(k)
                .map(move |row| row.iter().zip(xr).map(|(&a, &b)| a as f64 * b as f64).sum())
        })
        .collect();
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let check = ctx.check(
        Group::Bandwidth,
        "f64 host product",
        &mut got,
        &want,
        |_| 1e-5 * scale,
    )?;
    Ok((check, time_wgarray(ctx, product)?))
}

/// The fastest of the raw copy kernels ([`raw::COPY_KINDS`]), each checked
/// and timed in turn: the ceiling the other rows are a fraction of.
fn copy(ctx: &Ctx, n: usize) -> CaseResult<(Check, measure::Timing)> {
    ctx.fits(4 * n as u64)?;
    let data = Rng::new(seed("copy")).vec_f32(n);
    let want: Vec<f64> = data.iter().map(|&x| x as f64).collect();
    let mut best: Option<(Check, measure::Timing)> = None;
    for kind in raw::COPY_KINDS {
        let k = raw::Copy::new(&ctx.device, &data, kind)?;
        k.run()?;
        let mut got: Vec<f64> = k.output()?.into_iter().map(f64::from).collect();
        let check = ctx.check(Group::Bandwidth, "the source", &mut got, &want, |_| 0.0)?;
        let timing = measure::time(&ctx.protocol, || k.run())?;
        if best
            .as_ref()
            .is_none_or(|(_, b)| timing.time.median_s < b.time.median_s)
        {
            best = Some((check, timing));
        }
    }
    Ok(best.expect("at least one copy kernel"))
}

fn inputs(ctx: &Ctx, n: usize, name: &str) -> CaseResult<(Vec<f32>, Vec<f32>, Array, Array)> {
    ctx.fits(4 * n as u64)?;
    let mut rng = Rng::new(seed(name));
    let (x, y) = (rng.vec_f32(n), rng.vec_f32(n));
    let d: &Device = &ctx.device;
    let (a, b) = (
        Array::from_slice(&x, &[n], d)?,
        Array::from_slice(&y, &[n], d)?,
    );
    Ok((x, y, a, b))
}

fn time_wgarray(ctx: &Ctx, f: impl Fn() -> wgarray::Result<Array>) -> CaseResult<measure::Timing> {
    measure::time(&ctx.protocol, || {
        measure::host(|| settle(&f()?)).map(|(s, ())| s)
    })
}

fn add(ctx: &Ctx, n: usize) -> CaseResult<(Check, measure::Timing)> {
    let (x, y, a, b) = inputs(ctx, n, "a + b")?;
    let mut got = (&a + &b)?.to_f64_vec()?;
    let want: Vec<f64> = x.iter().zip(&y).map(|(&p, &q)| (p + q) as f64).collect();
    // f32 addition is correctly rounded in WGSL: exact against the host's.
    let check = ctx.check(Group::Bandwidth, "f32 host sum", &mut got, &want, |_| 0.0)?;
    Ok((check, time_wgarray(ctx, || &a + &b)?))
}

/// The chain, through wgarray: 20 elementwise ops on `x` and `b`, each
/// well conditioned on [-1, 1) inputs; `floor` is the scalar 0.1.
fn chain(x: &Array, b: &Array, floor: &Array) -> wgarray::Result<Array> {
    let y = (x * 0.75)?;
    let y = (&y + b)?.tanh()?;
    let y = (&(&y * 1.5)? - 0.25)?.abs()?;
    let y = (&y + 1.0)?.sqrt()?.log()?;
    let y = (&y * b)?.exp()?;
    let y = (&y * 0.5)?.sigmoid()?;
    let y = (&y - b)?.maximum(floor)?;
    let y = (&y.square()? + 0.5)?.reciprocal()?.sin()?;
    &y + x
}

/// The same 20 ops on the host, in f64.
fn chain_host(x: f64, b: f64) -> f64 {
    let y = (x * 0.75 + b).tanh();
    let y = (y * 1.5 - 0.25).abs();
    let y = (y + 1.0).sqrt().ln();
    let y = (y * b).exp();
    let y = 1.0 / (1.0 + (-(y * 0.5)).exp());
    let y = (y - b).max(0.1);
    let y = (1.0 / (y * y + 0.5)).sin();
    y + x
}

fn chain_case(ctx: &Ctx, n: usize) -> CaseResult<(Check, measure::Timing)> {
    let (x, y, a, b) = inputs(ctx, n, "chain")?;
    let floor = Array::scalar(0.1, wgarray::DType::F32, &ctx.device)?;
    let mut got = chain(&a, &b, &floor)?.to_f64_vec()?;
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(&p, &q)| chain_host(p as f64, q as f64))
        .collect();
    let check = ctx.check(
        Group::Bandwidth,
        "f64 host reference",
        &mut got,
        &want,
        |i| 1e-5 + 1e-4 * want[i].abs(),
    )?;
    Ok((check, time_wgarray(ctx, || chain(&a, &b, &floor))?))
}
