#!/usr/bin/env bash
# Creates (once) the cached virtualenv with PyTorch 2.13.0 that the demo and the
# tests use, outside the repository so every checkout on this machine reuses it.
# Idempotent: a venv that already imports torch 2.13.0 is left alone.
set -euo pipefail
VENV="${TUNELOOP_VENV:-$HOME/.cache/tuneloop/venv}"
TORCH_VERSION="2.13.0"
PY="${PYTHON:-python3}"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import torch, numpy, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
  echo "venv ready: $VENV (torch $TORCH_VERSION)"
  exit 0
fi
echo "creating $VENV with torch==$TORCH_VERSION (about 4.7 GB, a few minutes, once per machine)…"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "torch==$TORCH_VERSION" numpy
"$VENV/bin/python" -c "import torch; print('torch', torch.__version__, 'ready in $VENV')"
