//! Per-op cost of a chain of `x + 1` on `f32[256]` (build the graph, eval
//! it, read back), host-timed: the time a caller waits per op. Two wgarray
//! columns: as it runs by default, where fusion makes the whole chain one
//! kernel (so that column measures graph building and fusion, not
//! dispatches), and with fusion off, one dispatch per op in one submission:
//! the dispatch overhead, beside a raw wgpu loop doing the same in the same
//! run (one pipeline, a fresh bind group per dispatch, one submit, read
//! back).

use wgarray::{Array, DType};

use super::{Case, Cell, Ctx, figure, seed};
use crate::measure::{self, CaseResult, Rng};
use crate::raw::{self, CHAIN_ELEMENTS};
use crate::report::{Check, Group, Work};

/// Fusion on (the default): the chain is one kernel.
pub const WGARRAY: &str = "wgarray";
pub const UNFUSED: &str = "wgarray unfused";
pub const RAW: &str = "raw wgpu";

pub fn cases(ctx: &Ctx) -> Vec<Case> {
    let ops = ctx.suite.chain_ops();
    let row = format!("{ops} x (x + 1) on f32[{CHAIN_ELEMENTS}]");
    vec![Case::new(
        Group::Dispatch,
        format!("dispatch chain of {ops} ops"),
        move |ctx| {
            let work = Work::Ops(ops as f64);
            vec![
                figure(
                    Cell::new(Group::Dispatch, &row, WGARRAY),
                    work,
                    wgarray_chain(ctx, ops, true),
                ),
                figure(
                    Cell::new(Group::Dispatch, &row, UNFUSED),
                    work,
                    wgarray_chain(ctx, ops, false),
                ),
                figure(
                    Cell::new(Group::Dispatch, &row, RAW),
                    work,
                    raw_chain(ctx, ops),
                ),
            ]
        },
    )]
}

/// Small integers: `x + ops` is exact in f32.
fn start() -> Vec<f32> {
    let mut rng = Rng::new(seed("dispatch"));
    (0..CHAIN_ELEMENTS)
        .map(|_| (rng.below(1000) as f32) - 500.0)
        .collect()
}

fn check(ctx: &Ctx, x0: &[f32], got: &[f32], ops: usize) -> CaseResult<Check> {
    let mut got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
    let want: Vec<f64> = x0.iter().map(|&v| v as f64 + ops as f64).collect();
    ctx.check(Group::Dispatch, "x + ops, exact", &mut got, &want, |_| 0.0)
}

/// The chain, with fusion on or off for its duration.
fn wgarray_chain(ctx: &Ctx, ops: usize, fusion: bool) -> CaseResult<(Check, measure::Timing)> {
    let was = ctx.device.set_fusion(fusion);
    let result = chain(ctx, ops);
    ctx.device.set_fusion(was);
    result
}

fn chain(ctx: &Ctx, ops: usize) -> CaseResult<(Check, measure::Timing)> {
    let x0 = start();
    let x = Array::from_slice(&x0, &[CHAIN_ELEMENTS], &ctx.device)?;
    let one = Array::scalar(1.0, DType::F32, &ctx.device)?;
    let run = || -> CaseResult<Vec<f32>> {
        let mut y = x.clone();
        for _ in 0..ops {
            y = (&y + &one)?;
        }
        Ok(y.to_vec::<f32>()?)
    };
    let check = check(ctx, &x0, &run()?, ops)?;
    let timing = measure::time(&ctx.protocol, || measure::host(run).map(|(s, _)| s))?;
    Ok((check, timing))
}

fn raw_chain(ctx: &Ctx, ops: usize) -> CaseResult<(Check, measure::Timing)> {
    let x0 = start();
    let l = raw::DispatchLoop::new(&ctx.device, ops)?;
    let (_, got) = l.run(&x0)?;
    let check = check(ctx, &x0, &got, ops)?;
    let timing = measure::time(&ctx.protocol, || l.run(&x0).map(|(s, _)| s))?;
    Ok((check, timing))
}
