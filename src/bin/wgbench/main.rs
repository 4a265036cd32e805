//! `wgbench`: the same kernels, the same checks and comparable numbers on
//! every adapter a machine has.
//!
//! ```sh
//! cargo run --release --features wgbench --bin wgbench -- list
//! cargo run --release --features wgbench --bin wgbench -- run --json run.json --plot run.svg
//! cargo run --release --features wgbench --bin wgbench -- compare before.json after.json
//! ```
//!
//! Every result is checked against a host reference before it is timed; a
//! result that disagrees is reported as FAILED and gets no number.
//!
//! Exit status: 0 when every figure passed its check (skips included), 1
//! when one failed or an adapter could not be opened, 2 for bad input (an
//! adapter filter that matches nothing, an unwritable output path, a JSON
//! file that is not a wgbench result of this format version).
//!
//! Modules: `adapters` (finding and describing adapters), `suite` (sizes),
//! `measure` (timing protocol and checks), `cases/` (one module per
//! benchmark family), `raw` (the raw-wgpu baselines), `report` (the JSON),
//! `table` and `plot` (output).

mod accuracy;
mod adapters;
mod cases;
mod gemm;
mod measure;
#[path = "../../../examples/minilm/mod.rs"]
mod minilm_model;

#[path = "../../../examples/llm/mod.rs"]
mod llm_model;
mod plot;
mod raw;
mod report;
mod rng;
mod suite;
mod summary;
mod table;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use report::{AdapterRun, Group, Host, Report, Status};
use suite::Suite;

/// Benchmark wgarray on every adapter of this machine: matmul, memory
/// bandwidth, reductions, dispatch overhead, the buffer pool and MiniLM, each
/// checked against a host reference before it is timed.
#[derive(Parser, Debug)]
#[command(name = "wgbench", version, about, long_about = None)]
#[command(
    after_help = "Exit status: 0 all checks passed; 1 a check failed or an adapter \
                        could not be opened; 2 bad input."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Every adapter: name, backend, device type, driver, limits, features.
    List,
    /// Run a suite on every selected adapter, one after another.
    Run(RunArgs),
    /// Side-by-side ratios between runs (before and after on each adapter,
    /// or two vendors), flagging the figures that moved against the rest.
    Compare(CompareArgs),
    /// Every float function's error in ulp against an f64 reference, on
    /// every selected adapter (docs/ACCURACY.md).
    Accuracy(accuracy::AccuracyArgs),
    /// Every GEMM kernel this adapter may choose (and, with --sweep, a grid
    /// of workgroup-memory tiles) timed on one shape, beside the tuned
    /// choice.
    Gemm(gemm::GemmArgs),
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Only adapters whose name contains this (case-insensitive).
    #[arg(long, env = "WGARRAY_ADAPTER", value_name = "SUBSTR")]
    adapter: Option<String>,
    /// Only adapters of this backend: vulkan, gl, dx12, metal (empty: any).
    #[arg(long, env = "WGARRAY_BACKEND", value_name = "B")]
    backend: Option<String>,
    /// How much to measure.
    #[arg(long, value_enum, default_value_t = Suite::Quick)]
    suite: Suite,
    /// Write every figure as JSON here ("-": standard output, and the tables
    /// go to standard error).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Plot here, as FILE.svg and FILE.png (an .svg or .png extension is
    /// replaced): matmul GFLOP/s against size, and a bar panel per other
    /// family, each with its unit on the axis.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// all-MiniLM-L6-v2's folder. Default: $WGARRAY_MODEL_DIR, else
    /// ~/.cache/wgarray/all-MiniLM-L6-v2 (where scripts/fetch-model.sh puts it).
    #[arg(long, value_name = "DIR")]
    model_dir: Option<PathBuf>,
    /// Only these families (comma-separated): matmul, bandwidth, reduction,
    /// dispatch, pool, minilm, llm (smollm2 decode).
    #[arg(long, value_name = "GROUPS", value_delimiter = ',', value_parser = group)]
    only: Vec<Group>,
    /// Threads for the CPU sgemm (matrixmultiply uses at most 4). Default:
    /// $MATMUL_NUM_THREADS, else every logical CPU.
    #[arg(long, value_name = "N")]
    cpu_threads: Option<usize>,
    /// Test hook: perturb one value of every result of this family before
    /// its check.
    #[arg(long, hide = true, value_parser = group)]
    corrupt: Option<Group>,
}

#[derive(clap::Args, Debug)]
#[command(after_help = format!(
    "Flagging: {}. Figures that no column has a value for are listed under the table, one line \
     per reason, with a count.",
    summary::FLAG_RULE
))]
struct CompareArgs {
    /// JSON files written by `wgbench run --json`. Each adapter run is a
    /// column; a column's ratios are to the first column of the same
    /// adapter (name and backend), or, for an adapter only one column
    /// has, to the first column.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Plot the ratios here, as FILE.svg and FILE.png: one panel per
    /// family, the axis clamped to the figures that did not move, moved
    /// figures marked.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Flag a figure whose ratio is this many times better or worse than
    /// the median ratio of the rest of its column (and beyond its spread).
    #[arg(long, value_name = "R", default_value_t = summary::FLAG_RATIO, value_parser = flag_ratio)]
    flag_ratio: f64,
}

