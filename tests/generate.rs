//! The generation example's model (examples/llm/):
//!
//! - a tiny model of SmolLM2's architecture with random weights, written as
//!   a GGUF file by the test: the decode step compiled once per bucket, the
//!   KV cache written in place (the same buffers after every one of 500
//!   steps, active memory exactly flat), the compiled and eager steps
//!   agreeing, and dropping the model and the compiled step giving every
//!   byte, array and pipeline back, three loads in a row;
//! - the real SmolLM2-135M-Instruct Q4_1 file (fetched through
//!   `scripts/fetch-llm.sh`) against the independent float64 NumPy
//!   reference in `tests/fixtures/smollm2_reference.json` (see
//!   docs/LLM_REFERENCE.md): the token ids, the logits of the prefill's
//!   last position and of 16 greedy steps within 1e-2, and the greedy text
//!   (the template, tokens and text of all 7 prompts; the logits of 5 on
//!   Vulkan, and of 4 for 4 steps on GL, for CI's time).

#[path = "../examples/llm/mod.rs"]
mod llm;

#[path = "../examples/llm/chat.rs"]
mod chat;

mod common;

use std::collections::HashSet;

use llm::testing::{TINY, write_tiny};
use llm::{Decoder, Model};
use wgarray::{Array, Device};

/// The ids of the buffers on loan of exactly `bytes` bytes.
fn buffers_of(device: &Device, bytes: u64) -> HashSet<u64> {
    device
        .memory_snapshot()
        .buffers
        .iter()
        .filter(|b| !b.cached && b.bytes == bytes)
        .map(|b| b.id)
        .collect()
}

/// The tiny llama model written into a fresh temporary folder (which the
/// returned guard keeps), and a device whose warm-up has ended.
fn tiny_llama() -> (tempfile::TempDir, std::path::PathBuf, Device) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_tiny(dir.path(), "tiny.gguf", "llama", None);
    let device = common::device();
    device.wait_warm_up();
    (dir, path, device)
}

fn rendered(model: &Model, text: &str) -> Vec<u32> {
    let r = chat::render_chat(
        model.chat_template.as_deref().expect("a template"),
        text,
        "<|im_start|>",
        "<|im_end|>",
    )
    .unwrap();
    model.tokenizer.encode(&r).unwrap()
}

