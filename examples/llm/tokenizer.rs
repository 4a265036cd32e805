//! The tokenizer of a GGUF file, built from its metadata with the
//! `tokenizers` crate (no BPE of our own).
//!
//! GGUF's `gpt2` tokenizer model is GPT-2's byte-level BPE: the vocabulary
//! (`tokenizer.ggml.tokens`, byte-level strings, `Ġ` for a space), the
//! merges (`tokenizer.ggml.merges`, `"a b"` pairs, in rank order) and the
//! token types (`tokenizer.ggml.token_type`: 3 is a control token,
//! matched in the text before BPE, as `special=True` does in llama.cpp and
//! Hugging Face's added tokens). The pre-tokenizer follows
//! `tokenizer.ggml.pre`: `smollm` (SmolLM2's `tokenizer.json`) isolates
//! every digit (`Digits(individual_digits=True)`), then GPT-2's byte-level
//! split; `gpt2` and `default` skip the digits step. Others are refused by
//! name.

use std::collections::HashMap;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, PreTokenizerWrapper};
use wgarray::io::GgufFile;

use super::{AnyResult, LoadError};

/// A tokenizer with its special tokens.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Control tokens (type 3), by id.
    special: HashMap<u32, String>,
    /// `tokenizer.ggml.bos_token_id`, `eos_token_id`.
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    /// Tokens that end generation: EOS, `<|endoftext|>`, `<|im_end|>`,
    /// `<|eot_id|>`, `<end_of_turn>`, `<reponame>` where the vocabulary
    /// has them (llama.cpp's end-of-generation set for these names).
    pub end_of_generation: Vec<u32>,
    /// `tokenizer.ggml.add_bos_token` (false for SmolLM2).
    pub add_bos: bool,
}

impl Tokenizer {
    /// Build the tokenizer `file`'s metadata describes.
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer, LoadError> {
        let err = |m: String| LoadError::Tokenizer(m);
        let model = file
            .get("tokenizer.ggml.model")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        if model != "gpt2" {
            return Err(err(format!(
                "tokenizer.ggml.model is {model:?}; this example builds GPT-2 byte-level BPE \
                 tokenizers (\"gpt2\")"
            )));
        }
        let pre = file
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.as_str())
            .unwrap_or("default");
        let digits = match pre {
            "smollm" => true,
            "gpt2" | "default" => false,
            other => {
                return Err(err(format!(
                    "tokenizer.ggml.pre is {other:?}; this example knows \"smollm\", \"gpt2\" \
                     and \"default\""
                )));
            }
        };
        let strings = |key: &str| -> Result<Vec<String>, LoadError> {
            let a = file
                .get(key)
                .and_then(|v| v.as_array())
                .ok_or_else(|| err(format!("the metadata has no array {key}")))?;
            a.iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| err(format!("{key} holds a value that is not a string")))
                })
                .collect()
        };
        let tokens = strings("tokenizer.ggml.tokens")?;
        let merges: Vec<(String, String)> = strings("tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| match m.split_once(' ') {
                Some((a, b)) => Ok((a.to_string(), b.to_string())),
                None => Err(err(format!("tokenizer.ggml.merges: {m:?} is not a pair"))),
            })
            .collect::<Result<_, _>>()?;
        let types: Vec<u64> = match file
            .get("tokenizer.ggml.token_type")
            .and_then(|v| v.as_array())
        {
            Some(a) => a.iter().map(|v| v.as_u64().unwrap_or(1)).collect(),
            None => vec![1; tokens.len()],
        };
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| err(format!("building the BPE model from the metadata: {e}")))?;
        let mut inner = tokenizers::Tokenizer::new(bpe);
        let byte_level = ByteLevel::new(false, true, true);
        let pre: PreTokenizerWrapper = if digits {
            Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
        } else {
            byte_level.into()
        };
        inner.with_pre_tokenizer(Some(pre));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        let mut special = HashMap::new();
        let mut added = Vec::new();
        for (i, (t, &ty)) in tokens.iter().zip(&types).enumerate() {
            if ty == 3 {
                special.insert(i as u32, t.clone());
                added.push(AddedToken::from(t.clone(), true));
            }
        }
        inner.add_special_tokens(&added);
        let id = |key: &str| {
            file.get(key)
                .and_then(|v| v.as_u64())
                .map(|v| v as u32)
                .filter(|&v| (v as usize) < tokens.len())
        };
        let eos = id("tokenizer.ggml.eos_token_id");
        let mut end_of_generation: Vec<u32> = eos.into_iter().collect();
        for name in [
            "<|endoftext|>",
            "<|im_end|>",
            "<|eot_id|>",
            "<end_of_turn>",
            "<reponame>",
        ] {
            if let Some(i) = tokens.iter().position(|t| t == name)
                && !end_of_generation.contains(&(i as u32))
            {
                end_of_generation.push(i as u32);
            }
        }
        Ok(Tokenizer {
            inner,
            special,
            bos: id("tokenizer.ggml.bos_token_id"),
            eos,
            end_of_generation,
            add_bos: file
                .get("tokenizer.ggml.add_bos_token")
                .and_then(|v| v.as_bool())
                .unwrap_or(false),
        })
    }

    /// Token ids of `text`, control tokens matched first (BOS added when
    /// the file asks for it).
    pub fn encode(&self, text: &str) -> AnyResult<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| format!("tokenizer: {e}"))?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if self.add_bos
            && let Some(b) = self.bos
        {
            ids.push(b);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// The text of `ids`, control tokens included as written.
    pub fn decode(&self, ids: &[u32]) -> AnyResult<String> {
        Ok(self
            .inner
            .decode(ids, false)
            .map_err(|e| format!("tokenizer: {e}"))?)
    }

    /// A decoder that turns ids into text as they come, holding back the
    /// bytes of a character split across tokens.
    pub fn stream(&self) -> TextStream<'_> {
        TextStream {
            tokenizer: self,
            ids: Vec::new(),
            shown: 0,
        }
    }

    /// Whether `id` is a control token.
    pub fn is_special(&self, id: u32) -> bool {
        self.special.contains_key(&id)
    }

    /// The vocabulary's size, control tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}

/// Streaming detokenization: each call gives the text that the new id
/// completes (empty while a multi-byte character is still incomplete).
pub struct TextStream<'a> {
    tokenizer: &'a Tokenizer,
    ids: Vec<u32>,
    /// Bytes of the decoded text already given out.
    shown: usize,
}

impl TextStream<'_> {
    /// The text `id` adds.
    pub fn push(&mut self, id: u32) -> AnyResult<String> {
        self.ids.push(id);
        let text = self.tokenizer.decode(&self.ids)?;
        // An incomplete UTF-8 sequence decodes as U+FFFD at the end: wait.
        if text.ends_with('\u{FFFD}') || text.len() < self.shown {
            return Ok(String::new());
        }
        let new = text[self.shown..].to_string();
        self.shown = text.len();
        Ok(new)
    }
}
