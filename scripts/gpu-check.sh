#!/usr/bin/env bash
# The checks a session on a real GPU runs (docs/ARCHITECTURE.md, "Open on a
# real GPU"), in two steps, because the GPU machine has no Rust toolchain
# and no network:
#
#   scripts/gpu-check.sh pack   here: build the test binaries and wgbench
#                               (release), strip them, and pack them with
#                               a zstd binary and the Vulkan/GL loaders
#                               (.deb files) under .gpu/ and .gl/ (both
#                               ignored by git; about 45 MiB in all)
#   scripts/gpu-check.sh run    there, from the repository root, with .gpu
#                               and .gl carried: writes under OUT
#
# `run` does, each step under a time limit: the adapters (`wgbench list`),
# the GEMM kernels at 4096^3 in f32, f16 and bf16 (`wgbench gemm --sweep`:
# every family and a grid of workgroup-memory tiles, beside the tuned
# choice; cooperative matrices where the adapter offers them), M = 1 and
# M = 512 against a 4096 x 4096 weight; then every test binary on Vulkan,
# RUNS times (default 1), 8 binaries at a time with 4 test threads each;
# a run that hangs gets every thread's stack written down (gdb if present,
# else /proc) before it is killed; then `wgbench run --suite quick`, and
# the device tests on the GL adapter. A summary goes to OUT/summary.txt,
# the figures to OUT/*.json, the logs to OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."

pack() {
  export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
  for d in /.gpu/ /.gl/; do
    grep -qxF "$d" .git/info/exclude 2>/dev/null || echo "$d" >>.git/info/exclude
  done
  rm -rf .gpu && mkdir -p .gpu/lib .gl
  cargo build --release --features wgbench --bin wgbench || exit 1
  local bins
  bins=$(cargo test --tests --no-run --message-format=json |
    grep -o '"executable":"[^"]*"' | cut -d'"' -f4) || exit 1
  local stage
  stage=$(mktemp -d)
  # shellcheck disable=SC2086
  cp $bins target/release/wgbench "$stage"/ && strip "$stage"/*
  tar cf - -C "$stage" . | zstd -19 --long=31 -T0 -q -o .gpu/bins.tar.zst -f || exit 1
  rm -rf "$stage"
  cp "$(command -v zstd)" .gpu/
  for lib in $(ldd "$(command -v zstd)" | awk '/=>/ {print $3}' | grep -v libc.so); do
    cp -L "$lib" .gpu/lib/
  done
  local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  mkdir -p /tmp/amd64/partial
  # shellcheck disable=SC2086
  apt-get $o update >/dev/null &&
    (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2) ||
    echo "could not fetch the loaders: the GPU machine must have its own"
  du -sh .gpu .gl
  echo "now, on the GPU machine, with .gpu and .gl carried: bash scripts/gpu-check.sh run"
}

descendants() {
  local p
  for p in $(pgrep -P "$1"); do
    echo "$p"
    descendants "$p"
  done
}

dump_stacks() {
  local p
  for p in $(descendants "$1"); do
    echo "=== pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
    if command -v gdb >/dev/null; then
      gdb -p "$p" -batch -ex "thread apply all bt" 2>/dev/null
    else
      for t in /proc/"$p"/task/*; do
        echo "--- thread ${t##*/} $(cat "$t/comm" 2>/dev/null): wchan $(cat "$t/wchan" 2>/dev/null)"
        cat "$t/stack" 2>/dev/null
      done
    fi
  done
}

