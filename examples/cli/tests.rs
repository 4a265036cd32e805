//! The example's command line as a user meets it: every mistake is refused
//! in words (clap's message naming the flag, or the example's report with
//! its causes and what to do next), never as a Debug dump, and the normal
//! and `--json` outputs keep the shape tests and scripts parse.
//!
//! `scripts/test.sh` runs these with `cargo test --examples` once per
//! backend; the tests that open a device take it from `WGARRAY_BACKEND`, and
//! fail (never skip) without one.

use super::*;

use std::path::Path;

use clap::error::ErrorKind;
use wgarray::wgpu::Backend;

/// `embed ARGS...`, parsed.
fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
    parse_args(std::iter::once("embed").chain(argv.iter().copied()))
}

/// clap's refusal of `argv`: its kind and its message, which must name `flag`
/// and end in clap's usage line; the exit status is 2.
fn refused(argv: &[&str], flag: &str) -> (ErrorKind, String) {
    let e = parse(argv).expect_err("clap refuses this command line");
    let msg = e.render().to_string();
    assert_eq!(e.exit_code(), 2, "{msg}");
    assert!(msg.starts_with("error: "), "{msg}");
    assert!(msg.contains(flag), "names {flag}: {msg}");
    assert!(msg.contains("--help"), "{msg}");
    (e.kind(), msg)
}

/// The report of running `embed ARGS...` with `options` (from the
/// environment unless a test picks the backend), which must fail before
/// writing a result. No Debug form of an error may show.
fn failure(argv: &[&str], options: wgarray::Result<DeviceOptions>) -> String {
    let args = parse(argv).expect("the flags themselves are fine");
    let mut out = Vec::new();
    let f = run(&args, options, &mut out).expect_err("this run fails");
    let report = f.report();
    println!("{report}");
    assert!(report.starts_with("error: "), "{report}");
    assert!(report.ends_with('\n'), "{report}");
    assert!(!f.is_broken_pipe());
    for debug in ["NoAdapter {", "Error {", "kind: ", "Os {", "\"/"] {
        assert!(
            !report.contains(debug),
            "Debug form {debug:?} in:\n{report}"
        );
    }
    let out = String::from_utf8(out).unwrap();
    assert!(!out.contains("cosine"), "no results after a failure: {out}");
    report
}

fn from_env() -> wgarray::Result<DeviceOptions> {
    DeviceOptions::from_env()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn unknown_flag_is_refused_by_name() {
    let (kind, _) = refused(&["--frobnicate"], "--frobnicate");
    assert_eq!(kind, ErrorKind::UnknownArgument);
    // A near miss gets clap's suggestion.
    let (kind, msg) = refused(&["--batchsize", "4"], "--batchsize");
    assert_eq!(kind, ErrorKind::UnknownArgument);
    assert!(msg.contains("--batch-size"), "{msg}");
}

#[test]
fn batch_size_must_be_at_least_one() {
    for bad in ["0", "-1", "two", ""] {
        let (kind, msg) = refused(&["--batch-size", bad], "--batch-size");
        assert_eq!(kind, ErrorKind::ValueValidation, "{msg}");
    }
    let (_, msg) = refused(&["--batch-size", "0"], "--batch-size");
    assert!(msg.contains("1 or more"), "{msg}");
    for good in [1, 7, 33] {
        let s = good.to_string();
        assert_eq!(parse(&["--batch-size", &s]).unwrap().batch_size, good);
    }
    assert_eq!(parse(&[]).unwrap().batch_size, 32);
}

#[test]
fn repeat_must_be_at_least_one() {
    for bad in ["0", "-3", "1.5"] {
        let (kind, msg) = refused(&["--repeat", bad], "--repeat");
        assert_eq!(kind, ErrorKind::ValueValidation, "{msg}");
    }
    assert_eq!(parse(&["--repeat", "7"]).unwrap().repeat, 7);
    assert_eq!(parse(&[]).unwrap().repeat, 1);
}

#[test]
fn reload_every_is_zero_or_below_repeat() {
    // 0 means never; below --repeat reloads between runs.
    for ok in [
        &["--reload-every", "0"][..],
        &["--repeat", "3", "--reload-every", "2"],
        &["--repeat", "2", "--reload-every", "1"],
    ] {
        parse(ok).unwrap_or_else(|e| panic!("{ok:?}: {}", e.render()));
    }
    // At or above --repeat it would never reload.
    for bad in [
        &["--reload-every", "1"][..],
        &["--repeat", "4", "--reload-every", "4"],
        &["--repeat", "2", "--reload-every", "33"],
    ] {
        let (kind, msg) = refused(bad, "--reload-every");
        assert_eq!(kind, ErrorKind::ArgumentConflict, "{msg}");
        assert!(msg.contains("--repeat"), "{msg}");
    }
    let (kind, _) = refused(&["--reload-every", "-1"], "--reload-every");
    assert_eq!(kind, ErrorKind::ValueValidation);
}

#[test]
fn missing_file_says_which_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-file.txt");
    let report = failure(&["--file", path(&missing)], from_env());
    let os = std::fs::read(&missing).unwrap_err().to_string();
    assert!(
        report.starts_with(&format!(
            "error: cannot read --file {}\n",
            missing.display()
        )),
        "{report}"
    );
    assert!(report.contains(&format!("caused by: {os}")), "{report}");
    assert!(report.contains("tip: "), "{report}");
}

