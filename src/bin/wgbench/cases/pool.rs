//! Allocate and release one storage buffer, per second, in the same run:
//! wgarray's pool on its hot path (`Array::empty` then drop; after the
//! first, a cache hit: bookkeeping, no wgpu call), the pool with a cache
//! limit of 0 (every release frees the buffer and every allocation creates
//! one: the pool's own cost on top of wgpu's), and
//! `wgpu::Device::create_buffer` then drop. Host-timed, in batches long
//! enough for the clock.

use std::time::{Duration, Instant};

use wgarray::{Array, DType};

use super::{Case, Cell, Ctx, figure, seed};
use crate::adapters::bytes;
use crate::measure::{self, CaseResult, Outcome, Rng, Sample};
use crate::raw;
use crate::report::{Check, Group, Work};

pub const POOL: &str = "wgarray pool";
pub const UNCACHED: &str = "pool, cache limit 0";
pub const CREATE: &str = "create_buffer";

/// A batch lasts about this long.
const BATCH: Duration = Duration::from_millis(2);

pub fn cases(ctx: &Ctx) -> Vec<Case> {
    ctx.suite
        .pool_sizes()
        .iter()
        .map(|&size| {
            Case::new(
                Group::Pool,
                format!("allocate {}", bytes(size)),
                move |ctx| {
                    let row = bytes(size);
                    let pool = batched(ctx, size, pool_check, pool_batch);
                    let was = ctx.device.set_cache_limit(0);
                    let uncached = batched(ctx, size, pool_check, pool_batch);
                    ctx.device.set_cache_limit(was);
                    let create = batched(ctx, size, create_check, create_batch);
                    vec![
                        figure(Cell::new(Group::Pool, &row, POOL), pool.0, pool.1),
                        figure(
                            Cell::new(Group::Pool, &row, UNCACHED),
                            uncached.0,
                            uncached.1,
                        ),
                        figure(Cell::new(Group::Pool, &row, CREATE), create.0, create.1),
                    ]
                },
            )
        })
        .collect()
}

/// Check once, size a batch from one timed call, then time batches.
fn batched(
    ctx: &Ctx,
    size: u64,
    check: fn(&Ctx, u64) -> CaseResult<Check>,
    batch: fn(&Ctx, u64, usize) -> CaseResult<Sample>,
) -> (Work, CaseResult<(Check, measure::Timing)>) {
    let mut count = 1;
    let result = (|| {
        if size > ctx.device.limits().max_buffer_size {
            return Err(Outcome::Skip(format!(
                "buffers of {} exceed this adapter's largest buffer",
                bytes(size)
            )));
        }
        let c = check(ctx, size)?;
        let one = batch(ctx, size, 1)?.host_s.max(1e-9);
        count = ((BATCH.as_secs_f64() / one) as usize).clamp(1, 100_000);
        Ok((c, measure::time(&ctx.protocol, || batch(ctx, size, count))?))
    })();
    (Work::Allocations(count as f64), result)
}

/// A round trip through a pooled buffer of `size` bytes returns the data,
/// and active memory goes back to where it was once it is dropped.
fn pool_check(ctx: &Ctx, size: u64) -> CaseResult<Check> {
    let d = &ctx.device;
    let before = d.active_memory();
    let n = (size / 4) as usize;
    let data = Rng::new(seed("pool")).vec_f32(n);
    let a = Array::from_slice(&data, &[n], d)?;
    let held = d.active_memory().saturating_sub(before);
    let mut got: Vec<f64> = a.to_vec::<f32>()?.into_iter().map(f64::from).collect();
    drop(a);
    let after = d.active_memory();
    if held < size || after != before {
        return Err(Outcome::Fail(format!(
            "active memory {before} -> {} -> {after} bytes around one {size}-byte array",
            before + held
        )));
    }
    let want: Vec<f64> = data.iter().map(|&x| x as f64).collect();
    ctx.check(Group::Pool, "the uploaded data", &mut got, &want, |_| 0.0)
}

fn pool_batch(ctx: &Ctx, size: u64, count: usize) -> CaseResult<Sample> {
    let n = (size / 4) as usize;
    let t = Instant::now();
    for _ in 0..count {
        drop(Array::empty(&[n], DType::F32, &ctx.device)?);
    }
    Ok(Sample {
        host_s: t.elapsed().as_secs_f64(),
        gpu_s: None,
    })
}

/// `create_buffer` of `size` raises no wgpu error and gives that size.
fn create_check(ctx: &Ctx, size: u64) -> CaseResult<Check> {
    let got = raw::create_buffer_checked(&ctx.device, size)?;
    let mut got = [got as f64];
    ctx.check(
        Group::Pool,
        "the requested size",
        &mut got,
        &[size as f64],
        |_| 0.0,
    )
}

fn create_batch(ctx: &Ctx, size: u64, count: usize) -> CaseResult<Sample> {
    Ok(raw::create_buffers(&ctx.device, size, count))
}
