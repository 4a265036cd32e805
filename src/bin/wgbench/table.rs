//! The terminal tables: one per adapter and benchmark family after a run,
//! and the side-by-side table of `compare`.

use std::fmt::Write as _;

use crate::report::{AdapterRun, Figure, Group, Report, Status, Timer};

/// A figure's value, 3 significant digits (M and G above a million).
pub fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2} G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Seconds as ns, us, ms or s.
pub fn seconds(s: f64) -> String {
    if s < 1e-6 {
        format!("{:.0} ns", s * 1e9)
    } else if s < 1e-3 {
        format!("{:.1} us", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// Lay out rows of cells: the first column left-aligned, the rest right.
pub fn layout(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut w = vec![0; cols];
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        for (i, c) in r.iter().enumerate().take(cols) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |r: &[String]| {
        let mut s = String::new();
        for (i, c) in r.iter().enumerate().take(cols) {
            let pad = w[i] - c.chars().count();
            if i == 0 {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str("  ");
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    out.push_str(&line(&w.iter().map(|&n| "-".repeat(n)).collect::<Vec<_>>()));
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

/// A figure as a table cell: `25.4 ±3%`, with `[gpu]` when GPU timestamps
/// timed it; `FAILED` or `skipped` otherwise.
fn cell(f: &Figure) -> String {
    match (f.status, f.value, &f.time) {
        (Status::Ok, Some(v), Some(t)) => {
            let spread = if t.median_s > 0.0 {
                100.0 * t.mad_s / t.median_s
            } else {
                0.0
            };
            let gpu = if f.timer == Some(Timer::GpuTimestamps) {
                " [gpu]"
            } else {
                ""
            };
            format!("{} ±{spread:.0}%{gpu}", number(v))
        }
        (Status::Failed, ..) => "FAILED".into(),
        (Status::Skipped, ..) => "skipped".into(),
        _ => "?".into(),
    }
}

/// A ratio column of a family's table.
enum Ratio {
    /// The value in column `num` over the one in `den`, per row.
    Columns(&'static str, &'static str, &'static str),
    /// Each row's value over the one at (`row`, `column`).
    ToCell(&'static str, &'static str, &'static str),
}

fn ratio_spec(g: Group) -> Option<Ratio> {
    use crate::cases::{bandwidth, dispatch, llm, matmul, pool};
    match g {
        Group::Matmul => Some(Ratio::Columns("f32", matmul::CPU, "f32 / CPU")),
        Group::Bandwidth => Some(Ratio::ToCell(
            bandwidth::COPY,
            bandwidth::RAW,
            "of raw copy",
        )),
        Group::Dispatch => Some(Ratio::Columns(
            dispatch::UNFUSED,
            dispatch::RAW,
            "unfused / raw (time)",
        )),
        Group::Pool => Some(Ratio::Columns(pool::POOL, pool::CREATE, "pool / create")),
        Group::Llm => Some(Ratio::Columns(
            llm::COMPILED,
            llm::EAGER,
            "compiled / eager",
        )),
        Group::Reduction | Group::Minilm => None,
    }
}

fn ordered<'a>(xs: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for x in xs {
        if !v.iter().any(|y| y == x) {
            v.push(x.to_string());
        }
    }
    v
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{}x", times(a / b)),
        _ => "-".into(),
    }
}

/// A ratio with 3 significant digits (2 decimals below 10).
pub fn times(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// One family's table for one adapter, with a line per failure or skip.
pub fn group_table(run: &AdapterRun, g: Group, cpu_threads: usize) -> Option<String> {
    let figs: Vec<&Figure> = run.figures.iter().filter(|f| f.group == g).collect();
    if figs.is_empty() {
        return None;
    }
    let rows = ordered(figs.iter().map(|f| f.row.as_str()));
    let cols = ordered(figs.iter().map(|f| f.column.as_str()));
    let find = |r: &str, c: &str| figs.iter().find(|f| f.row == r && f.column == c).copied();
    let value = |r: &str, c: &str| find(r, c).and_then(|f| f.value);
    let unit = &figs[0].unit;
    let mut header: Vec<String> = vec![String::new()];
    header.extend(cols.iter().map(|c| {
        if c == crate::cases::matmul::CPU {
            format!("{c} ({cpu_threads} thr)")
        } else {
            c.clone()
        }
    }));
    let single = cols.len() == 1;
    if single {
        header.push("median time".into());
    }
    let spec = ratio_spec(g);
    if let Some(Ratio::Columns(.., label) | Ratio::ToCell(.., label)) = &spec {
        header.push(label.to_string());
    }
    let mut body = Vec::new();
    for r in &rows {
        let mut line = vec![r.clone()];
        line.extend(cols.iter().map(|c| find(r, c).map_or("-".into(), cell)));
        if single {
            line.push(
                find(r, &cols[0])
                    .and_then(|f| f.time.as_ref())
                    .map_or("-".into(), |t| seconds(t.median_s)),
            );
        }
        match &spec {
            Some(Ratio::Columns(num, den, _)) => line.push(ratio(value(r, num), value(r, den))),
            Some(Ratio::ToCell(row, col, _)) => {
                let mine = cols.iter().find_map(|c| value(r, c));
                line.push(if r == row {
                    "1.00x".into()
                } else {
                    ratio(mine, value(row, col))
                })
            }
            None => {}
        }
        body.push(line);
    }
    let mut out = format!("{} [{unit}]\n", g.title());
    out.push_str(&layout(&header, &body));
    // Cells that failed or were skipped for the same reason share one line.
    let named = figs
        .iter()
        .map(|f| (format!("{} / {}", f.row, f.column), *f));
    for note in crate::summary::notes(named) {
        let _ = writeln!(out, "  {}", note.line());
    }
    Some(out)
}

/// Everything measured on one adapter.
pub fn adapter_tables(run: &AdapterRun, cpu_threads: usize) -> String {
    let a = &run.adapter;
    let mut out = format!(
        "\n=== {} | {} | {} {} ===\n",
        a.label(),
        a.device_type,
        a.driver,
        a.driver_info
    );
    if let Some(e) = &run.error {
        let _ = writeln!(out, "FAILED: {e}");
        return out;
    }
    let _ = writeln!(out, "{}", run.timing_note);
    let _ = writeln!(
        out,
        "cells: median ± median absolute deviation; [gpu]: GPU timestamps"
    );
    for g in Group::ALL {
        if let Some(t) = group_table(run, g, cpu_threads) {
            out.push('\n');
            out.push_str(&t);
        }
    }
    out
}

/// One column of a comparison: a run of one adapter in one file.
pub struct Column<'a> {
    pub tag: String,
    pub file: String,
    pub report: &'a Report,
    pub run: &'a AdapterRun,
    /// The column its ratios are to (`summary::references`): `None` for a
    /// reference column.
    pub reference: Option<usize>,
}

/// `other / base` so that > 1 is better, whatever the unit's direction.
pub fn speedup(base: &Figure, other: &Figure) -> Option<f64> {
    let (b, o) = (base.value?, other.value?);
    if b <= 0.0 || o <= 0.0 {
        return None;
    }
    Some(if base.higher_is_better { o / b } else { b / o })
}

/// The keys of every figure, in the order of the first column that has it.
pub fn keys(cols: &[Column]) -> Vec<String> {
    ordered(
        cols.iter()
            .flat_map(|c| c.run.figures.iter().map(Figure::key))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str),
    )
}

/// The figure of `key` in column `c`.
pub fn find<'a>(c: &Column<'a>, key: &str) -> Option<&'a Figure> {
    c.run.figures.iter().find(|f| f.key() == key)
}

/// Everything `compare` shows, computed once for the table and the plot.
pub struct Comparison {
    /// Keys of the figures with a value in at least one column, in order.
    pub keys: Vec<String>,
    /// `ratios[c][k]`: column c's figure `keys[k]` over its reference's
    /// (`None` for a reference column, or where either has no value).
    pub ratios: Vec<Vec<Option<f64>>>,
    /// `flags[c]`: the figures of column c that moved against the rest.
    pub flags: Vec<Vec<crate::summary::Flag>>,
    /// Figures with no value in any column, collapsed by reason.
    pub notes: Vec<crate::summary::Note>,
    /// `--flag-ratio`.
    pub threshold: f64,
}

impl Comparison {
    pub fn new(cols: &[Column], threshold: f64) -> Comparison {
        let all = keys(cols);
        let valued = |k: &String| {
            cols.iter()
                .any(|c| find(c, k).is_some_and(|f| f.value.is_some()))
        };
        let (keys, empty): (Vec<String>, Vec<String>) = all.into_iter().partition(valued);
        let ratios: Vec<Vec<Option<f64>>> = cols
            .iter()
            .map(|c| {
                keys.iter()
                    .map(|k| {
                        let base = find(&cols[c.reference?], k)?;
                        speedup(base, find(c, k)?)
                    })
                    .collect()
            })
            .collect();
        let flags = ratios
            .iter()
            .map(|r| crate::summary::flag(r, threshold))
            .collect();
        // A figure no column has a value for: one line per reason, naming
        // the columns it was skipped or failed in.
        let named: Vec<(String, Figure)> = empty
            .iter()
            .filter_map(|k| {
                let (first, tags) = cols
                    .iter()
                    .fold((None, Vec::new()), |(first, mut tags), c| {
                        match find(c, k) {
                            Some(f) => {
                                tags.push(c.tag.as_str());
                                (first.or(Some(f)), tags)
                            }
                            None => (first, tags),
                        }
                    });
                let mut f = first?.clone();
                f.message = Some(format!(
                    "{} (in {})",
                    f.message.as_deref().unwrap_or(""),
                    tags.join(", ")
                ));
                Some((k.clone(), f))
            })
            .collect();
        let notes = crate::summary::notes(named.iter().map(|(k, f)| (k.clone(), f)));
        Comparison {
            keys,
            ratios,
            flags,
            notes,
            threshold,
        }
    }

    /// Whether column c's figure k is flagged.
    pub fn flagged(&self, c: usize, k: usize) -> bool {
        self.flags[c].iter().any(|f| f.index == k)
    }
}

/// The side-by-side table of `compare`, with the figures that moved
/// against the rest and the figures no column has, collapsed.
pub fn compare_table(cols: &[Column], cmp: &Comparison) -> String {
    let mut out = String::new();
    for c in cols {
        let _ = writeln!(
            out,
            "{} = {}: {} ({}, {}, wgarray {}{}){}",
            c.tag,
            c.file,
            c.run.adapter.label(),
            c.report.date,
            c.report.suite,
            c.report.wgarray_version,
            c.report
                .git_commit
                .as_deref()
                .map(|g| format!(", {}", &g[..g.len().min(12)]))
                .unwrap_or_default(),
            match c.reference {
                Some(r) => format!("; ratios to {}", cols[r].tag),
                None => String::new(),
            }
        );
    }
    let _ = writeln!(
        out,
        "(x r): relative to the column's reference (the first run of the same adapter, else \
         A) for the same figure; r > 1 is better (faster, higher throughput, less time per op); \
         !: moved against the rest of its column\n"
    );
    let mut header = vec!["figure".to_string(), "unit".to_string()];
    header.extend(cols.iter().map(|c| match c.reference {
        Some(r) => format!("{} (/{})", c.tag, cols[r].tag),
        None => c.tag.clone(),
    }));
    let mut body = Vec::new();
    for (k, key) in cmp.keys.iter().enumerate() {
        let figs: Vec<Option<&Figure>> = cols.iter().map(|c| find(c, key)).collect();
        let unit = figs.iter().flatten().next().map_or("", |f| f.unit.as_str());
        let mut line = vec![key.clone(), unit.to_string()];
        for (c, f) in figs.iter().enumerate() {
            line.push(match f {
                None => "-".into(),
                Some(f) if f.value.is_none() => match f.status {
                    Status::Failed => "FAILED".into(),
                    _ => "skipped".into(),
                },
                Some(f) => {
                    let v = number(f.value.unwrap_or_default());
                    match cmp.ratios[c][k] {
                        Some(r) => {
                            let mark = if cmp.flagged(c, k) { " !" } else { "" };
                            format!("{v} (x{}{mark})", times(r))
                        }
                        None => v,
                    }
                }
            });
        }
        body.push(line);
    }
    out.push_str(&layout(&header, &body));
    for note in &cmp.notes {
        let _ = writeln!(out, "  {}", note.line());
    }
    let moved: Vec<String> = cmp
        .flags
        .iter()
        .enumerate()
        .flat_map(|(c, fl)| fl.iter().map(move |f| (c, f)))
        .map(|(c, f)| {
            let r = cols[c].reference.map_or("?", |r| cols[r].tag.as_str());
            format!(
                "  {} / {}: {}: x{} against the rest's median x{} ({} {}x)",
                cols[c].tag,
                r,
                cmp.keys[f.index],
                times(f.ratio),
                times(f.median),
                if f.against_rest < 1.0 {
                    "worse by"
                } else {
                    "better by"
                },
                times(if f.against_rest < 1.0 {
                    1.0 / f.against_rest
                } else {
                    f.against_rest
                })
            )
        })
        .collect();
    if moved.is_empty() {
        let _ = writeln!(out, "\nno figure moved against the rest of its column");
    } else {
        let _ = writeln!(
            out,
            "\n{} figure(s) moved against the rest of their column:",
            moved.len()
        );
        for m in moved {
            let _ = writeln!(out, "{m}");
        }
    }
    let _ = writeln!(
        out,
        "(R = {}; {})",
        cmp.threshold,
        crate::summary::FLAG_RULE
    );
    out
}