#[test]
fn non_utf8_file_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("latin1.txt");
    // "café" in Latin-1 on line 3, after a blank line.
    std::fs::write(&file, b"A man is eating food.\n\nun caf\xe9 noir\n").unwrap();
    let report = failure(&["--file", path(&file)], from_env());
    assert!(report.contains("line 3 is not UTF-8"), "{report}");
    assert!(report.contains("column 7"), "{report}");
    assert!(report.contains(path(&file)), "{report}");
    assert!(report.contains("caused by: invalid utf-8"), "{report}");
    assert!(report.contains("iconv"), "{report}");
}

#[test]
fn file_without_sentences_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [("empty.txt", &b""[..]), ("blank.txt", b"\n   \n\t\r\n\n")] {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        // Even with sentences on the command line: the file was asked for.
        let report = failure(
            &["--file", path(&file), "A man is eating food."],
            from_env(),
        );
        assert!(report.contains("has no sentences"), "{report}");
        assert!(report.contains(name), "{report}");
    }
}

#[test]
fn file_lines_are_read_as_before() {
    // Non-blank lines, `\n` or `\r\n`, a last line without a newline.
    let got = cli::lines(b"one\r\n\n two \n  \nthree", "t").unwrap();
    assert_eq!(got, ["one", " two ", "three"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.txt");
    std::fs::write(&file, "é à\nsecond\n").unwrap();
    let got = cli::read_sentences(&["first".into()], Some(&file), crate::minilm::DEMO).unwrap();
    assert_eq!(got, ["first", "é à", "second"]);
}

#[test]
fn missing_model_dir_says_to_fetch_it() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no-model-here");
    let report = failure(&["--model-dir", path(&nowhere), "x"], from_env());
    assert!(
        report.contains(&format!("no model folder at {}", nowhere.display())),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "bash scripts/fetch-model.sh {}",
            nowhere.display()
        )),
        "{report}"
    );

    // A folder with part of the files names the missing ones.
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    let report = failure(&["--model-dir", path(dir.path()), "x"], from_env());
    assert!(
        report.contains("lacks tokenizer.json, model.safetensors"),
        "{report}"
    );
    assert!(report.contains("fetch-model.sh"), "{report}");
}