fn flag_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 1.0 => Ok(r),
        _ => Err(format!("{s:?} is not a ratio >= 1")),
    }
}

fn group(s: &str) -> Result<Group, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|_| format!("no benchmark family {s:?}"))
}

/// Why wgbench stops: bad input (exit 2) or a failed run (exit 1).
enum Stop {
    Input(String),
    Failed(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List => list(),
        Command::Run(args) => run(args),
        Command::Compare(args) => compare(args),
        Command::Accuracy(args) => accuracy::run(args),
        Command::Gemm(args) => gemm::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop::Failed(msg)) => {
            eprintln!("wgbench: {msg}");
            ExitCode::from(1)
        }
        Err(Stop::Input(msg)) => {
            eprintln!("wgbench: {msg}");
            ExitCode::from(2)
        }
    }
}

/// Write to standard output; a closed pipe (`| head`) is not an error.
fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes()).and_then(|()| o.flush());
}

fn list() -> Result<(), Stop> {
    let all = adapters::all();
    out(&adapters::listing(&all));
    if all.is_empty() {
        return Err(Stop::Failed("no adapters".into()));
    }
    Ok(())
}

/// Fail now, before any measuring, if `path` cannot be written. A file
/// the probe creates is removed again.
fn writable(path: &Path) -> Result<(), Stop> {
    let existed = path.exists();
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| Stop::Input(format!("cannot write {}: {e}", path.display())))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Threads matrixmultiply will use, setting `MATMUL_NUM_THREADS` first.
fn cpu_threads(requested: Option<usize>) -> usize {
    let from_env = std::env::var("MATMUL_NUM_THREADS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok());
    let n = requested
        .or(from_env)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    // SAFETY: called from `run` before anything else in the process
    // starts a thread (no adapter has been enumerated yet), so no other
    // thread reads the environment concurrently.
    unsafe { std::env::set_var("MATMUL_NUM_THREADS", n.to_string()) };
    n.min(4)
}

fn run(args: RunArgs) -> Result<(), Stop> {
    let json_path = args.json.clone().filter(|p| p.as_os_str() != "-");
    let json_stdout = json_path.is_none() && args.json.is_some();
    for p in json_path.iter() {
        writable(p)?;
    }
    for p in args.plot.iter().flat_map(|p| plot::outputs(p)) {
        writable(&p)?;
    }
    let threads = cpu_threads(args.cpu_threads);
    let chosen = adapters::chosen(&args.backend, &args.adapter)?;
    let say = |s: &str| {
        if json_stdout {
            eprint!("{s}");
        } else {
            out(s);
        }
    };
    let mut report = Report {
        format: report::FORMAT.into(),
        format_version: report::FORMAT_VERSION,
        wgarray_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: report::git_commit(),
        date: report::utc_now(),
        suite: args.suite.name().into(),
        command: std::env::args().collect(),
        host: Host {
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            cpu: report::cpu_model(),
            logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_sgemm_threads: threads,
            load_average_start: report::load_average(),
            load_average_end: None,
        },
        runs: Vec::new(),
    };
    say(&format!(
        "wgbench {} suite on {} adapter(s); wgarray {}{}; {}\n",
        args.suite.name(),
        chosen.len(),
        report.wgarray_version,
        report
            .git_commit
            .as_deref()
            .map(|c| format!(" at {c}"))
            .unwrap_or_default(),
        report.date
    ));
    let model_dir = args
        .model_dir
        .clone()
        .unwrap_or_else(cases::minilm::default_model_dir);
    for adapter in &chosen {
        let run = run_adapter(adapter, &args, threads, &model_dir);
        say(&table::adapter_tables(&run, threads));
        report.runs.push(run);
    }
    report.host.load_average_end = report::load_average();

    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| Stop::Failed(format!("serialising the results: {e}")))?;
    if json_stdout {
        out(&(text + "\n"));
    } else if let Some(p) = &json_path {
        std::fs::write(p, text + "\n")
            .map_err(|e| Stop::Input(format!("cannot write {}: {e}", p.display())))?;
        say(&format!("\nwrote {}\n", p.display()));
    }
    if let Some(p) = &args.plot {
        match plot::run(&report, p).map_err(Stop::Input)? {
            Some(files) => {
                for f in files {
                    say(&format!("wrote {}\n", f.display()));
                }
            }
            None => say("no figure to plot\n"),
        }
    }

    let figs = report.runs.iter().flat_map(|r| &r.figures);
    let count = |s: Status| figs.clone().filter(|f| f.status == s).count();
    let (ok, failed, skipped) = (
        count(Status::Ok),
        count(Status::Failed),
        count(Status::Skipped),
    );
    let broken = report.runs.iter().filter(|r| r.error.is_some()).count();
    say(&format!(
        "{ok} figures, {failed} failed, {skipped} skipped{}\n",
        if broken > 0 {
            format!(", {broken} adapter(s) could not be opened")
        } else {
            String::new()
        }
    ));
    if failed > 0 || broken > 0 {
        return Err(Stop::Failed(format!(
            "{failed} figure(s) failed their check or errored, {broken} adapter(s) could not \
             be opened (see FAILED above)"
        )));
    }
    Ok(())
}

