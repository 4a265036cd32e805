//! The timing protocol (warm-up, repeats, median and spread), the checks
//! every result passes before it is timed, and the random inputs.

use std::time::{Duration, Instant};

use crate::report::{Check, Stats, Timer, Work};

/// One timed call: host wall-clock seconds, and the GPU's own seconds when
/// the code owns the encoder and the adapter has `TIMESTAMP_QUERY`.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub host_s: f64,
    pub gpu_s: Option<f64>,
}

/// How often to call a case: `warmup` untimed calls after the checked
/// first call, then timed calls until `budget` is spent, at least
/// `min_samples` and at most `max_samples` of them.
#[derive(Clone, Copy, Debug)]
pub struct Protocol {
    pub warmup: usize,
    pub min_samples: usize,
    pub max_samples: usize,
    pub budget: Duration,
}

/// Why a case produced no number.
#[derive(Debug)]
pub enum Outcome {
    /// The adapter lacks what the case needs (f16 without `SHADER_F16`, a
    /// storage binding too small), or the model is not fetched: not a
    /// failure.
    Skip(String),
    /// An error, or a result that disagrees with the host reference.
    Fail(String),
}

impl From<wgarray::Error> for Outcome {
    fn from(e: wgarray::Error) -> Self {
        match e {
            wgarray::Error::MissingFeature { .. } | wgarray::Error::TooLarge { .. } => {
                Outcome::Skip(e.to_string())
            }
            e => Outcome::Fail(e.to_string()),
        }
    }
}

/// `Result` of one case's steps.
pub type CaseResult<T> = Result<T, Outcome>;

/// Time a host-side closure (which must wait for the device itself).
pub fn host<T>(f: impl FnOnce() -> CaseResult<T>) -> CaseResult<(Sample, T)> {
    let t = Instant::now();
    let out = f()?;
    Ok((
        Sample {
            host_s: t.elapsed().as_secs_f64(),
            gpu_s: None,
        },
        out,
    ))
}

/// What [`time`] measured: the samples of the timer the figure uses, and
/// the host samples beside them when that timer is the GPU's.
pub struct Timing {
    pub timer: Timer,
    pub time: Stats,
    pub host_time: Option<Stats>,
}

/// Warm up, then call `f` as [`Protocol`] says. The GPU timer is used when
/// every sample has one, else the host timer.
pub fn time(p: &Protocol, mut f: impl FnMut() -> CaseResult<Sample>) -> CaseResult<Timing> {
    let start = Instant::now();
    for _ in 0..p.warmup {
        f()?;
    }
    let mut samples = Vec::new();
    let timed = Instant::now();
    while samples.len() < p.min_samples
        || (samples.len() < p.max_samples && timed.elapsed() < p.budget)
    {
        samples.push(f()?);
    }
    let warmup_s = timed.duration_since(start).as_secs_f64();
    let host: Vec<f64> = samples.iter().map(|s| s.host_s).collect();
    let gpu: Option<Vec<f64>> = samples.iter().map(|s| s.gpu_s).collect();
    let host = Stats::of(&host, p.warmup, warmup_s);
    Ok(match gpu {
        Some(g) => Timing {
            timer: Timer::GpuTimestamps,
            time: Stats::of(&g, p.warmup, warmup_s),
            host_time: Some(host),
        },
        None => Timing {
            timer: Timer::Host,
            time: host,
            host_time: None,
        },
    })
}

impl Stats {
    /// Median, extremes and median absolute deviation of `xs` (seconds).
    pub fn of(xs: &[f64], warmup: usize, warmup_s: f64) -> Stats {
        let med = median(xs);
        let dev: Vec<f64> = xs.iter().map(|x| (x - med).abs()).collect();
        Stats {
            median_s: med,
            min_s: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max_s: xs.iter().copied().fold(0.0, f64::max),
            mad_s: median(&dev),
            samples: xs.len(),
            warmup_calls: warmup,
            warmup_s,
        }
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Work {
    /// The figure for `seconds` per call: GFLOP/s, GB/s, us/op, alloc/s or
    /// sentences/s.
    pub fn rate(&self, seconds: f64) -> f64 {
        match *self {
            Work::Flop(f) => f / seconds / 1e9,
            Work::Bytes(b) => b / seconds / 1e9,
            Work::Ops(n) => seconds / n * 1e6,
            Work::Allocations(n) | Work::Sentences(n) | Work::Tokens(n) => n / seconds,
        }
    }
}

/// Compare `got` with `want` element by element: `|got - want| <= tol(i)`,
/// NaN never passes. The error names the first offending positions.
pub fn check(
    reference: &str,
    got: &[f64],
    want: &[f64],
    tol: impl Fn(usize) -> f64,
) -> CaseResult<Check> {
    if got.len() != want.len() {
        return Err(Outcome::Fail(format!(
            "wrong result: {} values, want {}",
            got.len(),
            want.len()
        )));
    }
    let mut max_err = 0.0f64;
    let mut worst = 0.0f64;
    let mut bad = Vec::new();
    let mut nbad = 0usize;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        let t = tol(i);
        if err.is_nan() || err > t {
            nbad += 1;
            if bad.len() < 3 {
                bad.push(format!("[{i}] {g} (want {w}, tolerance {t:.3e})"));
            }
            continue;
        }
        max_err = max_err.max(err);
        if t > 0.0 {
            worst = worst.max(err / t);
        }
    }
    if nbad > 0 {
        return Err(Outcome::Fail(format!(
            "wrong result: {nbad} of {} checked values differ from the {reference}: {}",
            got.len(),
            bad.join(", ")
        )));
    }
    Ok(Check {
        reference: reference.to_string(),
        compared: got.len(),
        max_abs_err: max_err,
        max_err_over_tolerance: worst,
    })
}

pub use crate::rng::Rng;

/// Unit roundoff of a dtype's significand: 2^-24 (f32), 2^-11 (f16),
/// 2^-8 (bf16).
pub fn unit_roundoff(dtype: wgarray::DType) -> f64 {
    match dtype {
        wgarray::DType::F16 => 2f64.powi(-11),
        wgarray::DType::BF16 => 2f64.powi(-8),
        _ => 2f64.powi(-24),
    }
}
