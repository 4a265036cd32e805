//! The benchmark cases, one module per family, and what they share: the
//! context of one adapter's run and how a checked, timed case becomes a
//! [`Figure`].

pub mod bandwidth;
pub mod dispatch;
pub mod llm;
pub mod matmul;
pub mod minilm;
pub mod pool;
pub mod reduction;

use std::path::PathBuf;

use wgarray::{Array, DType, Device};

use crate::measure::{self, CaseResult, Outcome, Timing};
use crate::report::{Check, Figure, Group, Status, Work};
use crate::suite::Suite;

/// What every case of one adapter's run needs.
pub struct Ctx {
    pub device: Device,
    pub suite: Suite,
    pub protocol: measure::Protocol,
    /// Threads the CPU sgemm may use.
    pub cpu_threads: usize,
    /// Where MiniLM's weights are (or would be).
    pub model_dir: PathBuf,
    /// Test hook (`--corrupt GROUP`, hidden): perturb one value of every
    /// result in this group before its check, to show that a wrong result
    /// is reported as a failure and never timed.
    pub corrupt: Option<Group>,
}

impl Ctx {
    /// [`measure::check`], after the `--corrupt` hook.
    pub fn check(
        &self,
        group: Group,
        reference: &str,
        got: &mut [f64],
        want: &[f64],
        tol: impl Fn(usize) -> f64,
    ) -> CaseResult<Check> {
        if self.corrupt == Some(group)
            && let Some(x) = got.first_mut()
        {
            *x += 1.0 + x.abs();
        }
        measure::check(reference, got, want, tol)
    }

    /// Skip when one array of `bytes` would not fit a storage binding.
    pub fn fits(&self, bytes: u64) -> CaseResult<()> {
        let max = self.device.limits().max_storage_buffer_binding_size;
        if bytes > max {
            return Err(Outcome::Skip(format!(
                "needs a {} storage binding; this adapter's largest is {}",
                crate::adapters::bytes(bytes),
                crate::adapters::bytes(max)
            )));
        }
        Ok(())
    }
}

/// What a case runs: its figures on one adapter.
pub type CaseFn = Box<dyn FnOnce(&Ctx) -> Vec<Figure>>;

/// One step of the run: a label for the progress bar and what it runs.
pub struct Case {
    pub group: Group,
    pub label: String,
    pub run: CaseFn,
}

impl Case {
    pub fn new(
        group: Group,
        label: impl Into<String>,
        run: impl FnOnce(&Ctx) -> Vec<Figure> + 'static,
    ) -> Case {
        Case {
            group,
            label: label.into(),
            run: Box::new(run),
        }
    }
}

/// Every case of the suite, in order.
pub fn all(ctx: &Ctx) -> Vec<Case> {
    let mut v = matmul::cases(ctx);
    v.extend(bandwidth::cases(ctx));
    v.extend(reduction::cases(ctx));
    v.extend(dispatch::cases(ctx));
    v.extend(pool::cases(ctx));
    v.extend(minilm::cases(ctx));
    v.extend(llm::cases(ctx));
    v
}

/// Where a figure goes in its table.
#[derive(Clone, Debug)]
pub struct Cell {
    pub group: Group,
    pub row: String,
    pub column: String,
}

impl Cell {
    pub fn new(group: Group, row: impl Into<String>, column: impl Into<String>) -> Cell {
        Cell {
            group,
            row: row.into(),
            column: column.into(),
        }
    }
}

/// The figure of a case that was checked, then timed; or why not.
pub fn figure(cell: Cell, work: Work, result: CaseResult<(Check, Timing)>) -> Figure {
    let mut f = Figure {
        group: cell.group,
        row: cell.row,
        column: cell.column,
        status: Status::Ok,
        message: None,
        value: None,
        unit: work.unit().to_string(),
        higher_is_better: work.higher_is_better(),
        work: Some(work),
        timer: None,
        time: None,
        host_time: None,
        check: None,
    };
    match result {
        Ok((check, timing)) => {
            f.value = Some(work.rate(timing.time.median_s));
            f.timer = Some(timing.timer);
            f.time = Some(timing.time);
            f.host_time = timing.host_time;
            f.check = Some(check);
        }
        Err(Outcome::Skip(why)) => {
            f.status = Status::Skipped;
            f.message = Some(why);
        }
        Err(Outcome::Fail(why)) => {
            f.status = Status::Failed;
            f.message = Some(why);
        }
    }
    f
}

/// Upload f32 values as `dtype` (rounded to nearest even for f16 and bf16).
pub fn upload(
    data: &[f32],
    shape: &[usize],
    dtype: DType,
    device: &Device,
) -> wgarray::Result<Array> {
    use wgarray::half::{bf16, f16};
    match dtype {
        DType::F16 => {
            let v: Vec<f16> = data.iter().map(|&x| f16::from_f32(x)).collect();
            Array::from_slice(&v, shape, device)
        }
        DType::BF16 => {
            let v: Vec<bf16> = data.iter().map(|&x| bf16::from_f32(x)).collect();
            Array::from_slice(&v, shape, device)
        }
        _ => Array::from_slice(data, shape, device),
    }
}

/// `x` rounded to `dtype` and back, as [`upload`] stores it.
pub fn round_to(x: f32, dtype: DType) -> f32 {
    use wgarray::half::{bf16, f16};
    match dtype {
        DType::F16 => f16::from_f32(x).to_f32(),
        DType::BF16 => bf16::from_f32(x).to_f32(),
        _ => x,
    }
}

/// Evaluate `a` and wait for the device.
pub fn settle(a: &Array) -> CaseResult<()> {
    a.eval()?;
    a.device().synchronize()?;
    Ok(())
}

/// A deterministic seed from a case's name.
pub fn seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}
