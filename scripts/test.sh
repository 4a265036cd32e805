#!/usr/bin/env bash
# Run the whole test suite once per software backend: Vulkan (lavapipe) and
# GL (llvmpipe). A test that needs an adapter fails when none is found.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Mesa's EGL probes Wayland and complains without a runtime dir.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
# Benchmarks are built (so they cannot rot) but not run: their figures come
# from `cargo bench` on a quiet machine (docs/PERFORMANCE.md). Built in the
# test profile with the tests' features, so they link against the library
# the tests build below instead of a release build of their own (3 minutes
# on CI's two cores).
cargo test --all-features --benches --no-run
# --all-features: the optional conversions (feature `ndarray`) are tested,
# and the benchmark CLI (feature `wgbench`, src/bin/wgbench) is built and
# tests/wgbench.rs runs its smoke suite on each backend and parses its JSON.
# One feature set for both commands, so the library is compiled once.
# tests/distributed.rs (feature `mpi`) is not run by `--tests`: it runs
# under mpirun, with 2 and then 3 ranks on localhost (the binary starts
# mpirun itself; a few seconds).
for backend in vulkan gl; do
  echo "=== WGARRAY_BACKEND=$backend ==="
  WGARRAY_BACKEND=$backend cargo test --all-features --lib --tests --examples "$@"
  WGARRAY_BACKEND=$backend cargo test --all-features --doc "$@"
  WGARRAY_BACKEND=$backend cargo test --all-features --test distributed
done