/// A model folder whose files are there but damaged; the device is opened
/// (from the environment) before loading fails.
#[test]
fn corrupt_model_dir_says_to_fetch_it_again() {
    let real = minilm::fetched_model_dir();
    let copy = |dst: &Path, name: &str| {
        std::fs::copy(real.join(name), dst.join(name)).unwrap();
    };
    let weights = std::fs::read(real.join("model.safetensors")).unwrap();

    // Not JSON at all.
    let garbage = tempfile::tempdir().unwrap();
    for f in cli::MODEL_FILES {
        std::fs::write(garbage.path().join(f), "not a model\n").unwrap();
    }
    // The real configuration and tokenizer, the weights cut short.
    let truncated = tempfile::tempdir().unwrap();
    for f in ["config.json", "sentence_bert_config.json", "tokenizer.json"] {
        copy(truncated.path(), f);
    }
    std::fs::write(
        truncated.path().join("model.safetensors"),
        &weights[..weights.len() / 3],
    )
    .unwrap();
    // Everything real but the tokenizer.
    let tokenizer = tempfile::tempdir().unwrap();
    for f in ["config.json", "model.safetensors"] {
        copy(tokenizer.path(), f);
    }
    std::fs::write(tokenizer.path().join("tokenizer.json"), "{\"model\": 3}").unwrap();

    for (dir, culprit) in [
        (&garbage, "parsing"),
        (&truncated, "model.safetensors"),
        (&tokenizer, "tokenizer.json"),
    ] {
        let d = dir.path();
        let report = failure(&["--model-dir", path(d), "x"], from_env());
        assert!(
            report.starts_with(&format!(
                "error: cannot load the model from {}\n",
                d.display()
            )),
            "{report}"
        );
        assert!(report.contains("caused by: "), "{report}");
        assert!(report.contains(culprit), "{culprit}: {report}");
        assert!(
            report.contains(&format!("bash scripts/fetch-model.sh {}", d.display())),
            "{report}"
        );
    }
}

/// A backend with no adapter on this machine (Metal on Linux): the report
/// gives the library's message and lists every adapter the machine has, of
/// every backend, with backend and type.
#[test]
fn unavailable_backend_lists_every_adapter() {
    let all = Device::enumerate();
    assert!(!all.is_empty(), "this test needs an adapter and found none");
    let absent = [Backend::Metal, Backend::Dx12, Backend::Vulkan, Backend::Gl]
        .into_iter()
        .find(|b| all.iter().all(|a| a.backend != *b))
        .expect("some backend has no adapter here");
    let model = minilm::fetched_model_dir();
    let report = failure(
        &["--model-dir", path(&model), "x"],
        Ok(DeviceOptions::default().with_backend(absent)),
    );
    assert!(
        report.starts_with("error: cannot open a GPU device\n"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "caused by: no GPU adapter matched backend {absent}"
        )),
        "{report}"
    );
    assert_lists_every_adapter(&report, &all);
}

#[test]
fn unknown_backend_lists_every_adapter() {
    let all = Device::enumerate();
    assert!(!all.is_empty(), "this test needs an adapter and found none");
    let model = minilm::fetched_model_dir();
    let report = failure(
        &["--model-dir", path(&model), "x"],
        wgarray::parse_backend("cuda").map(|b| DeviceOptions::default().with_backend(b)),
    );
    assert!(report.contains("unknown backend \"cuda\""), "{report}");
    assert_lists_every_adapter(&report, &all);
}

fn assert_lists_every_adapter(report: &str, all: &[wgarray::AdapterDescription]) {
    assert!(report.contains("adapters on this machine:\n"), "{report}");
    for a in all {
        let line = format!("    - {} ({}, {:?})\n", a.name, a.backend, a.device_type);
        assert!(report.contains(&line), "{line:?} missing from:\n{report}");
        assert!(
            report.contains(&format!("WGARRAY_BACKEND={}", a.backend)),
            "{report}"
        );
    }
}

