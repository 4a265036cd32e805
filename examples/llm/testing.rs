//! For tests: a GGUF writer (version 3, the subset a llama file uses) and a
//! tiny llama model of SmolLM2's architecture with random weights, written
//! as a GGUF file: Q4_1 layer matrices, a Q8_0 tied embedding, f32 norms,
//! 3 query heads per KV head, a byte-level vocabulary with SmolLM2's
//! control tokens, SmolLM2's chat template.

use std::path::Path;

use half::f16;

/// A metadata value to write.
pub enum Meta {
    U32(u32),
    F32(f32),
    Bool(bool),
    Str(String),
    Strs(Vec<String>),
    I32s(Vec<i32>),
}

/// One tensor to write: name, wgarray shape (`ne` reversed), ggml type id
/// and its bytes.
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub ggml_type: u32,
    pub data: Vec<u8>,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// The bytes of a GGUF v3 file holding `meta` and `tensors` (alignment 32).
pub fn gguf_bytes(meta: &[(&str, Meta)], tensors: &[Tensor]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(b"GGUF");
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((meta.len() as u64).to_le_bytes());
    for (key, v) in meta {
        put_str(&mut out, key);
        match v {
            Meta::U32(x) => {
                out.extend(4u32.to_le_bytes());
                out.extend(x.to_le_bytes());
            }
            Meta::F32(x) => {
                out.extend(6u32.to_le_bytes());
                out.extend(x.to_le_bytes());
            }
            Meta::Bool(x) => {
                out.extend(7u32.to_le_bytes());
                out.push(*x as u8);
            }
            Meta::Str(s) => {
                out.extend(8u32.to_le_bytes());
                put_str(&mut out, s);
            }
            Meta::Strs(v) => {
                out.extend(9u32.to_le_bytes());
                out.extend(8u32.to_le_bytes());
                out.extend((v.len() as u64).to_le_bytes());
                for s in v {
                    put_str(&mut out, s);
                }
            }
            Meta::I32s(v) => {
                out.extend(9u32.to_le_bytes());
                out.extend(5u32.to_le_bytes());
                out.extend((v.len() as u64).to_le_bytes());
                for x in v {
                    out.extend(x.to_le_bytes());
                }
            }
        }
    }
    let mut offset = 0u64;
    for t in tensors {
        put_str(&mut out, &t.name);
        out.extend((t.shape.len() as u32).to_le_bytes());
        for &d in t.shape.iter().rev() {
            out.extend((d as u64).to_le_bytes());
        }
        out.extend(t.ggml_type.to_le_bytes());
        out.extend(offset.to_le_bytes());
        offset += (t.data.len() as u64).next_multiple_of(32);
    }
    while !out.len().is_multiple_of(32) {
        out.push(0);
    }
    for t in tensors {
        out.extend(&t.data);
        while !out.len().is_multiple_of(32) {
            out.push(0);
        }
    }
    out
}

/// A small deterministic generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `[-1, 1)`.
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// `rows x cols` random Q4_1 blocks (20 bytes per 32: f16 scale, f16
/// minimum, 16 bytes of nibbles) with values about `±amp`.
pub fn q4_1(rng: &mut Rng, rows: usize, cols: usize, amp: f32) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows * cols / 32 * 20);
    for _ in 0..rows * cols / 32 {
        let d = amp / 8.0 * (0.5 + 0.5 * rng.uniform().abs());
        out.extend(f16::from_f32(d).to_le_bytes());
        out.extend(f16::from_f32(-amp + 0.1 * amp * rng.uniform()).to_le_bytes());
        for _ in 0..16 {
            out.push(rng.next_u64() as u8);
        }
    }
    out
}

/// `rows x cols` random Q8_0 blocks (34 bytes per 32: f16 scale, 32 i8).
pub fn q8_0(rng: &mut Rng, rows: usize, cols: usize, amp: f32) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows * cols / 32 * 34);
    for _ in 0..rows * cols / 32 {
        out.extend(f16::from_f32(amp / 127.0).to_le_bytes());
        for _ in 0..32 {
            out.push(rng.next_u64() as u8);
        }
    }
    out
}

/// `n` f32 values near 1 (a norm's weight).
pub fn norm(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| (1.0 + 0.2 * rng.uniform()).to_le_bytes())
        .collect()
}

/// SmolLM2's chat template (`tokenizer.chat_template` of the Q4_1 file).
pub const CHAT_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// The shape of the tiny model.
pub struct Tiny {
    pub layers: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub context: usize,
}

/// SmolLM2's architecture at a size CI runs in a moment: 2 layers, hidden
/// 96, 6 query heads over 2 KV heads of 16, feed-forward 64, context 1024.
pub const TINY: Tiny = Tiny {
    layers: 2,
    hidden: 96,
    ffn: 64,
    heads: 6,
    kv_heads: 2,
    context: 1024,
};