#[test]
fn tiny_model_decodes_in_place_and_gives_every_byte_back() {
    let (_dir, path, device) = tiny_llama();
    let pipelines_before = device.live_pipelines();
    // 600 positions: a K or V array of 5 pool pages (no weight has that
    // size), so the buffers holding the cache can be told apart.
    let (capacity, steps) = (600usize, 500usize);
    assert!(capacity <= TINY.context);
    let mut after_drop = Vec::new();
    let mut first_run: Option<Vec<u32>> = None;
    for cycle in 0..3 {
        device.reset_peak_memory();
        let model = Model::load(&path, &device).unwrap();
        let weights = device.active_memory();
        assert!(weights >= model.weight_bytes() as u64);
        let prompt = rendered(&model, "Count: 1, 2, 3");
        // 17 control tokens; <|im_start|> is one token, digits one each.
        assert_eq!(prompt[0], 1, "<|im_start|> is one token");
        let steps_here = if cycle == 0 { steps } else { 40 };
        // A cache shorter than the prompt plus the steps: positions wrap by
        // starting new sequences, as the example's prompts do.
        let mut cache = model.new_cache(capacity).unwrap();
        let cache_bytes = device.active_memory() - weights;
        let layer_bytes = cache_bytes / (2 * TINY.layers as u64);
        // Each K and V array whole pool pages (16 KiB), nothing else.
        let pages: u64 = cache
            .arrays()
            .iter()
            .map(|a| (a.nbytes() as u64).next_multiple_of(16384))
            .sum();
        assert_eq!(cache_bytes, pages);
        let compiled = Decoder::new(&model, true);
        let eager = Decoder::new(&model, false);
        let mut ids = Vec::new();
        cache.reset();
        let (_, next) = model.prefill(&mut cache, &prompt).unwrap();
        let mut token = next.item::<u32>().unwrap();
        drop(next);
        let cache_buffers = buffers_of(&device, layer_bytes);
        assert_eq!(
            cache_buffers.len(),
            2 * TINY.layers,
            "one buffer per K and V"
        );
        let mut flat = None;
        for s in 0..steps_here {
            if cache.len == capacity {
                cache.reset();
            }
            ids.push(token);
            let (logits, next) = compiled.step(&model, &mut cache, token).unwrap();
            token = next.item::<u32>().unwrap();
            drop((logits, next));
            let active = device.active_memory();
            // After the first step (whose trace keeps nothing on the device
            // but pipelines), active memory is the model and the cache.
            assert_eq!(
                active,
                weights + cache_bytes,
                "cycle {cycle} step {s}: active memory"
            );
            flat.get_or_insert(active);
            assert_eq!(
                buffers_of(&device, layer_bytes),
                cache_buffers,
                "cycle {cycle} step {s}: the cache moved to other buffers (a copy)"
            );
        }
        assert_eq!(
            compiled.traces(),
            1,
            "one trace: the filled length is an input"
        );
        // The eager step agrees with the compiled one, from the same cache.
        let mut c1 = model.new_cache(capacity).unwrap();
        let mut c2 = model.new_cache(capacity).unwrap();
        let _ = model.prefill(&mut c1, &prompt).unwrap();
        let _ = model.prefill(&mut c2, &prompt).unwrap();
        let a = compiled
            .step(&model, &mut c1, ids[0])
            .unwrap()
            .0
            .to_vec::<f32>()
            .unwrap();
        let b = eager
            .step(&model, &mut c2, ids[0])
            .unwrap()
            .0
            .to_vec::<f32>()
            .unwrap();
        let diff = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(diff <= 1e-4, "compiled and eager steps differ by {diff}");
        drop((c1, c2));
        match &first_run {
            None => first_run = Some(ids.clone()),
            Some(f) => assert_eq!(&ids[..], &f[..ids.len()], "cycle {cycle}: the same tokens"),
        }
        let peak = device.peak_memory();
        let bound = weights + cache_bytes + model.peak_margin(prompt.len(), capacity) as u64
            // the two caches of the comparison above
            + 2 * cache_bytes;
        assert!(
            peak <= bound,
            "cycle {cycle}: peak {peak} over the bound {bound}"
        );
        drop((compiled, eager, cache, model));
        assert_eq!(device.active_memory(), 0, "cycle {cycle}: active memory");
        assert_eq!(device.live_arrays(), 0, "cycle {cycle}: live arrays");
        assert_eq!(device.live_nodes(), 0, "cycle {cycle}: live nodes");
        after_drop.push(device.live_pipelines());
    }
    // The compiled step's pipelines go with it: every load ends with the
    // same pipelines alive (those the eager prefill left in the device's
    // cache), never more.
    assert!(
        after_drop.iter().all(|&p| p == after_drop[0]),
        "{after_drop:?}"
    );
    assert!(after_drop[0] >= pipelines_before);
}

#[test]
fn dropping_the_compiled_step_releases_its_pipelines() {
    let (_dir, path, device) = tiny_llama();
    let model = Model::load(&path, &device).unwrap();
    let mut cache = model.new_cache(64).unwrap();
    let before = device.live_pipelines();
    let step = Decoder::new(&model, true);
    step.step(&model, &mut cache, 5).unwrap();
    let with = device.live_pipelines();
    assert!(with > before, "the step compiled pipelines of its own");
    drop(step);
    assert_eq!(
        device.live_pipelines(),
        before,
        "dropping the step released them"
    );
    drop((cache, model));
    assert_eq!(device.active_memory(), 0);
    assert_eq!(device.live_arrays(), 0);
}

#[test]
fn a_file_of_another_architecture_or_missing_a_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let device = common::device();
    let other = write_tiny(dir.path(), "gemma.gguf", "gemma", None);
    let e = Model::load(&other, &device).err().expect("gemma refused");
    assert!(format!("{e}").contains("architecture is gemma"), "{e}");
    let missing = write_tiny(
        dir.path(),
        "hole.gguf",
        "llama",
        Some("blk.1.ffn_up.weight"),
    );
    let e = Model::load(&missing, &device)
        .err()
        .expect("a missing tensor refused");
    assert!(format!("{e}").contains("blk.1.ffn_up.weight"), "{e}");
    assert_eq!(device.active_memory(), 0, "nothing kept on the error paths");
    assert_eq!(device.live_arrays(), 0);
}

// ---------------------------------------------------------------------------
// The real model against the reference.

struct Step {
    greedy: u32,
    top: Vec<(u32, f32)>,
    logits: Vec<f32>,
}

struct Prompt {
    mode: String,
    text: String,
    rendered: String,
    tokens: Vec<u32>,
    greedy_tokens: Vec<u32>,
    greedy_text: String,
    steps: Vec<Step>,
}

