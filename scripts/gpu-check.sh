#!/usr/bin/env bash
# The checks a session on a real GPU runs (docs/ARCHITECTURE.md, "Open on a
# real GPU"): the test suite RUNS times (default 5) with 16 test threads on
# Vulkan, each run under LIMIT seconds (default 600); if a run hangs, every
# thread's stack of every test process is written down (gdb if present,
# else the kernel's view from /proc) before it is killed. Then the GL
# adapter: what `Device::new` makes of it. Logs and a summary go to OUT
# (default target/gpu-check). Needs the GPU's Vulkan and EGL drivers.
set -uo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
out="${OUT:-target/gpu-check}"
runs="${RUNS:-5}"
limit="${LIMIT:-600}"
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"

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

cargo test --tests --no-run >"$out/build.log" 2>&1 || {
  echo "build failed: $out/build.log" | tee -a "$summary"
  exit 1
}

for i in $(seq 1 "$runs"); do
  log="$out/vulkan-$i.log"
  start=$(date +%s)
  WGARRAY_BACKEND=vulkan cargo test --tests -- --test-threads=16 >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && (($(date +%s) - start < limit)); do
    sleep 2
  done
  if kill -0 "$pid" 2>/dev/null; then
    dump_stacks "$pid" >"$out/vulkan-$i.stacks" 2>&1
    for p in $(descendants "$pid"); do kill -9 "$p" 2>/dev/null; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    echo "run $i: HUNG after ${limit}s; stacks in $out/vulkan-$i.stacks" | tee -a "$summary"
  else
    wait "$pid"
    rc=$?
    secs=$(($(date +%s) - start))
    results=$(grep -E "^test result" "$log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')
    echo "run $i: exit $rc in ${secs}s; $results" | tee -a "$summary"
    grep -E "^    [a-z_:]+$|panicked at" "$log" | sort -u | head -20 >>"$summary"
  fi
done

# log1p/expm1 accuracy on this GPU.
WGARRAY_BACKEND=vulkan cargo test --test numerics -- --nocapture 2>&1 | grep -E " ulp " | tee -a "$summary"

# The GL adapter: listed, then asked for a device (it used to refuse with
# "Parent device is lost"; the error now explains, and Device::new moves on).
WGARRAY_BACKEND=gl timeout 120 cargo run --example quickstart >"$out/gl.log" 2>&1
echo "GL quickstart: exit $? (log in $out/gl.log)" | tee -a "$summary"
grep -iE "refused|lost|adapter" "$out/gl.log" | head -10 | tee -a "$summary"