/// The vocabulary: SmolLM2's 17 control tokens, then GPT-2's 256 byte
/// characters (so that every text tokenizes), then 15 merged tokens.
pub fn vocabulary() -> (Vec<String>, Vec<String>, Vec<i32>) {
    let specials = [
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<repo_name>",
        "<reponame>",
        "<file_sep>",
        "<filename>",
        "<gh_stars>",
        "<issue_start>",
        "<issue_comment>",
        "<issue_closed>",
        "<jupyter_start>",
        "<jupyter_text>",
        "<jupyter_code>",
        "<jupyter_output>",
        "<jupyter_script>",
        "<empty_output>",
    ];
    let mut tokens: Vec<String> = specials.iter().map(|s| s.to_string()).collect();
    let mut types = vec![3; tokens.len()];
    // GPT-2's bytes_to_unicode.
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    let mut pairs: Vec<(u32, u32)> = bs.into_iter().zip(cs).collect();
    pairs.sort();
    for (_, c) in pairs {
        tokens.push(char::from_u32(c).expect("a char").to_string());
        types.push(1);
    }
    let merges: Vec<String> = [
        "Ġ t", "Ġ a", "h e", "i n", "r e", "o n", "Ġt he", "e r", "Ġ s", "a t", "Ġ w", "Ġ o",
        "e n", "Ġ c", "i t",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for m in &merges {
        tokens.push(m.replace(' ', ""));
        types.push(1);
    }
    (tokens, merges, types)
}

/// The tiny model's GGUF bytes, with weights from `seed`. `arch` replaces
/// `llama` (to test the refusal) and `leave_out` drops the tensor of that
/// name.
pub fn tiny_gguf(seed: u64, arch: &str, leave_out: Option<&str>) -> Vec<u8> {
    let t = &TINY;
    let mut rng = Rng::new(seed);
    let (tokens, merges, types) = vocabulary();
    let vocab = tokens.len();
    let hd = t.hidden / t.heads;
    let (q_dim, kv_dim) = (t.hidden, t.kv_heads * hd);
    let meta = vec![
        ("general.architecture", Meta::Str(arch.into())),
        ("general.name", Meta::Str("tiny random llama".into())),
        ("llama.block_count", Meta::U32(t.layers as u32)),
        ("llama.context_length", Meta::U32(t.context as u32)),
        ("llama.embedding_length", Meta::U32(t.hidden as u32)),
        ("llama.feed_forward_length", Meta::U32(t.ffn as u32)),
        ("llama.attention.head_count", Meta::U32(t.heads as u32)),
        (
            "llama.attention.head_count_kv",
            Meta::U32(t.kv_heads as u32),
        ),
        ("llama.rope.freq_base", Meta::F32(100000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Meta::F32(1e-5)),
        ("llama.rope.dimension_count", Meta::U32(hd as u32)),
        ("tokenizer.ggml.model", Meta::Str("gpt2".into())),
        ("tokenizer.ggml.pre", Meta::Str("smollm".into())),
        ("tokenizer.ggml.tokens", Meta::Strs(tokens)),
        ("tokenizer.ggml.token_type", Meta::I32s(types)),
        ("tokenizer.ggml.merges", Meta::Strs(merges)),
        ("tokenizer.ggml.bos_token_id", Meta::U32(1)),
        ("tokenizer.ggml.eos_token_id", Meta::U32(2)),
        ("tokenizer.ggml.add_bos_token", Meta::Bool(false)),
        ("tokenizer.chat_template", Meta::Str(CHAT_TEMPLATE.into())),
    ];
    let mut tensors = vec![
        Tensor {
            name: "token_embd.weight".into(),
            shape: vec![vocab, t.hidden],
            ggml_type: 8,
            data: q8_0(&mut rng, vocab, t.hidden, 1.0),
        },
        Tensor {
            name: "output_norm.weight".into(),
            shape: vec![t.hidden],
            ggml_type: 0,
            data: norm(&mut rng, t.hidden),
        },
    ];
    for l in 0..t.layers {
        let mut m = |name: &str, rows: usize, cols: usize| Tensor {
            name: format!("blk.{l}.{name}.weight"),
            shape: vec![rows, cols],
            ggml_type: 3,
            data: q4_1(&mut rng, rows, cols, 1.0 / (cols as f32).sqrt() * 2.0),
        };
        let mut layer = vec![
            m("attn_q", q_dim, t.hidden),
            m("attn_k", kv_dim, t.hidden),
            m("attn_v", kv_dim, t.hidden),
            m("attn_output", t.hidden, q_dim),
            m("ffn_gate", t.ffn, t.hidden),
            m("ffn_up", t.ffn, t.hidden),
            m("ffn_down", t.hidden, t.ffn),
        ];
        for name in ["attn_norm", "ffn_norm"] {
            layer.push(Tensor {
                name: format!("blk.{l}.{name}.weight"),
                shape: vec![t.hidden],
                ggml_type: 0,
                data: norm(&mut rng, t.hidden),
            });
        }
        tensors.extend(layer);
    }
    if let Some(name) = leave_out {
        tensors.retain(|t| t.name != name);
    }
    let meta: Vec<(&str, Meta)> = meta.into_iter().collect();
    gguf_bytes(&meta, &tensors)
}

/// Write the tiny model into `dir` as `name`; its path.
pub fn write_tiny(
    dir: &Path,
    name: &str,
    arch: &str,
    leave_out: Option<&str>,
) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, tiny_gguf(7, arch, leave_out)).expect("write the tiny GGUF");
    path
}
