//! Matmul GFLOP/s: wgarray's GEMM in f32, f16 and bf16 over square sizes
//! and transformer shapes, beside CPU sgemm (the `matrixmultiply` crate) on
//! the same inputs in the same run.
//!
//! Check: the GPU result at sampled positions (the first and last rows and
//! columns, where edge tiles are, and random ones; every position of small
//! outputs) against f64 dot products of the very inputs uploaded (rounded
//! to the dtype first). Tolerance: the f32 accumulation bound
//! `gamma_K * sum_k |a_ik b_kj|` (Higham, "Accuracy and Stability of
//! Numerical Algorithms", 2nd ed., 3.1), plus one rounding to the output
//! dtype.

use wgarray::DType;

use super::{Case, Cell, Ctx, figure, round_to, seed, settle, upload};
use crate::measure::{self, CaseResult, Rng, unit_roundoff};
use crate::report::{Check, Figure, Group, Work};

/// Positions compared with the host reference, at most.
const MAX_CHECKED: usize = 2048;

pub fn cases(ctx: &Ctx) -> Vec<Case> {
    ctx.suite
        .matmul_shapes()
        .into_iter()
        .map(|(m, k, n)| {
            Case::new(Group::Matmul, format!("matmul {m}x{k}x{n}"), move |ctx| {
                shape(ctx, m, k, n)
            })
        })
        .collect()
}

/// The row label: `M x K x N`.
pub fn row(m: usize, k: usize, n: usize) -> String {
    format!("{m}x{k}x{n}")
}

/// The column of a GPU figure: `f32`, `f16`, `bf16`.
pub fn column(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => "f32",
    }
}

/// The column of the CPU figure.
pub const CPU: &str = "CPU sgemm";

/// Random operands of one shape and the output positions checked.
pub struct Inputs {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    /// Output positions (i, j) to check.
    at: Vec<(usize, usize)>,
}

impl Inputs {
    /// Uniform operands for `m x k x n`, seeded by the shape's label.
    pub fn new(m: usize, k: usize, n: usize) -> Inputs {
        let mut rng = Rng::new(seed(&row(m, k, n)));
        Inputs {
            m,
            k,
            n,
            a: rng.vec_f32(m * k),
            b: rng.vec_f32(k * n),
            at: positions(m, n, &mut rng),
        }
    }

    /// f64 reference and `sum |a b|` at each checked position, for the
    /// inputs rounded to `dtype`.
    fn reference(&self, dtype: DType) -> (Vec<f64>, Vec<f64>) {
        let r = |x: f32| round_to(x, dtype) as f64;
        self.at
            .iter()
            .map(|&(i, j)| {
                let (mut s, mut abs) = (0.0f64, 0.0f64);
                for kk in 0..self.k {
                    let p = r(self.a[i * self.k + kk]) * r(self.b[kk * self.n + j]);
                    s += p;
                    abs += p.abs();
                }
                (s, abs)
            })
            .unzip()
    }

    fn gather(&self, c: &[f64]) -> Vec<f64> {
        self.at.iter().map(|&(i, j)| c[i * self.n + j]).collect()
    }

    fn check(&self, ctx: &Ctx, dtype: DType, what: &str, c: &[f64]) -> CaseResult<Check> {
        self.compare(dtype, what, c, |reference, got, want, tol| {
            ctx.check(Group::Matmul, reference, got, want, tol)
        })
    }

    /// [`measure::check`] of `c` (the whole `m x n` output) at the checked
    /// positions, through `check` (the `--corrupt` hook of a run).
    pub fn compare(
        &self,
        dtype: DType,
        what: &str,
        c: &[f64],
        check: impl FnOnce(&str, &mut [f64], &[f64], &dyn Fn(usize) -> f64) -> CaseResult<Check>,
    ) -> CaseResult<Check> {
        let (want, abs) = self.reference(dtype);
        let mut got = self.gather(c);
        let u = 2f64.powi(-24);
        let gamma = self.k as f64 * u / (1.0 - self.k as f64 * u);
        let out = if dtype == DType::F32 {
            0.0
        } else {
            unit_roundoff(dtype)
        };
        check(
            &format!("f64 host reference ({what})"),
            &mut got,
            &want,
            &|i| gamma * abs[i] + out * (want[i].abs() + gamma * abs[i]) + 1e-30,
        )
    }
}

