#!/usr/bin/env bash
# Reference embeddings and CPU throughput from sentence-transformers, for the
# fixture tests/embed.rs checks and for docs/PERFORMANCE.md. Not run in CI.
# Makes a throw-away virtual environment (default /tmp/wgarray-st-venv) with
# sentence-transformers and torch from PyPI; nothing is installed system-wide.
#
#   bash scripts/reference-embeddings.sh fixture   # -> tests/fixtures/minilm_reference.json
#   bash scripts/reference-embeddings.sh bench SENTENCES.txt [REPEAT]
#   bash scripts/reference-embeddings.sh sentences # the fixture's sentences, one a line
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${WGARRAY_ST_VENV:-/tmp/wgarray-st-venv}"
if ! "$venv/bin/python" -c "import sentence_transformers" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q sentence-transformers
fi
model="$(bash scripts/fetch-model.sh)"
cmd="${1:-fixture}"
case "$cmd" in
  fixture)
    mkdir -p tests/fixtures
    "$venv/bin/python" scripts/reference_embeddings.py fixture "$model" tests/fixtures/minilm_reference.json ;;
  bench)
    "$venv/bin/python" scripts/reference_embeddings.py bench "$model" "$2" "${3:-3}" ;;
  sentences)
    "$venv/bin/python" scripts/reference_embeddings.py sentences ;;
  *) echo "usage: $0 fixture | bench SENTENCES.txt [REPEAT] | sentences" >&2; exit 2 ;;
esac
