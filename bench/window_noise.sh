#!/bin/bash
# How a run's noise depends on the timed window's length, per workload:
# `tuneloop bench --aa` (the project against itself, interleaved pairs) at
# TUNELOOP_WINDOW_S 1 and 3, alternated, each workload at the setting tuning
# left it at. Prints one line per call: the sd of ln(ratio) over the pairs and
# the call's seconds (bench/RESULTS.md, "A CPU without bf16").
#
#   bench/window_noise.sh [rounds] [pairs] [workloads…]   # default: 2 rounds, 6 pairs, all
#
# Workloads: io_latency, demo, worker_startup, heavy_collate, compute_bound.
# About 12 minutes for all at the defaults on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${TUNELOOP_BIN:-$here/target/release/tuneloop}
export TUNELOOP_PYTHON=${TUNELOOP_PYTHON:-$HOME/.cache/tuneloop/venv/bin/python}
rounds=${1:-2}
pairs=${2:-6}
shift 2 || shift $# || true
workloads=${*:-io_latency demo worker_startup heavy_collate compute_bound}
[ -x "$bin" ] || { echo "build it first: cargo build --release" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A fresh copy of a workload with the loader line tuning settled on.
setup() {
  local name=$1 d=$work/$1
  case $name in
    demo)
      cp -r "$here/examples/slow_loader" "$d"
      printf '[project]\nroot = "."\neditable = ["train.py"]\n[bench]\nentry = "train:build"\nsteps = 40\nwarmup_steps = 5\ntimeout_s = 300\n' >"$d/tuneloop.toml"
      ;;
    *) cp -r "$here/bench/workloads/$name" "$d" ;;
  esac
  local add=""
  case $name in
    io_latency) add="        num_workers=12,\n" ;;
    demo) add="        num_workers=22,\n        persistent_workers=True,\n" ;;
    worker_startup) add="        num_workers=12,\n        persistent_workers=True,\n" ;;
    heavy_collate) add="        num_workers=2,\n" ;;
    compute_bound) sed -i 's/torch.set_num_threads(1)/torch.set_num_threads(2)/' "$d/train.py" ;;
    *) echo "unknown workload: $name" >&2; exit 2 ;;
  esac
  if [ -n "$add" ]; then
    python3 - "$d/train.py" "$add" <<'PY'
import sys
path, add = sys.argv[1], sys.argv[2].replace("\\n", "\n")
src = open(path).read()
assert "        shuffle=True,\n" in src, path
open(path, "w").write(src.replace("        shuffle=True,\n", "        shuffle=True,\n" + add, 1))
PY
  fi
  (cd "$d" && git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm setup)
}

for w in $workloads; do setup "$w"; done
for w in $workloads; do
  for r in $(seq "$rounds"); do
    for win in 1 3; do
      s=$(date +%s)
      out=$(cd "$work/$w" && TUNELOOP_WINDOW_S=$win "$bin" bench --aa --repeats "$pairs" 2>&1)
      sd=$(echo "$out" | grep -o 'sd of ln(ratio) [0-9.]*' | awk '{print $4}')
      echo "$w window=${win}s round=$r sd_ln_ratio=${sd:-?} seconds=$(( $(date +%s) - s ))"
    done
  done
done
