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