fn run_adapter(
    adapter: &wgpu::Adapter,
    args: &RunArgs,
    threads: usize,
    model_dir: &Path,
) -> AdapterRun {
    let start = Instant::now();
    let identity = adapters::identity(adapter);
    let has_timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
    let mut run = AdapterRun {
        adapter: identity.clone(),
        limits: adapters::limits(&adapter.limits()),
        features: adapters::feature_names(adapter.features()),
        timing_note: format!(
            "timers: wgarray figures, dispatch chains, allocations, CPU sgemm and MiniLM: host \
             wall clock around the call and the wait (wgarray exposes no GPU timestamps); raw \
             wgpu copy: {}",
            if has_timestamps {
                "GPU timestamps (TIMESTAMP_QUERY), host time kept beside"
            } else {
                "host wall clock (no TIMESTAMP_QUERY)"
            }
        ),
        error: None,
        seconds: 0.0,
        figures: Vec::new(),
    };
    let device = match wgarray::Device::from_adapter(adapter) {
        Ok(d) => d,
        Err(e) => {
            run.error = Some(format!("could not open the adapter: {e}"));
            return run;
        }
    };
    // No timing beside the GEMM warm-up's compiles (an earlier process's
    // tuning file may list some).
    device.wait_warm_up();
    let ctx = cases::Ctx {
        device,
        suite: args.suite,
        protocol: args.suite.protocol(),
        cpu_threads: threads,
        model_dir: model_dir.to_path_buf(),
        corrupt: args.corrupt,
    };
    let all: Vec<cases::Case> = cases::all(&ctx)
        .into_iter()
        .filter(|c| args.only.is_empty() || args.only.contains(&c.group))
        .collect();
    let bar = ProgressBar::new(all.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(identity.label());
    for (i, case) in all.into_iter().enumerate() {
        bar.set_message(case.label.clone());
        if bar.is_hidden() {
            eprintln!(
                "[{}/{}] {}: {}",
                i + 1,
                bar.length().unwrap_or(0),
                identity.label(),
                case.label
            );
        }
        let figs = (case.run)(&ctx);
        for f in &figs {
            if f.status == Status::Failed {
                bar.println(format!(
                    "FAILED {} / {} / {}: {}",
                    report::group_name(f.group),
                    f.row,
                    f.column,
                    f.message.as_deref().unwrap_or("")
                ));
            }
        }
        run.figures.extend(figs);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let lost = ctx.device.take_uncaptured_errors();
    if !lost.is_empty() {
        run.error = Some(format!(
            "wgpu reported errors outside any check: {}",
            lost.join("; ")
        ));
    }
    run.seconds = start.elapsed().as_secs_f64();
    run
}

fn compare(args: CompareArgs) -> Result<(), Stop> {
    if let Some(p) = &args.plot {
        for f in plot::outputs(p) {
            writable(&f)?;
        }
    }
    let reports: Vec<(String, Report)> = args
        .files
        .iter()
        .map(|p| {
            Ok((
                p.display().to_string(),
                Report::load(p).map_err(Stop::Input)?,
            ))
        })
        .collect::<Result<_, Stop>>()?;
    let mut cols = Vec::new();
    for (file, r) in &reports {
        for run in r.runs.iter().filter(|run| run.error.is_none()) {
            let i = cols.len();
            let tag = if i < 26 {
                ((b'A' + i as u8) as char).to_string()
            } else {
                format!("R{i}")
            };
            cols.push(table::Column {
                tag,
                file: file.clone(),
                report: r,
                run,
                reference: None,
            });
        }
    }
    if cols.len() < 2 {
        return Err(Stop::Input(format!(
            "compare needs at least two adapter runs; {} hold {}",
            args.files
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            cols.len()
        )));
    }
    let refs = summary::references(&cols.iter().map(|c| &c.run.adapter).collect::<Vec<_>>());
    for (c, r) in cols.iter_mut().zip(refs) {
        c.reference = r;
    }
    let cmp = table::Comparison::new(&cols, args.flag_ratio);
    out(&table::compare_table(&cols, &cmp));
    if let Some(p) = &args.plot {
        for f in plot::compare(&cols, &cmp, p).map_err(Stop::Input)? {
            out(&format!("wrote {}\n", f.display()));
        }
    }
    Ok(())
}
