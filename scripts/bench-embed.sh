#!/usr/bin/env bash
# Sentences per second of examples/embed.rs on Vulkan (lavapipe) and GL
# (llvmpipe), beside sentence-transformers on this machine's CPU, in one run,
# on the same sentences: the demo set (8 short sentences) and the fixture's
# ten (4 to 256 tokens). For docs/PERFORMANCE.md; not run in CI (the CPU
# reference needs torch: see scripts/reference-embeddings.sh).
#
#   bash scripts/bench-embed.sh [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
repeat="${1:-2}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
model="$(bash scripts/fetch-model.sh)"
export WGARRAY_MODEL_DIR="$model"
cargo build --release --example embed
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/demo.txt" <<'TXT'
A man is eating food.
A man is eating a piece of bread.
The girl is carrying a baby.
A man is riding a horse.
A woman is playing violin.
Two men pushed carts through the woods.
A monkey is playing drums.
Someone in a gorilla costume is playing a set of drums.
TXT
bash scripts/reference-embeddings.sh sentences > "$tmp/fixture.txt"
exe="${CARGO_TARGET_DIR:-target}/release/examples/embed"
echo "date: $(date -u +%F), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for set in demo fixture; do
  echo "== $set ($(wc -l < "$tmp/$set.txt") sentences) =="
  echo -n "sentence-transformers, CPU: "
  bash scripts/reference-embeddings.sh bench "$tmp/$set.txt" "$repeat"
  for backend in vulkan gl; do
    echo -n "wgarray $backend: "
    WGARRAY_BACKEND=$backend "$exe" --json --file "$tmp/$set.txt" --repeat "$((repeat + 1))" |
      python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({k: d[k] for k in ("adapter", "run_seconds", "sentences_per_second_after_first_run")}))'
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
