//! The `wgbench` binary, run as a user runs it: the smoke suite on the
//! adapters `WGARRAY_BACKEND` selects (both Mesa adapters when unset), its
//! JSON parsed back with the tool's own types, its plots and `compare`; a
//! wrong result reported as a failure and never as a number; bad input
//! refused with a clear message and exit status 2.
//!
//! Needs the `wgbench` feature (scripts/test.sh passes it).

#[allow(dead_code)]
#[path = "../src/bin/wgbench/report.rs"]
mod report;
#[allow(dead_code)]
#[path = "../src/bin/wgbench/summary.rs"]
mod summary;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use report::{Group, Report, Status, Timer};

fn wgbench(args: &[&str]) -> Output {
    // Tuning files of this test process alone: a file left in the user's
    // cache by another build must not decide what these tests see.
    let cache = std::env::temp_dir().join(format!("wgbench-test-{}-cache", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_wgbench"))
        .args(args)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .env(wgarray::tuning::CACHE_DIR_ENV, cache)
        .output()
        .expect("wgbench runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh folder for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgbench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn smoke_suite_checks_every_figure_and_its_json_parses_back() {
    let dir = scratch("smoke");
    let json = dir.join("smoke.json");
    let out = wgbench(&[
        "run",
        "--suite",
        "smoke",
        "--json",
        path(&json),
        "--plot",
        path(&dir.join("smoke.png")),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "wgbench run failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("matmul (GFLOP/s"), "{stdout}");

    let r = Report::load(&json).unwrap();
    assert_eq!(r.format, report::FORMAT);
    assert_eq!(r.format_version, report::FORMAT_VERSION);
    assert_eq!(r.wgarray_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(r.suite, "smoke");
    assert!(
        r.date.starts_with("20") && r.date.ends_with('Z'),
        "{}",
        r.date
    );
    assert!(!r.runs.is_empty());
    let wanted = std::env::var("WGARRAY_BACKEND").unwrap_or_default();
    for run in &r.runs {
        let a = &run.adapter;
        assert!(run.error.is_none(), "{}: {:?}", a.label(), run.error);
        if !wanted.is_empty() {
            assert!(
                a.backend.eq_ignore_ascii_case(&wanted),
                "{} with WGARRAY_BACKEND={wanted}",
                a.label()
            );
        }
        assert!(run.limits.max_storage_buffer_binding_size >= 128 << 20);
        let f16 = run.features.iter().any(|f| f == "SHADER_F16");
        let timestamps = run.features.iter().any(|f| f == "TIMESTAMP_QUERY");
        for g in Group::ALL {
            let n = run.figures.iter().filter(|f| f.group == g).count();
            assert_eq!(
                n > 0,
                g != Group::Minilm && g != Group::Llm,
                "{}: {n} {g:?} figures",
                a.label()
            );
        }
        for f in &run.figures {
            let what = format!("{}: {}", a.label(), f.key());
            assert!(!f.unit.is_empty(), "{what}");
            let skip_ok = f.column == "f16" && !f16;
            if skip_ok {
                assert_eq!(f.status, Status::Skipped, "{what}");
                assert!(f.message.as_deref().unwrap().contains("SHADER_F16"));
                assert!(f.value.is_none(), "{what}");
                continue;
            }
            assert_eq!(f.status, Status::Ok, "{what}: {:?}", f.message);
            let v = f.value.unwrap();
            assert!(v.is_finite() && v > 0.0, "{what}: {v}");
            let t = f.time.as_ref().unwrap();
            assert!(t.samples >= 3 && t.min_s <= t.median_s && t.median_s <= t.max_s);
            // The figure is the work over the median time, in its unit.
            let again = match f.work.unwrap() {
                report::Work::Flop(x) | report::Work::Bytes(x) => x / t.median_s / 1e9,
                report::Work::Ops(x) => t.median_s / x * 1e6,
                report::Work::Allocations(x)
                | report::Work::Sentences(x)
                | report::Work::Tokens(x) => x / t.median_s,
            };
            assert!((again - v).abs() <= 1e-9 * v, "{what}: {v} vs {again}");
            let c = f.check.as_ref().unwrap();
            assert!(c.compared > 0 && c.max_err_over_tolerance <= 1.0, "{what}");
            let gpu_timed = f.group == Group::Bandwidth && f.column == "raw wgpu" && timestamps;
            let timer = if gpu_timed {
                Timer::GpuTimestamps
            } else {
                Timer::Host
            };
            assert_eq!(f.timer, Some(timer), "{what}");
            assert_eq!(f.host_time.is_some(), gpu_timed, "{what}");
        }
        // Every matmul shape of the suite, in every dtype and on the CPU.
        for row in ["64x64x64", "256x256x256", "1x384x384", "128x384x384"] {
            for col in ["f32", "f16", "bf16", "CPU sgemm"] {
                assert!(
                    run.figures
                        .iter()
                        .any(|f| f.group == Group::Matmul && f.row == row && f.column == col),
                    "{}: no matmul {row} {col}",
                    a.label()
                );
            }
        }
    }

    let png = std::fs::read(dir.join("smoke.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);
    let svg = std::fs::read_to_string(dir.join("smoke.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("GFLOP/s"));

    // A run compared with itself: the first adapter's second column has
    // ratio 1 for each of its figures.
    let cmp = dir.join("cmp");
    let out = wgbench(&["compare", path(&json), path(&json), "--plot", path(&cmp)]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let ok = r.runs[0]
        .figures
        .iter()
        .filter(|f| f.status == Status::Ok)
        .count();
    assert!(stdout.matches("(x1.00)").count() >= ok, "{stdout}");
    assert!(dir.join("cmp.png").exists() && dir.join("cmp.svg").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wrong_result_is_a_failure_without_a_number() {
    let dir = scratch("corrupt");
    let json = dir.join("bad.json");
    let out = wgbench(&[
        "run",
        "--suite",
        "smoke",
        "--only",
        "reduction,dispatch",
        "--corrupt",
        "reduction",
        "--json",
        path(&json),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("FAILED"), "{stdout}");
    let r = Report::load(&json).unwrap();
    for run in &r.runs {
        let groups: Vec<Group> = run.figures.iter().map(|f| f.group).collect();
        assert!(
            groups
                .iter()
                .all(|g| matches!(g, Group::Reduction | Group::Dispatch))
        );
        for f in &run.figures {
            if f.group == Group::Reduction {
                assert_eq!(f.status, Status::Failed, "{}", f.key());
                assert!(f.value.is_none() && f.time.is_none(), "{}", f.key());
                assert!(f.message.as_deref().unwrap().contains("wrong result"));
            } else {
                assert_eq!(f.status, Status::Ok, "{}: {:?}", f.key(), f.message);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn refused(args: &[&str], says: &[&str]) {
    let out = wgbench(args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    for s in says {
        assert!(stderr.contains(s), "{args:?}: {s:?} not in {stderr}");
    }
}

#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let dir = scratch("bad-input");
    // An adapter that is not there: the message lists those that are.
    refused(
        &["run", "--adapter", "no-such-adapter-zz"],
        &[
            "no adapter matches",
            "\"no-such-adapter-zz\"",
            "the adapters here are:",
            "(",
        ],
    );
    refused(&["run", "--backend", "cuda"], &["unknown backend \"cuda\""]);
    // Unwritable outputs are refused before anything runs.
    refused(
        &["run", "--json", "/nonexistent-wgbench-dir/x.json"],
        &["cannot write /nonexistent-wgbench-dir/x.json"],
    );
    refused(
        &["run", "--plot", "/nonexistent-wgbench-dir/p"],
        &["cannot write /nonexistent-wgbench-dir/p.svg"],
    );
    // Files that are not this version's results.
    let other = dir.join("other.json");
    std::fs::write(
        &other,
        r#"{"format": "wgbench", "format_version": 999, "wgarray_version": "9.0.0", "runs": []}"#,
    )
    .unwrap();
    refused(
        &["compare", path(&other), path(&other)],
        &[
            "format version 999",
            "wgarray 9.0.0",
            "reads format version 1",
        ],
    );
    let foreign = dir.join("foreign.json");
    std::fs::write(&foreign, r#"{"results": []}"#).unwrap();
    refused(
        &["compare", path(&foreign), path(&foreign)],
        &["is not a wgbench result"],
    );
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "GFLOP/s: 12").unwrap();
    refused(&["compare", path(&garbage)], &["is not JSON"]);
    refused(
        &["compare", path(&dir.join("missing.json"))],
        &["cannot read", "missing.json"],
    );
    // One run is nothing to compare with.
    let one = dir.join("one.json");
    std::fs::write(
        &one,
        serde_json::json!({
            "format": "wgbench", "format_version": 1, "wgarray_version": "0.1.0",
            "git_commit": null, "date": "2026-11-30T00:00:00Z", "suite": "smoke",
            "command": [], "host": {"os": "linux", "arch": "x86_64", "cpu": null,
            "logical_cpus": 2, "cpu_sgemm_threads": 2, "load_average_start": null,
            "load_average_end": null}, "runs": []
        })
        .to_string(),
    )
    .unwrap();
    refused(&["compare", path(&one)], &["at least two adapter runs"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `wgbench gemm`: the tuning's candidates and the kernels named, each
/// checked then timed, in the table and the JSON; a kernel the adapter
/// cannot run (48 KiB of workgroup memory; Mesa allows 32) is named and
/// not timed; bad input exits 2.
#[test]
fn gemm_times_each_kernel_after_checking_it() {
    let dir = scratch("gemm");
    let json = dir.join("gemm.json");
    let out = wgbench(&[
        "gemm",
        "--shape",
        "33,7,65",
        "--dtypes",
        "f32,f16",
        "--kernel",
        "register 8 8 4 1",
        "--kernel",
        "shared 16 16 8 4 16",
        "--samples",
        "1",
        "--json",
        path(&json),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("shared 16 16 8 4 16 not timed: this device cannot run it"),
        "{stdout}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let runs = doc["runs"].as_array().unwrap();
    assert!(!runs.is_empty(), "{doc}");
    for run in runs {
        let f32_run = &run["dtypes"][0];
        assert_eq!(f32_run["dtype"], "f32");
        let kernels = f32_run["kernels"].as_array().unwrap();
        let named = kernels
            .iter()
            .find(|k| k["kernel"] == "register 8 8 4 1")
            .unwrap_or_else(|| panic!("{f32_run}"));
        assert!(named["gflops"].as_f64().unwrap() > 0.0, "{named}");
        // The tuned choice is among those timed.
        let tuned = f32_run["tuned"].as_str().unwrap();
        assert!(kernels.iter().any(|k| k["kernel"] == tuned), "{f32_run}");
        assert!(kernels.iter().all(|k| k["error"].is_null()), "{f32_run}");
    }
    // x @ W^T: its own class at M = 1, every kernel checked against f64.
    let out = wgbench(&[
        "gemm",
        "--shape",
        "1,33,65",
        "--dtypes",
        "f32",
        "--b-layout",
        "transposed",
        "--samples",
        "1",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("class gemvt"), "{stdout}");
    refused(&["gemm", "--shape", "1,2"], &["three sizes"]);
    refused(
        &["gemm", "--kernel", "tiles 1"],
        &["--kernel \"tiles 1\"", "not a GEMM kernel"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn minilm_without_the_model_is_skipped_with_how_to_fetch_it() {
    let dir = scratch("minilm");
    let json = dir.join("minilm.json");
    let missing = dir.join("no-model-here");
    let out = wgbench(&[
        "run",
        "--suite",
        "quick",
        "--only",
        "minilm",
        "--model-dir",
        path(&missing),
        "--json",
        path(&json),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r = Report::load(&json).unwrap();
    for run in &r.runs {
        assert_eq!(run.figures.len(), 1);
        let f = &run.figures[0];
        assert_eq!((f.group, f.status), (Group::Minilm, Status::Skipped));
        let msg = f.message.as_deref().unwrap();
        assert!(msg.contains("bash scripts/fetch-model.sh") && msg.contains(path(&missing)));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 37: `wgbench list` tells adapters of one name apart by backend,
/// shows no blank where wgpu's GL backend reports no driver, and, when
/// XDG_RUNTIME_DIR is unset and a GL adapter is listed, says that Mesa's
/// "XDG_RUNTIME_DIR is invalid or not set" lines are Mesa's.
#[test]
fn list_names_each_adapter_once_and_explains_mesas_warning() {
    for unset in [true, false] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wgbench"));
        cmd.arg("list");
        if unset {
            cmd.env_remove("XDG_RUNTIME_DIR");
        } else {
            cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
        }
        let out = cmd.output().expect("wgbench runs");
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
        let headings: Vec<&str> = stdout.lines().filter(|l| l.starts_with('[')).collect();
        assert!(!headings.is_empty(), "{stdout}");
        let names: Vec<&str> = headings
            .iter()
            .map(|h| h.split_once("] ").expect("[i] name").1)
            .collect();
        let mut distinct = names.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            names.len(),
            "two adapters read the same:\n{stdout}"
        );
        for l in stdout
            .lines()
            .filter(|l| l.trim_start().starts_with("driver"))
        {
            let value = l.trim_start()["driver".len()..].trim_start();
            assert!(!value.starts_with(' ') && !value.is_empty(), "{l:?}");
            assert!(!l.ends_with("driver       "), "{l:?}");
        }
        let gl = stdout.contains("backend      Gl");
        assert_eq!(
            stdout.contains("come from Mesa's EGL"),
            unset && gl,
            "unset {unset}, GL {gl}:\n{stdout}"
        );
    }
}

/// An adapter run of synthetic figures: (group, row, column, value); a
/// `None` value is a figure skipped for `skip_why`.
fn synthetic_run(
    name: &str,
    backend: &str,
    figs: &[(Group, &str, &str, Option<f64>)],
    skip_why: &str,
) -> report::AdapterRun {
    report::AdapterRun {
        adapter: report::AdapterIdentity {
            name: name.into(),
            backend: backend.into(),
            device_type: "Cpu".into(),
            vendor: 0,
            device: 0,
            driver: "synthetic".into(),
            driver_info: String::new(),
        },
        limits: report::Limits {
            max_storage_buffer_binding_size: 128 << 20,
            max_buffer_size: 1 << 30,
            max_compute_workgroup_size: [256, 256, 64],
            max_compute_invocations_per_workgroup: 256,
            max_compute_workgroup_storage_size: 32768,
            max_compute_workgroups_per_dimension: 65535,
            max_storage_buffers_per_shader_stage: 8,
        },
        features: Vec::new(),
        timing_note: String::new(),
        error: None,
        seconds: 1.0,
        figures: figs
            .iter()
            .map(|&(group, row, column, value)| {
                let lower = group == Group::Dispatch;
                report::Figure {
                    group,
                    row: row.into(),
                    column: column.into(),
                    status: if value.is_some() {
                        Status::Ok
                    } else {
                        Status::Skipped
                    },
                    message: value.is_none().then(|| skip_why.to_string()),
                    value,
                    unit: if lower { "us/op" } else { "GB/s" }.into(),
                    higher_is_better: !lower,
                    work: None,
                    timer: None,
                    time: None,
                    host_time: None,
                    check: None,
                }
            })
            .collect(),
    }
}

fn synthetic_report(runs: Vec<report::AdapterRun>) -> Report {
    Report {
        format: report::FORMAT.into(),
        format_version: report::FORMAT_VERSION,
        wgarray_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: None,
        date: "2026-12-03T00:00:00Z".into(),
        suite: "smoke".into(),
        command: Vec::new(),
        host: report::Host {
            os: "linux".into(),
            arch: "x86_64".into(),
            cpu: None,
            logical_cpus: 2,
            cpu_sgemm_threads: 2,
            load_average_start: None,
            load_average_end: None,
        },
        runs,
    }
}

fn write_report(path: &Path, r: &Report) {
    std::fs::write(path, serde_json::to_string(r).unwrap()).unwrap();
}

/// The rule itself: a ratio far from the median of the others is flagged,
/// in either direction; one inside the others' own spread is not; a
/// column with too few others flags nothing; the threshold applies.
#[test]
fn the_flagging_rule_finds_what_moved_against_the_rest() {
    let tight = [1.0, 1.04, 0.97, 1.02, 0.95, 1.06, 0.99];
    let with = |extra: f64| {
        let mut v: Vec<Option<f64>> = tight.iter().map(|&r| Some(0.8 * r)).collect();
        v.insert(3, Some(extra));
        v.push(None);
        v
    };
    // 0.04: 20x worse than the rest's 0.8; 3.0: 3.75x better.
    for (extra, worse) in [(0.04, true), (3.0, false)] {
        let flags = summary::flag(&with(extra), summary::FLAG_RATIO);
        assert_eq!(flags.len(), 1, "{extra}: {flags:?}");
        let f = &flags[0];
        assert_eq!(f.index, 3);
        assert!((f.ratio - extra).abs() < 1e-12);
        assert!((f.median - 0.8).abs() < 0.05, "{f:?}");
        assert_eq!(f.against_rest < 1.0, worse);
    }
    // 1.3x the median: not beyond the default 1.5, beyond 1.2.
    assert_eq!(summary::flag(&with(0.8 * 1.3), summary::FLAG_RATIO), vec![]);
    assert_eq!(summary::flag(&with(0.8 * 1.3), 1.2).len(), 1);
    // A column whose figures scatter by 2x either way: 2.2x is within
    // three deviations of the rest, so not flagged; 20x is.
    let wide = [0.5, 2.0, 0.6, 1.7, 1.0, 0.45, 2.1, 1.2];
    let mut v: Vec<Option<f64>> = wide.iter().copied().map(Some).collect();
    v.push(Some(2.2));
    assert_eq!(summary::flag(&v, summary::FLAG_RATIO), vec![]);
    v.push(Some(20.0));
    let flags = summary::flag(&v, summary::FLAG_RATIO);
    assert_eq!(
        flags.iter().map(|f| f.index).collect::<Vec<_>>(),
        vec![9],
        "{flags:?}"
    );
    // Three figures: each has two others, too few to be "the rest".
    assert_eq!(
        summary::flag(&[Some(1.0), Some(1.0), Some(0.01)], 1.5),
        vec![]
    );
}

/// Columns of the same adapter are compared with that adapter's first
/// column; an adapter with one column, with the first column.
#[test]
fn compare_takes_ratios_between_runs_of_the_same_adapter() {
    let id = |name: &str, backend: &str| synthetic_run(name, backend, &[], "").adapter;
    let (vk, gl, other) = (
        id("llvmpipe", "Vulkan"),
        id("llvmpipe", "Gl"),
        id("gpu", "Vulkan"),
    );
    assert_eq!(
        summary::references(&[&vk, &gl, &vk, &gl]),
        vec![None, None, Some(0), Some(1)]
    );
    assert_eq!(summary::references(&[&vk, &gl]), vec![None, Some(0)]);
    assert_eq!(
        summary::references(&[&vk, &other, &vk]),
        vec![None, Some(0), Some(0)]
    );
    assert_eq!(
        summary::references(&[&gl, &vk, &other, &vk]),
        vec![None, None, Some(0), Some(1)]
    );
}

/// Failed and skipped figures of one reason make one line with a count.
#[test]
fn identical_skips_collapse_into_one_line_with_a_count() {
    let rows = ["1", "2", "3", "4", "5", "6", "7"];
    let mut figs: Vec<(Group, &str, &str, Option<f64>)> = rows
        .iter()
        .map(|r| (Group::Matmul, *r, "f16", None))
        .collect();
    figs.push((Group::Matmul, "8", "f32", Some(1.0)));
    let run = synthetic_run("a", "Gl", &figs, "needs SHADER_F16");
    let notes = summary::notes(
        run.figures
            .iter()
            .map(|f| (format!("{} / {}", f.row, f.column), f)),
    );
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].cells.len(), 7);
    assert_eq!(
        notes[0].line(),
        "skipped 7 figures (1 / f16, 2 / f16, 3 / f16, ... 7 / f16): needs SHADER_F16"
    );
}

/// `compare` on synthetic runs, as a user runs it: two files of a Vulkan
/// and a GL run each; in the second, everything is a little slower, one
/// Vulkan figure collapsed and one GL figure jumped. Those two, and only
/// those, are flagged against their own backend's first run; figures no
/// run has a value for make one line with a count; the plot has a panel
/// per family and no tick reading 0.00.
#[test]
fn compare_flags_figures_that_moved_and_collapses_skips() {
    let dir = scratch("flags");
    let base: Vec<(Group, &str, &str, f64)> = vec![
        (Group::Bandwidth, "copy", "wgarray", 8.0),
        (Group::Bandwidth, "a + b", "wgarray", 6.0),
        (Group::Bandwidth, "copy", "raw wgpu", 9.0),
        (Group::Reduction, "sum", "wgarray", 3.0),
        (Group::Reduction, "softmax", "wgarray", 2.5),
        (Group::Reduction, "layer_norm", "wgarray", 2.2),
        (Group::Dispatch, "1000 x (x + 1)", "wgarray", 0.5),
        (Group::Dispatch, "1000 x (x + 1)", "unfused", 20.0),
        (Group::Pool, "4 KiB", "pool", 4.0e6),
        (Group::Pool, "4 KiB", "create_buffer", 1.9e6),
    ];
    let skips = [
        (Group::Matmul, "64x64x64", "f16", None),
        (Group::Matmul, "128x128x128", "f16", None),
        (Group::Matmul, "256x256x256", "f16", None),
    ];
    let why = "matmul needs the wgpu feature SHADER_F16";
    let runs = |scale: &dyn Fn(usize, bool) -> f64| {
        ["Vulkan", "Gl"]
            .iter()
            .map(|b| {
                let vk = *b == "Vulkan";
                let mut figs: Vec<(Group, &str, &str, Option<f64>)> = base
                    .iter()
                    .enumerate()
                    .map(|(i, &(g, r, c, v))| (g, r, c, Some(v * scale(i, vk))))
                    .collect();
                figs.extend(skips);
                synthetic_run("llvmpipe", b, &figs, why)
            })
            .collect::<Vec<_>>()
    };
    let before = dir.join("before.json");
    let after = dir.join("after.json");
    write_report(&before, &synthetic_report(runs(&|_, _| 1.0)));
    // 5 % to 15 % slower everywhere (time per op up for dispatch), the
    // Vulkan pool row 25x slower, the GL softmax 3x faster.
    let jitter = [0.9, 0.95, 0.88, 0.92, 0.85, 0.93, 1.1, 1.08, 0.91, 0.94];
    write_report(
        &after,
        &synthetic_report(runs(&|i, vk| match (i, vk) {
            (8, true) => 1.0 / 25.0,
            (4, false) => 3.0,
            _ => jitter[i],
        })),
    );
    let plot = dir.join("cmp");
    let out = wgbench(&[
        "compare",
        path(&before),
        path(&after),
        "--plot",
        path(&plot),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("C (/A)") && stdout.contains("D (/B)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("2 figure(s) moved against the rest"),
        "{stdout}"
    );
    let moved: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("against the rest's median"))
        .collect();
    assert_eq!(moved.len(), 2, "{stdout}");
    assert!(
        moved[0].contains("C / A: pool / 4 KiB / pool: x0.04") && moved[0].contains("worse by"),
        "{moved:?}"
    );
    assert!(
        moved[1].contains("D / B: reduction / softmax / wgarray: x3.00")
            && moved[1].contains("better by"),
        "{moved:?}"
    );
    // The marks in the table: those two cells only.
    assert_eq!(stdout.matches(" !)").count(), 2, "{stdout}");
    // The three matmul f16 figures no run has: one line, with a count.
    let skipped: Vec<&str> = stdout.lines().filter(|l| l.contains(why)).collect();
    assert_eq!(skipped.len(), 1, "{stdout}");
    assert!(
        skipped[0].contains("skipped 3 figures") && skipped[0].contains("(in A, B, C, D)"),
        "{skipped:?}"
    );
    assert!(!stdout.contains("64x64x64 / f16  "), "{stdout}");
    // The plot: a panel per family with ratios, no "0.00" tick, the moved
    // figures marked.
    let svg = std::fs::read_to_string(dir.join("cmp.svg")).unwrap();
    for panel in [
        "elementwise and memory bandwidth",
        "reductions",
        "dispatch: a chain of small ops",
        "buffer pool: allocate and release",
    ] {
        assert!(svg.contains(panel), "no panel {panel:?}");
    }
    assert!(!svg.contains("matmul"), "no matmul ratio to plot");
    assert!(!svg.contains(">0.00<"), "a tick reads 0.00");
    // One "!" in the title's key, one beside each moved figure's bar.
    assert_eq!(svg.matches('!').count(), 3);
    let png = std::fs::read(dir.join("cmp.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    let _ = std::fs::remove_dir_all(&dir);
}