# Every test binary of /tmp/b once on Vulkan, under `limit` seconds.
suite() {
  local i=$1 limit=$2 logs=$3/suite-$1
  mkdir -p "$logs"
  local start
  start=$(date +%s)
  # A process group of its own, so that a hang is killed whole.
  setsid bash -c "ls /tmp/b | grep -v '^wgbench\$' | xargs -P 8 -I{} sh -c \
    'WGARRAY_BACKEND=vulkan /tmp/b/{} --test-threads=4 >$logs/{}.log 2>&1 || echo {} failed'" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null && (($(date +%s) - start < limit)); do
    sleep 1
  done
  if kill -0 "$pid" 2>/dev/null; then
    dump_stacks "$pid" >"$logs/stacks.txt" 2>&1
    kill -9 -- -"$pid" 2>/dev/null
    echo "suite run $i: not finished after ${limit}s (hung, or slow); stacks in logs/suite-$i/stacks.txt"
  fi
  wait "$pid" 2>/dev/null
  echo "suite run $i: $(($(date +%s) - start)) s; $(grep -h '^test result' "$logs"/*.log |
    awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
  grep -h -E "^    [a-z_:0-9]+$|panicked at" "$logs"/*.log | sort -u | head -20
}

run() {
  local out="${OUT:-/tmp/gpu-check}" logs=/tmp/gpu-check-logs
  mkdir -p "$out" "$logs"
  exec > >(tee "$out/summary.txt") 2>&1
  local t0
  t0=$(date +%s)
  step() { echo "== [$(($(date +%s) - t0)) s] $*"; }
  if [ -d .gl ]; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  local f=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -f $f ] && export VK_DRIVER_FILES=$f
  f=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  [ -f $f ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$f
  export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" WGARRAY_CACHE_DIR=/tmp/wgarray-cache
  # Tests find their fixtures at the path they were built in.
  local built
  built=$(sed -n 's/^BUILT_IN=//p' .gpu/where 2>/dev/null)
  if [ -n "$built" ] && [ "$built" != "$PWD" ] && [ ! -e "$built" ]; then
    mkdir -p "$(dirname "$built")" && ln -s "$PWD" "$built"
  fi
  mkdir -p /tmp/b
  LD_LIBRARY_PATH=.gpu/lib .gpu/zstd -d --long=31 -c .gpu/bins.tar.zst | tar x -C /tmp/b || exit 1
  command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  local B=/tmp/b/wgbench
  step adapters
  $B list >"$logs/list.txt" 2>&1
  grep -iE "^[^ ]|backend|driver" "$logs/list.txt" | head -20
  step "GEMM kernels, 4096^3"
  # Cooperative matrices are opt-in (src/device.rs): on for the timings
  # and for the GEMM tests below.
  WGARRAY_COOPERATIVE_MATRIX=1 timeout "${SWEEP_S:-150}" $B gemm --backend vulkan --sweep \
    --samples 3 --json "$out/gemm4096.json"
  step "GEMM kernels, 1 x 4096 x 4096 and 512 x 4096 x 4096"
  WGARRAY_COOPERATIVE_MATRIX=1 timeout 30 $B gemm --backend vulkan --shape 1,4096,4096 --dtypes f32,f16 --samples 3 \
    --json "$logs/gemm1.json"
  WGARRAY_COOPERATIVE_MATRIX=1 timeout 40 $B gemm --backend vulkan --shape 512,4096,4096 --samples 3 --json "$logs/gemm512.json"
  for i in $(seq 1 "${RUNS:-1}"); do
    step "test suite on Vulkan, run $i"
    suite "$i" "${LIMIT:-170}" "$logs"
  done
  step "GEMM families and tuning with cooperative matrices on"
  for t in gemm_families gemm_tuning matmul; do
    WGARRAY_COOPERATIVE_MATRIX=1 WGARRAY_BACKEND=vulkan timeout 120 /tmp/b/$t-* --test-threads=4 \
      >"$logs/coop-$t.log" 2>&1
    echo "$t with cooperative matrices: exit $? $(grep -h '^test result' "$logs/coop-$t.log")"
  done
  step "wgbench quick suite"
  timeout "${QUICK_S:-80}" $B run --backend vulkan --suite quick \
    --only matmul,bandwidth,reduction,dispatch,pool --json "$out/quick.json" >"$logs/quick.txt" 2>&1
  echo "exit $?"
  tail -60 "$logs/quick.txt"
  step "the GL adapter"
  WGARRAY_BACKEND=gl timeout 60 /tmp/b/device-* --test-threads=4 >"$logs/gl-device.log" 2>&1
  echo "GL device tests: exit $?"
  grep -E "test result|panicked|refused|lost" "$logs/gl-device.log" | head
  step done
  tar czf "$out/logs.tgz" -C "$(dirname "$logs")" "$(basename "$logs")"
}

case "${1:-}" in
  pack)
    pack
    echo "BUILT_IN=$PWD" >.gpu/where
    ;;
  run) run ;;
  *)
    echo "usage: $0 pack|run" >&2
    exit 2
    ;;
esac