#[test]
fn failure_report_gives_every_cause_in_words() {
    let inner = std::io::Error::new(std::io::ErrorKind::InvalidData, "the bytes are bad");
    let middle = Failure::new("reading part 2").cause(inner);
    let f = Failure::new("loading")
        .cause(middle)
        .note("a note")
        .tip("do this");
    assert_eq!(f.to_string(), "loading");
    assert_eq!(
        format!("{f:#}"),
        "loading: reading part 2: the bytes are bad"
    );
    assert_eq!(
        f.report(),
        "error: loading\n  caused by: reading part 2\n  caused by: the bytes are bad\n  a note\n  tip: do this\n"
    );
    let pipe = Failure::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
    assert!(pipe.is_broken_pipe());
    assert!(!f.is_broken_pipe());
}

/// The normal output and the JSON keep their shape: lines in this order
/// (tests, docs and scripts/bench-embed.sh read them), and the JSON's keys.
#[test]
fn normal_and_json_output_keep_their_shape() {
    let model = minilm::fetched_model_dir();
    let text = [
        "A man is eating food.",
        "Two men pushed carts through the woods.",
    ];
    let run_with = |extra: &[&str]| -> String {
        let mut argv = vec!["--model-dir", path(&model)];
        argv.extend_from_slice(extra);
        argv.extend_from_slice(&text);
        let args = parse(&argv).unwrap();
        let mut out = Vec::new();
        if let Err(f) = run(&args, from_env(), &mut out) {
            panic!("{}", f.report());
        }
        String::from_utf8(out).unwrap()
    };

    let out = run_with(&["--repeat", "2", "--reload-every", "1", "--show", "3"]);
    let lines: Vec<&str> = out.lines().collect();
    let mem = |label: &str| format!("memory {label:<22} active ");
    let want = [
        "device: ",
        "model:  ",
        &mem("before loading"),
        "loaded in ",
        &mem("after loading"),
        "run 1: 2 sentences in ",
        "run 2: 2 sentences in ",
        &mem("after the batch"),
        &mem("after dropping model"),
        &mem("after clear_cache"),
        "",
        "[0] A man is eating food.",
        "    [",
        "[1] Two men pushed carts through the woods.",
        "    [",
        "",
        "cosine similarity:",
        "           0      1",
        "   0   1.000 ",
        "   1  ",
        "",
        "throughput: ",
        "active memory after each unload: [0, 0] bytes (all 0)",
        "wgpu allocator report: ",
    ];
    assert_eq!(lines.len(), want.len(), "{out}");
    for (l, w) in lines.iter().zip(want) {
        assert!(l.starts_with(w), "{l:?} should start with {w:?} in:\n{out}");
    }
    assert!(
        lines[5].ends_with("(includes compiling the kernels)"),
        "{out}"
    );
    assert!(lines[12].ends_with(", ...] (384 values)"), "{out}");
    assert!(lines[19].ends_with("  1.000"), "{out}");
    assert_eq!(lines[12].matches(", ").count(), 3, "--show 3: {out}");

    let json: serde_json::Value = serde_json::from_str(&run_with(&["--json"])).unwrap();
    for key in [
        "adapter",
        "backend",
        "model_dir",
        "sentences",
        "embeddings",
        "cosine_similarity",
        "load_seconds",
        "run_seconds",
        "sentences_per_second",
        "sentences_per_second_after_first_run",
        "memory",
    ] {
        assert!(json.get(key).is_some(), "no {key} in {json}");
    }
    let emb = json["embeddings"].as_array().unwrap();
    assert_eq!(emb.len(), 2);
    for e in emb {
        let e: Vec<f64> = e
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(e.len(), 384);
        let norm = e.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit vectors: {norm}");
    }
    assert_eq!(json["run_seconds"].as_array().unwrap().len(), 1);
    assert_eq!(json["memory"]["after_dropping_model"]["active"], 0);
}
