#!/usr/bin/env bash
# Creates (once) a small virtualenv with the wheel's build tools, pinned:
# maturin (packs the `tuneloop` binary as a Python wheel, `bindings = "bin"`)
# and ziglang (Zig as a PyPI package: maturin links through it against glibc
# 2.17, so the wheel is tagged manylinux_2_17 and installs on any Linux x86_64
# from 2014 on, whatever this machine's glibc). Outside the repository, so every
# checkout on this machine reuses it. Idempotent.
set -euo pipefail
VENV="${TUNELOOP_BUILD_VENV:-$HOME/.cache/tuneloop/build-venv}"
MATURIN_VERSION="1.16.0"
ZIGLANG_VERSION="0.15.2"
PY="${PYTHON:-python3}"

ready() {
  "$VENV/bin/maturin" --version 2>/dev/null | grep -qx "maturin $MATURIN_VERSION" &&
    [ "$("$VENV/bin/python" -m ziglang version 2>/dev/null)" = "$ZIGLANG_VERSION" ]
}

if [ -x "$VENV/bin/python" ] && ready; then
  echo "wheel tools ready: $VENV (maturin $MATURIN_VERSION, zig $ZIGLANG_VERSION)"
  exit 0
fi
echo "installing maturin==$MATURIN_VERSION and ziglang==$ZIGLANG_VERSION into $VENV (about 60 MB, once per machine)…"
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet "maturin==$MATURIN_VERSION" "ziglang==$ZIGLANG_VERSION"
ready
echo "wheel tools ready: $VENV"
