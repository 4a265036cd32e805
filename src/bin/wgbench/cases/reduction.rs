//! A sum, softmax and layer_norm over the last axis of an f32
//! `[rows, cols]` array: GB/s (the bytes an ideal kernel reads and writes)
//! and time, each checked against f64 host loops.

use wgarray::Array;

use super::{Case, Cell, Ctx, figure, seed, settle};
use crate::measure::{self, CaseResult, Rng};
use crate::report::{Check, Group, Work};

pub const WGARRAY: &str = "wgarray";

#[derive(Clone, Copy)]
enum Op {
    Sum,
    Softmax,
    LayerNorm,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Softmax => "softmax",
            Op::LayerNorm => "layer_norm",
        }
    }

    /// Bytes read plus written by one ideal pass.
    fn bytes(self, rows: usize, cols: usize) -> f64 {
        let n = (rows * cols) as f64;
        4.0 * match self {
            Op::Sum => n + rows as f64,
            Op::Softmax => 2.0 * n,
            Op::LayerNorm => 2.0 * n + 2.0 * cols as f64,
        }
    }
}

pub fn cases(ctx: &Ctx) -> Vec<Case> {
    let (rows, cols) = ctx.suite.rows_cols();
    [Op::Sum, Op::Softmax, Op::LayerNorm]
        .into_iter()
        .map(|op| {
            Case::new(
                Group::Reduction,
                format!("{} over f32[{rows}, {cols}]", op.name()),
                move |ctx| {
                    vec![figure(
                        Cell::new(Group::Reduction, op.name(), WGARRAY),
                        Work::Bytes(op.bytes(rows, cols)),
                        run(ctx, op, rows, cols),
                    )]
                },
            )
        })
        .collect()
}

/// Layer norm's epsilon.
const EPS: f64 = 1e-5;

fn host(op: Op, x: &[f32], w: &[f32], b: &[f32], cols: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for r in x.chunks(cols) {
        let r: Vec<f64> = r.iter().map(|&v| v as f64).collect();
        match op {
            Op::Sum => out.push(r.iter().sum()),
            Op::Softmax => {
                let max = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = r.iter().map(|v| (v - max).exp()).collect();
                let s: f64 = e.iter().sum();
                out.extend(e.iter().map(|v| v / s));
            }
            Op::LayerNorm => {
                let mean = r.iter().sum::<f64>() / cols as f64;
                let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
                let inv = 1.0 / (var + EPS).sqrt();
                out.extend(
                    r.iter()
                        .enumerate()
                        .map(|(j, v)| (v - mean) * inv * w[j] as f64 + b[j] as f64),
                );
            }
        }
    }
    out
}

fn run(ctx: &Ctx, op: Op, rows: usize, cols: usize) -> CaseResult<(Check, measure::Timing)> {
    ctx.fits(4 * (rows * cols) as u64)?;
    let mut rng = Rng::new(seed(op.name()));
    let (xv, wv, bv) = (
        rng.vec_f32(rows * cols)
            .into_iter()
            .map(|v| (v * 256.0).round() / 256.0)
            .collect::<Vec<f32>>(),
        rng.vec_f32(cols),
        rng.vec_f32(cols),
    );
    let d = &ctx.device;
    let x = Array::from_slice(&xv, &[rows, cols], d)?;
    let w = Array::from_slice(&wv, &[cols], d)?;
    let b = Array::from_slice(&bv, &[cols], d)?;
    let f = || match op {
        Op::Sum => x.sum(-1isize, false),
        Op::Softmax => x.softmax(-1),
        Op::LayerNorm => x.layer_norm(Some(&w), Some(&b), EPS as f32),
    };
    let mut got = f()?.to_f64_vec()?;
    let want = host(op, &xv, &wv, &bv, cols);
    // Sum: exact. The inputs are multiples of 2^-8 in [-1, 1), so every
    // partial sum of a row (|s| < 2^13) fits f32's 24 bits, in any order.
    // Softmax and layer_norm: relative 1e-4 with a floor.
    let check = ctx.check(
        Group::Reduction,
        "f64 host reference",
        &mut got,
        &want,
        |i| match op {
            Op::Sum => 0.0,
            Op::Softmax => 1e-4 * want[i].abs() + 1e-9,
            Op::LayerNorm => 1e-4 * want[i].abs() + 1e-4,
        },
    )?;
    let timing = measure::time(&ctx.protocol, || {
        measure::host(|| settle(&f()?)).map(|(s, ())| s)
    })?;
    Ok((check, timing))
}
