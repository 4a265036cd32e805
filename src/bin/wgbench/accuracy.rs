//! `wgbench accuracy`: every float function's error in ulp on every
//! selected adapter (`wgarray::testing::accuracy`), as a Markdown table
//! (docs/ACCURACY.md) and JSON.
//!
//! f32 over about `--points` bit patterns per sign of each function's
//! domain plus its special values; f16 and bf16 over all 65536 inputs of
//! unary functions (binary ones: the same grid as f32, in that dtype).
//! The error of f16 and bf16 is in ulp of their own type: a result that is
//! the correctly rounded f32 result rounded once more is within 0.5 plus
//! a hair (double rounding), and f32 errors of 2 ulp add 2^-12 (f16) or
//! 2^-15 (bf16) of an ulp.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::json;
use wgarray::DType;
use wgarray::testing::accuracy::{Kind, Stats, functions, inputs, measure};

use crate::{Stop, adapters, out, writable};

#[derive(clap::Args, Debug)]
pub struct AccuracyArgs {
    /// Only adapters whose name contains this (case-insensitive).
    #[arg(long, env = "WGARRAY_ADAPTER", value_name = "SUBSTR")]
    adapter: Option<String>,
    /// Only adapters of this backend: vulkan, gl, dx12, metal (empty: any).
    #[arg(long, env = "WGARRAY_BACKEND", value_name = "B")]
    backend: Option<String>,
    /// f32 bit patterns per sign of each domain (binary functions: its
    /// square root per operand). tests/accuracy.rs uses 16384.
    #[arg(long, default_value_t = 1 << 20, value_name = "N")]
    points: usize,
    /// Dtypes to measure (comma-separated): f32, f16, bf16.
    #[arg(long, value_delimiter = ',', default_value = "f32,f16,bf16", value_parser = dtype)]
    dtypes: Vec<DType>,
    /// Only these functions (comma-separated names, as `wgarray` spells the
    /// methods: exp, power, ...).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    only: Vec<String>,
    /// Write the figures as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the Markdown table here (docs/ACCURACY.md).
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
}

pub fn dtype(s: &str) -> Result<DType, String> {
    match s {
        "f32" => Ok(DType::F32),
        "f16" => Ok(DType::F16),
        "bf16" => Ok(DType::BF16),
        _ => Err(format!("{s:?}: f32, f16 or bf16")),
    }
}

/// One cell: a function in a dtype on an adapter.
struct Cell {
    inside: Stats,
    all: Stats,
}

/// How the table names an adapter: Mesa's software rasterisers by their
/// driver names (both report "llvmpipe").
fn column(identity: &crate::report::AdapterIdentity) -> String {
    let soft = identity.name.to_lowercase().contains("llvmpipe");
    match (soft, identity.backend.as_str()) {
        (true, "Vulkan") => "lavapipe (Vulkan)".into(),
        (true, "Gl") => "llvmpipe (GL)".into(),
        _ => identity.label(),
    }
}

fn ulps(x: f64) -> String {
    if x.is_infinite() {
        "wrong special".into()
    } else if x >= 1000.0 {
        format!("{x:.1e}")
    } else {
        format!("{x:.3}")
    }
}

