//! What `compare` and the run tables say beyond the numbers: which column
//! each compared column is a ratio to, the figures that moved against the
//! rest of their column ([`flag`]), and figures skipped or failed for the
//! same reason collapsed into one line with a count ([`notes`]).
//!
//! Depends on `report` only, so that tests/wgbench.rs can include it and
//! test the rules on synthetic reports.

use crate::report::{AdapterIdentity, Figure, Status};

/// The default of `compare --flag-ratio`: a figure whose ratio is more
/// than 1.5 times better or worse than the median of its column's other
/// ratios is flagged (unless the column's own spread is wider; see
/// [`flag`]).
pub const FLAG_RATIO: f64 = 1.5;

/// How many median absolute deviations (of the log ratios, scaled by
/// 1.4826 to a standard deviation's units) a flagged ratio lies beyond
/// the median, at least.
pub const FLAG_SPREAD: f64 = 3.0;

/// A column needs this many other ratios before any of its figures can be
/// said to have moved against "the rest".
pub const FLAG_MIN_OTHERS: usize = 3;

/// The rule, in words, for `--help`, the table's footer and the docs.
pub const FLAG_RULE: &str = "a figure is flagged (!) when its ratio to its reference column, \
divided by the median of the other figures' ratios in the same column, is beyond R (--flag-ratio, \
default 1.5) either way, and beyond 3 median absolute deviations (x 1.4826) of those other \
log-ratios; a column with fewer than 3 other ratios flags nothing";

/// Which earlier column each column is compared with: the first column of
/// the same adapter (name and backend) when that is another column; for
/// the first column of an adapter that a later column shares, none (it is
/// that adapter's reference); for an adapter only one column has, the
/// first column (two vendors side by side), unless it is the first column.
pub fn references(adapters: &[&AdapterIdentity]) -> Vec<Option<usize>> {
    let first_of = |i: usize| adapters.iter().position(|a| *a == adapters[i]).unwrap_or(i);
    (0..adapters.len())
        .map(|i| {
            let first = first_of(i);
            if first != i {
                Some(first)
            } else if adapters.iter().skip(i + 1).any(|a| *a == adapters[i]) || i == 0 {
                None
            } else {
                Some(0)
            }
        })
        .collect()
}

/// A figure that moved against the rest of its column.
#[derive(Clone, Debug, PartialEq)]
pub struct Flag {
    /// The figure's index in the slice [`flag`] was given.
    pub index: usize,
    /// Its ratio (> 1 better).
    pub ratio: f64,
    /// The median of the other figures' ratios.
    pub median: f64,
    /// `ratio / median`: < 1 worse than the rest, > 1 better.
    pub against_rest: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The figures of one column that moved against the rest: `ratios[i]` is
/// figure i's ratio to its reference (> 1 better; `None` where either
/// value is missing). Figure i is flagged when, with `m` the median and
/// `s` the median absolute deviation of the other figures' log ratios,
/// `|ln ratio - m| > max(ln threshold, FLAG_SPREAD * 1.4826 * s)`, and
/// there are at least [`FLAG_MIN_OTHERS`] other ratios. A median and a
/// MAD, not a mean and a deviation, so that the moved figures do not hide
/// each other; the others only, so that a figure is not part of the rest
/// it is measured against.
pub fn flag(ratios: &[Option<f64>], threshold: f64) -> Vec<Flag> {
    let logs: Vec<(usize, f64)> = ratios
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.filter(|r| r.is_finite() && *r > 0.0).map(|r| (i, r.ln())))
        .collect();
    let floor = threshold.max(1.0).ln();
    let mut out = Vec::new();
    for &(i, x) in &logs {
        let mut others: Vec<f64> = logs.iter().filter(|(j, _)| *j != i).map(|p| p.1).collect();
        if others.len() < FLAG_MIN_OTHERS {
            continue;
        }
        let m = median(&mut others);
        let mut dev: Vec<f64> = others.iter().map(|y| (y - m).abs()).collect();
        let s = median(&mut dev);
        let limit = floor.max(FLAG_SPREAD * 1.4826 * s);
        if (x - m).abs() > limit {
            out.push(Flag {
                index: i,
                ratio: x.exp(),
                median: m.exp(),
                against_rest: (x - m).exp(),
            });
        }
    }
    out
}

/// One line of notes: figures that failed or were skipped for the same
/// reason (in the same columns, for `compare`).
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    /// `FAILED` or `skipped`.
    pub what: &'static str,
    /// The reason.
    pub why: String,
    /// The figures (`row / column`, or keys), in order.
    pub cells: Vec<String>,
}

impl Note {
    /// `skipped 12 figures (a, b, ... z): why`: the count, and the cells
    /// (the first three and the last when there are more than five).
    pub fn line(&self) -> String {
        let n = self.cells.len();
        let shown = if n > 5 {
            format!("{}, ... {}", self.cells[..3].join(", "), self.cells[n - 1])
        } else {
            self.cells.join(", ")
        };
        if n == 1 {
            format!("{} {shown}: {}", self.what, self.why)
        } else {
            format!("{} {n} figures ({shown}): {}", self.what, self.why)
        }
    }
}

/// The failed and skipped figures among `figs` (each with the name it is
/// listed by), one [`Note`] per status and reason, in order of first
/// appearance.
pub fn notes<'a>(figs: impl IntoIterator<Item = (String, &'a Figure)>) -> Vec<Note> {
    let mut out: Vec<Note> = Vec::new();
    for (name, f) in figs {
        let what = match f.status {
            Status::Ok => continue,
            Status::Failed => "FAILED",
            Status::Skipped => "skipped",
        };
        let why = f.message.clone().unwrap_or_default();
        match out.iter_mut().find(|n| n.what == what && n.why == why) {
            Some(n) => n.cells.push(name),
            None => out.push(Note {
                what,
                why,
                cells: vec![name],
            }),
        }
    }
    out
}