fn positions(m: usize, n: usize, rng: &mut Rng) -> Vec<(usize, usize)> {
    if m * n <= MAX_CHECKED {
        return (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).collect();
    }
    let mut v = Vec::new();
    for j in (0..n).take(MAX_CHECKED / 8) {
        v.push((0, j));
        v.push((m - 1, n - 1 - j));
    }
    for i in (0..m).take(MAX_CHECKED / 8) {
        v.push((i, 0));
        v.push((m - 1 - i, n - 1));
    }
    while v.len() < MAX_CHECKED {
        v.push((rng.below(m), rng.below(n)));
    }
    v
}

fn shape(ctx: &Ctx, m: usize, k: usize, n: usize) -> Vec<Figure> {
    let label = row(m, k, n);
    let inputs = Inputs::new(m, k, n);
    let work = Work::Flop(2.0 * (m * k * n) as f64);
    let mut out: Vec<Figure> = [DType::F32, DType::F16, DType::BF16]
        .into_iter()
        .map(|dtype| {
            figure(
                Cell::new(Group::Matmul, &label, column(dtype)),
                work,
                gpu(ctx, &inputs, dtype),
            )
        })
        .collect();
    let mut cpu_fig = figure(
        Cell::new(Group::Matmul, &label, CPU),
        work,
        cpu(ctx, &inputs),
    );
    cpu_fig.message = Some(format!(
        "matrixmultiply::sgemm, up to {} threads",
        ctx.cpu_threads
    ));
    out.push(cpu_fig);
    out
}

fn gpu(ctx: &Ctx, x: &Inputs, dtype: DType) -> CaseResult<(Check, measure::Timing)> {
    let size = dtype.size_in_bytes() as u64;
    for elems in [x.m * x.k, x.k * x.n, x.m * x.n] {
        ctx.fits(elems as u64 * size)?;
    }
    let d = &ctx.device;
    let a = upload(&x.a, &[x.m, x.k], dtype, d)?;
    let b = upload(&x.b, &[x.k, x.n], dtype, d)?;
    let c = a.matmul(&b)?;
    let what = format!("{} inputs", column(dtype));
    let check = x.check(ctx, dtype, &what, &c.to_f64_vec()?)?;
    drop(c);
    // A new class is timed in the background: not during the timing.
    d.wait_warm_up();
    let timing = measure::time(&ctx.protocol, || {
        measure::host(|| settle(&a.matmul(&b)?)).map(|(s, ())| s)
    })?;
    Ok((check, timing))
}

fn sgemm(x: &Inputs, c: &mut [f32]) {
    // SAFETY: row-major m x k, k x n and m x n buffers of exactly those
    // sizes, as the strides say.
    unsafe {
        matrixmultiply::sgemm(
            x.m,
            x.k,
            x.n,
            1.0,
            x.a.as_ptr(),
            x.k as isize,
            1,
            x.b.as_ptr(),
            x.n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            x.n as isize,
            1,
        )
    }
}

fn cpu(ctx: &Ctx, x: &Inputs) -> CaseResult<(Check, measure::Timing)> {
    let mut c = vec![0.0f32; x.m * x.n];
    sgemm(x, &mut c);
    let c64: Vec<f64> = c.iter().map(|&v| v as f64).collect();
    let check = x.check(ctx, DType::F32, "f32 inputs", &c64)?;
    let timing = measure::time(&ctx.protocol, || {
        measure::host(|| {
            sgemm(x, &mut c);
            Ok(())
        })
        .map(|(s, ())| s)
    })?;
    Ok((check, timing))
}