pub fn run(args: AccuracyArgs) -> Result<(), Stop> {
    for p in args.json.iter().chain(args.markdown.iter()) {
        writable(p)?;
    }
    let chosen = adapters::chosen(&args.backend, &args.adapter)?;
    let fs: Vec<_> = functions()
        .into_iter()
        .filter(|f| args.only.is_empty() || args.only.iter().any(|n| n == f.name))
        .collect();
    if fs.is_empty() {
        return Err(Stop::Input(format!("no function named {:?}", args.only)));
    }
    // columns[adapter][function][dtype]
    let mut columns = Vec::new();
    let mut runs = Vec::new();
    let mut failed = Vec::new();
    for adapter in &chosen {
        let identity = adapters::identity(adapter);
        let name = column(&identity);
        out(&format!("{name}\n"));
        let device = wgarray::Device::from_adapter(adapter)
            .map_err(|e| Stop::Failed(format!("{name}: could not open the adapter: {e}")))?;
        let mut cells = Vec::new();
        let mut figures = Vec::new();
        for f in &fs {
            let mut row = Vec::new();
            for &dt in &args.dtypes {
                let xs = inputs(f, dt, args.points);
                let cell = match measure(f, &xs, dt, &device) {
                    Ok((inside, all)) => Some(Cell { inside, all }),
                    Err(wgarray::Error::MissingFeature { .. }) => None,
                    Err(e) => return Err(Stop::Failed(format!("{name}: {}: {e}", f.name))),
                };
                if let Some(c) = &cell {
                    out(&format!(
                        "  {:12} {:5} max {:>8} ulp, mean {:.3}, at {:?}\n",
                        f.name,
                        format!("{dt:?}").to_lowercase(),
                        ulps(c.inside.max),
                        c.inside.mean,
                        c.inside.worst_input
                    ));
                    if c.inside.max > f.bound_in(dt) {
                        failed.push(format!(
                            "{name}: {} in {dt:?}: {} ulp > {} at {:?}",
                            f.name,
                            c.inside.max,
                            f.bound_in(dt),
                            c.inside.worst_input
                        ));
                    }
                    let stats = |s: &Stats| {
                        json!({
                            "count": s.count,
                            "max_ulp": if s.max.is_finite() { json!(s.max) } else { json!("inf") },
                            "mean_ulp": s.mean,
                            "worst_input": [s.worst_input.0, s.worst_input.1],
                            "worst_got": format!("{:e}", s.worst_got),
                            "worst_want": format!("{:e}", s.worst_want),
                            "wrong_specials": s.wrong_specials,
                        })
                    };
                    figures.push(json!({
                        "function": f.name,
                        "dtype": format!("{dt:?}").to_lowercase(),
                        "bound_ulp": f.bound_in(dt),
                        "domain": [f.domain.0, f.domain.1],
                        "in_domain": stats(&c.inside),
                        "all_inputs": stats(&c.all),
                    }));
                }
                row.push(cell);
            }
            cells.push(row);
        }
        runs.push(json!({
            "adapter": identity.label(),
            "column": name,
            "driver": identity.driver,
            "driver_info": identity.driver_info,
            "figures": figures,
        }));
        columns.push((name, identity.device_type.clone(), cells));
    }
    if let Some(p) = &args.json {
        let doc = json!({
            "format": "wgarray-accuracy",
            "format_version": 1,
            "wgarray_version": env!("CARGO_PKG_VERSION"),
            "git_commit": crate::report::git_commit(),
            "date": crate::report::utc_now(),
            "points": args.points,
            "runs": runs,
        });
        let text = serde_json::to_string_pretty(&doc).expect("JSON values serialise");
        std::fs::write(p, text + "\n")
            .map_err(|e| Stop::Input(format!("cannot write {}: {e}", p.display())))?;
        out(&format!("wrote {}\n", p.display()));
    }
    if let Some(p) = &args.markdown {
        let md = splice(
            &std::fs::read_to_string(p).unwrap_or_default(),
            &markdown(&fs, &args, &columns),
        );
        std::fs::write(p, md)
            .map_err(|e| Stop::Input(format!("cannot write {}: {e}", p.display())))?;
        out(&format!("wrote {}\n", p.display()));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Stop::Failed(format!(
            "beyond the bound tests/accuracy.rs asserts:\n{}",
            failed.join("\n")
        )))
    }
}

const BEGIN: &str = "<!-- BEGIN wgbench accuracy -->";
const END: &str = "<!-- END wgbench accuracy -->";

/// `doc` with the part between the markers replaced by `table` (the prose
/// around it stays), or the table alone between markers.
fn splice(doc: &str, table: &str) -> String {
    match (doc.find(BEGIN), doc.find(END)) {
        (Some(b), Some(e)) if b < e => {
            format!("{}{BEGIN}\n{table}{}", &doc[..b], &doc[e..])
        }
        _ => format!("{BEGIN}\n{table}{END}\n"),
    }
}

