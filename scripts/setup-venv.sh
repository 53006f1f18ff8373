#!/usr/bin/env bash
# Creates (once) the cached virtualenv with PyTorch 2.13.0 that the demo and the
# tests use, outside the repository so every checkout on this machine reuses it.
# It also holds the frameworks the command-mode tests drive (Hugging Face
# transformers + accelerate, PyTorch Lightning), pinned to versions that run
# beside torch 2.13.0 on CPU.
# Idempotent: a venv that already has every pinned package is left alone; one
# that has torch but misses a framework gets only the missing packages.
set -euo pipefail
VENV="${TUNELOOP_VENV:-$HOME/.cache/tuneloop/venv}"
TORCH_VERSION="2.13.0"
FRAMEWORKS=("transformers==5.23.0" "accelerate==1.15.0" "pytorch-lightning==2.6.6")
PY="${PYTHON:-python3}"

has_torch() {
  "$VENV/bin/python" -c "import torch, numpy, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null
}
has_frameworks() {
  "$VENV/bin/python" - <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
want = {"transformers": "5.23.0", "accelerate": "1.15.0", "pytorch-lightning": "2.6.6"}
sys.exit(0 if all(version(k) == v for k, v in want.items()) else 1)
PY
}

if [ -x "$VENV/bin/python" ] && has_torch; then
  if has_frameworks; then
    echo "venv ready: $VENV (torch $TORCH_VERSION, ${FRAMEWORKS[*]})"
    exit 0
  fi
  echo "adding ${FRAMEWORKS[*]} to $VENV…"
  "$VENV/bin/pip" install --quiet "torch==$TORCH_VERSION" "${FRAMEWORKS[@]}"
  exit 0
fi
echo "creating $VENV with torch==$TORCH_VERSION and ${FRAMEWORKS[*]} (about 5 GB, a few minutes, once per machine)…"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "torch==$TORCH_VERSION" numpy "${FRAMEWORKS[@]}"
"$VENV/bin/python" -c "import torch, transformers, lightning_fabric, pytorch_lightning; print('torch', torch.__version__, 'transformers', transformers.__version__, 'lightning', pytorch_lightning.__version__, 'ready in $VENV')"
