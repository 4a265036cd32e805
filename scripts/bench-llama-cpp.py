"""llama.cpp's CPU speed on SmolLM2-135M-Instruct Q4_1, the peer for wgarray's
generate example (prefill tokens/s and greedy decode tokens/s), as JSON.

Not run in CI. Needs llama-cpp-python (built from PyPI, as a user without a
GPU would run it) and numpy: `bash scripts/llm-reference.sh bench` sets up
the environment, fetches the model and runs this file.

  python scripts/bench-llama-cpp.py MODEL.gguf [--threads 2] [--tokens 64]
      [--repeat 3] [--prompt TEXT | --raw-prompt TEXT] [--no-extra-bufts]

The prompt is one user message under the GGUF's chat template (which adds
its default system prompt), tokenized by llama.cpp without BOS (the GGUF
asks for none). Prefill: the whole prompt in one llama_decode, timed
`repeat` times after a warm-up, median. Decode: `tokens` greedy steps (one
llama_decode of one token, then argmax over the logits; the end-of-turn token
does not stop it), each timed; tokens/s is 1 / the median step over all
repeats. On a machine shared with other work, llama.cpp's threads spin at
barriers waiting for each other, so a step whose thread was descheduled
costs a time slice: read the 1-minute load average printed beside the
figures, and compare --threads 1 and 2. llama.cpp's defaults otherwise: f16 KV cache, CPU weight repacking
on (`--no-extra-bufts` turns it off: an earlier llama-cpp-python 0.3.x
crashed with it on this model).
"""

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np
import llama_cpp
from jinja2.sandbox import ImmutableSandboxedEnvironment

DEFAULT_PROMPT = "Write a short story about a robot who learns to paint."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prompt", default=DEFAULT_PROMPT,
                    help="user message, rendered with the chat template")
    ap.add_argument("--raw-prompt", default=None, help="prompt used as is (no template)")
    ap.add_argument("--no-extra-bufts", action="store_true",
                    help="turn off llama.cpp's weight repacking for its CPU kernels")
    ap.add_argument("--n-ctx", type=int, default=2048)
    a = ap.parse_args()

    # Llama() has no argument for it: set it in the model parameters it starts from.
    default_params = llama_cpp.llama_cpp.llama_model_default_params

    def model_params():
        p = default_params()
        p.use_extra_bufts = not a.no_extra_bufts
        return p

    llama_cpp.llama_cpp.llama_model_default_params = model_params
    t0 = time.perf_counter()
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=a.n_ctx, n_batch=a.n_ctx,
                          n_ubatch=a.n_ctx, n_threads=a.threads,
                          n_threads_batch=a.threads, logits_all=False,
                          verbose=False)
    load_s = time.perf_counter() - t0

    if a.raw_prompt is not None:
        text = a.raw_prompt
    else:
        template = llm.metadata["tokenizer.chat_template"]
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        text = env.from_string(template).render(
            messages=[{"role": "user", "content": a.prompt}], add_generation_prompt=True)
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def last_logits():
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1),
                                     shape=(llm.n_vocab(),))

    def prefill():
        llm.reset()  # the next eval drops the cache past position 0
        t = time.perf_counter()
        llm.eval(tokens)
        return time.perf_counter() - t

    load_before = os.getloadavg()
    prefill()  # warm-up
    prefill_s = [prefill() for _ in range(a.repeat)]

    steps_s, texts = [], []
    for _ in range(a.repeat):
        prefill()
        nxt = int(np.argmax(last_logits()))
        out = [nxt]
        for _ in range(a.tokens):
            t = time.perf_counter()
            llm.eval([nxt])
            nxt = int(np.argmax(last_logits()))
            steps_s.append(time.perf_counter() - t)
            out.append(nxt)
        texts.append(out)

    pre = statistics.median(prefill_s)
    step = statistics.median(steps_s)
    print(json.dumps({
        "engine": "llama.cpp (llama-cpp-python %s), CPU" % llama_cpp.__version__,
        "model": os.path.basename(a.model),
        "threads": a.threads,
        "extra_bufts": bool(llm.model_params.use_extra_bufts),
        "kv_cache": "f16 (default)",
        "load_seconds": round(load_s, 3),
        "prompt_tokens": len(tokens),
        "prefill_seconds": [round(x, 5) for x in prefill_s],
        "prefill_tokens_per_second": round(len(tokens) / pre, 1),
        "decode_tokens": a.tokens,
        "decode_repeat": a.repeat,
        "decode_step_seconds_median": round(step, 6),
        "decode_step_seconds_p10_p90": [round(float(np.percentile(steps_s, 10)), 6),
                                        round(float(np.percentile(steps_s, 90)), 6)],
        "decode_tokens_per_second": round(1 / step, 1),
        "decode_tokens_per_second_mean": round(len(steps_s) / sum(steps_s), 1),
        "greedy_runs_identical": all(t == texts[0] for t in texts),
        "greedy_text": llm.detokenize(texts[0]).decode("utf-8", "replace"),
        "loadavg_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