fn fixture() -> (Vec<u32>, f32, Vec<Prompt>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/smollm2_reference.json"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let ids = |x: &serde_json::Value| -> Vec<u32> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as u32)
            .collect()
    };
    let tol = v["tolerance"]["recommended_max_abs_logit_diff"]
        .as_f64()
        .unwrap() as f32;
    let prompts = v["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| Prompt {
            mode: p["mode"].as_str().unwrap().into(),
            text: p["text"].as_str().unwrap().into(),
            rendered: p["rendered"].as_str().unwrap().into(),
            tokens: ids(&p["tokens"]),
            greedy_tokens: ids(&p["greedy_tokens"]),
            greedy_text: p["greedy_text"].as_str().unwrap().into(),
            steps: p["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| Step {
                    greedy: s["greedy"].as_u64().unwrap() as u32,
                    top: s["top"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| (t[0].as_u64().unwrap() as u32, t[1].as_f64().unwrap() as f32))
                        .collect(),
                    logits: s["logits"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_f64().unwrap() as f32)
                        .collect(),
                })
                .collect(),
        })
        .collect();
    (ids(&v["logit_ids"]), tol, prompts)
}

/// The largest difference from the reference at the step's recorded
/// logits (top 20 and the 64 fixed ids).
fn worst(got: &[f32], want: &Step, logit_ids: &[u32]) -> f32 {
    let mut d = 0.0f32;
    for &(id, l) in &want.top {
        d = d.max((got[id as usize] - l).abs());
    }
    for (&id, &l) in logit_ids.iter().zip(&want.logits) {
        d = d.max((got[id as usize] - l).abs());
    }
    d
}

#[test]
fn smollm2_matches_the_reference() {
    let path = llm::fetched_model();
    let (logit_ids, tol, prompts) = fixture();
    assert_eq!(prompts.len(), 7);
    let device = common::device();
    let gl = device.backend() == wgarray::wgpu::Backend::Gl;
    let model = Model::load(&path, &device).unwrap();
    assert_eq!(model.config.layers, 30);
    assert_eq!((model.config.heads, model.config.kv_heads), (9, 3));
    let decoder = Decoder::new(&model, true);
    let mut cache = model.new_cache(512).unwrap();
    // Every prompt's chat template, tokens and greedy text (host work);
    // the forward pass on a subset, sized for CI's budget (the suite runs
    // on Vulkan twice, and on GL): on Vulkan five prompts, all 16 steps
    // (the chat ones with digits and with non-ASCII text, the raw ones
    // with digits and with non-ASCII text, the 232-token one); on GL
    // (llvmpipe, slower) a chat prompt, the raw one with digits, the
    // non-ASCII raw one and the 232-token one, 4 steps each.
    let (chosen, steps): (Vec<usize>, usize) = if gl {
        (vec![0, 1, 4, 6], 4)
    } else {
        (vec![1, 2, 3, 4, 6], 16)
    };
    for (i, p) in prompts.iter().enumerate() {
        // Tokens: the chat template rendered as the reference's, then the
        // tokenizer built from the GGUF's metadata.
        let rendered = match p.mode.as_str() {
            "chat" => chat::render_chat(
                model.chat_template.as_deref().unwrap(),
                &p.text,
                "<|im_start|>",
                "<|im_end|>",
            )
            .unwrap(),
            _ => p.text.clone(),
        };
        assert_eq!(rendered, p.rendered, "prompt {i}: the chat template");
        let ids = model.tokenizer.encode(&rendered).unwrap();
        assert_eq!(ids, p.tokens, "prompt {i}: tokens");
        assert_eq!(
            model.tokenizer.decode(&p.greedy_tokens).unwrap(),
            p.greedy_text,
            "prompt {i}: detokenized greedy text"
        );
        if !chosen.contains(&i) {
            continue;
        }
        cache.reset();
        let (logits, next) = model.prefill(&mut cache, &ids).unwrap();
        let mut errors = Vec::new();
        let mut check = |s: usize, logits: &Array, next: &Array| {
            let got = logits.to_vec::<f32>().unwrap();
            let want = &p.steps[s];
            let e = worst(&got, want, &logit_ids);
            errors.push(e);
            assert!(
                e <= tol,
                "prompt {i} step {s}: logits {e} from the reference (tolerance {tol})"
            );
            assert_eq!(
                next.item::<u32>().unwrap(),
                want.greedy,
                "prompt {i} step {s}: greedy token"
            );
        };
        check(0, &logits, &next);
        for s in 1..=steps {
            let (logits, next) = decoder
                .step(&model, &mut cache, p.greedy_tokens[s - 1])
                .unwrap();
            check(s, &logits, &next);
        }
        println!(
            "prompt {i} ({} {} tokens): max logit error {:.2e} over {} positions",
            p.mode,
            ids.len(),
            errors.iter().fold(0.0f32, |a, &b| a.max(b)),
            errors.len()
        );
    }
    drop((decoder, cache, model));
    assert_eq!(device.active_memory(), 0);
    assert_eq!(device.live_arrays(), 0);
}
