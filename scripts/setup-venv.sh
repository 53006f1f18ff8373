#!/usr/bin/env bash
# Creates (once) the cached virtualenv with PyTorch 2.13.0 that the demo and the
# tests use, outside the repository so every checkout on this machine reuses it.
# It also holds the frameworks the command-mode tests drive (Hugging Face
# transformers + accelerate, PyTorch Lightning, and jsonargparse with the
# `signatures` extra that LightningCLI needs), pinned to versions that run
# beside torch 2.13.0 on CPU. jsonargparse 4.48.0: Lightning 2.6.6 asks for
# >=4.39.0 (its `extra`), and 4.49.0 on deprecates calls its LightningCLI makes,
# which would warn in every run. torchvision 0.28.0 is the release built
# against torch 2.13.0 (its wheel requires torch==2.13.0); the GPU check's
# image script (bench/gpu/image_train.py) trains its ResNet-18. The test tools (pytest for tests/python, ruff for
# the Python lint of `make test`) are pinned beside them.
# Idempotent: a venv that already has every pin (and each pin's extras) is left
# alone; one that has torch but misses a pin gets only the missing packages.
set -euo pipefail
VENV="${TUNELOOP_VENV:-$HOME/.cache/tuneloop/venv}"
TORCH_VERSION="2.13.0"
FRAMEWORKS=("transformers==5.23.0" "accelerate==1.15.0" "pytorch-lightning==2.6.6" "jsonargparse[signatures]==4.48.0" "torchvision==0.28.0")
TEST_TOOLS=("pytest==9.2.0" "ruff==0.17.6")
PINS=("${FRAMEWORKS[@]}" "${TEST_TOOLS[@]}")
PY="${PYTHON:-python3}"

has_torch() {
  "$VENV/bin/python" -c "import torch, numpy, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null
}
# Every pin in PINS at its version, and the packages its extras need
# (metadata only, no imports: this is the fast path of every `make test`).
has_frameworks() {
  "$VENV/bin/python" - "${PINS[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import distribution, version
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon

for pin in sys.argv[1:]:
    want = Requirement(pin)
    if version(want.name) not in want.specifier:
        sys.exit(1)
    for extra in want.extras:
        for dep in map(Requirement, distribution(want.name).requires or []):
            if dep.marker and dep.marker.evaluate({"extra": extra}) and canon(dep.name) != canon(want.name):
                version(dep.name)  # raises when the extra's package is missing
PY
}

if [ -x "$VENV/bin/python" ] && has_torch; then
  if has_frameworks; then
    echo "venv ready: $VENV (torch $TORCH_VERSION, ${PINS[*]})"
    exit 0
  fi
  echo "adding ${PINS[*]} to $VENV…"
  "$VENV/bin/pip" install --quiet "torch==$TORCH_VERSION" "${PINS[@]}"
  exit 0
fi
echo "creating $VENV with torch==$TORCH_VERSION and ${PINS[*]} (about 5 GB, a few minutes, once per machine)…"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "torch==$TORCH_VERSION" numpy "${PINS[@]}"
"$VENV/bin/python" -c "import torch, torchvision, transformers, lightning_fabric, pytorch_lightning, jsonargparse; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__, 'lightning', pytorch_lightning.__version__, 'jsonargparse', jsonargparse.__version__, 'ready in $VENV')"