type Column = (String, String, Vec<Vec<Option<Cell>>>);

/// The table: a row per function and dtype, a column per adapter (and one
/// for a real GPU when none was measured), `max (mean)` in each cell.
fn markdown(
    fs: &[wgarray::testing::accuracy::Function],
    args: &AccuracyArgs,
    columns: &[Column],
) -> String {
    let mut s = String::new();
    let gpu_measured = columns
        .iter()
        .any(|c| c.1 == "DiscreteGpu" || c.1 == "IntegratedGpu");
    let mut heads: Vec<String> = columns.iter().map(|c| c.0.clone()).collect();
    if !gpu_measured {
        heads.push("real GPU".into());
    }
    let _ = writeln!(
        s,
        "<!-- Generated by `wgbench accuracy --markdown`: edit the tool, not this table. -->"
    );
    let _ = writeln!(
        s,
        "\n| function | dtype | domain of the bound | bound | {} |",
        heads.join(" | ")
    );
    let _ = writeln!(s, "|---|---|---|---|{}", "---|".repeat(heads.len()));
    for (fi, f) in fs.iter().enumerate() {
        for (di, dt) in args.dtypes.iter().enumerate() {
            let interval = |(lo, hi): (f32, f32)| {
                if lo == f32::NEG_INFINITY && hi == f32::INFINITY {
                    "all".to_string()
                } else {
                    format!("[{lo}, {hi}]")
                }
            };
            let domain = match f.kind {
                Kind::Binary { domain_b, .. } => {
                    format!("a: {}, b: {}", interval(f.domain), interval(domain_b))
                }
                Kind::Unary { .. } => interval(f.domain),
            };
            let mut cells: Vec<String> = columns
                .iter()
                .map(|c| match &c.2[fi][di] {
                    Some(cell) => {
                        let mut t = format!("{} ({:.3})", ulps(cell.inside.max), cell.inside.mean);
                        if cell.all.max > cell.inside.max {
                            let _ = write!(t, "; all inputs {}", ulps(cell.all.max));
                        }
                        t
                    }
                    None => "no f16 here".into(),
                })
                .collect();
            if !gpu_measured {
                cells.push("not measured yet".into());
            }
            let bound = format!("{:.5}", f.bound_in(*dt));
            let bound = bound.trim_end_matches('0').trim_end_matches('.');
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} | {} |",
                f.name,
                format!("{dt:?}").to_lowercase(),
                domain,
                bound,
                cells.join(" | ")
            );
        }
    }
    let _ = writeln!(
        s,
        "\nCells: the largest error in ulp over the domain (mean in brackets), then over all inputs where that is larger. Sweep: about {} f32 bit patterns per sign of each domain (binary functions: {} per operand and sign), the special values and the neighbours of each threshold; f16 and bf16 unary functions every input.",
        args.points,
        (args.points as f64).sqrt().ceil()
    );
    if let Some(f32_col) = args.dtypes.iter().position(|&d| d == DType::F32) {
        for c in columns {
            let worst: Vec<String> = fs
                .iter()
                .enumerate()
                .filter_map(|(fi, f)| {
                    let st = &c.2[fi][f32_col].as_ref()?.inside;
                    let at = if f.is_binary() {
                        format!("({:e}, {:e})", st.worst_input.0, st.worst_input.1)
                    } else {
                        format!("{:e}", st.worst_input.0)
                    };
                    (st.max > 0.5).then(|| format!("`{}` {at}", f.name))
                })
                .collect();
            let _ = writeln!(
                s,
                "\nWhere the largest f32 error is on {} (functions above half an ulp; the JSON has every input, result and reference): {}.",
                c.0,
                worst.join(", ")
            );
        }
    }
    let _ = writeln!(s, "\nNotes on the functions:\n");
    for f in fs {
        let _ = writeln!(s, "- `{}`: {}.", f.name, f.note);
    }
    s
}
