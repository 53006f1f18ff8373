#!/bin/bash
# Why many workers warm up longer: the argparse example's loop
# (bench/own_script_loop.py, persistent workers, 8 epochs of 64 batches) under
# tuneloop's command-mode instrumentation, 64 timed steps after a warm-up of 5,
# 128 or 256 batches, at 16, 32 and 64 workers, interleaved in rounds.
#
#   bench/own_script_warmup.sh [rounds]     # default 6; about 1.5 minutes a round on 2 cores
#
# The instrument's warm-up is pinned with TUNELOOP_WARMUP_MAX (it would
# otherwise grow with the workers). One JSON line a run goes to
# bench/own_script_warmup.jsonl; medians are printed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
py=${TUNELOOP_PYTHON:-$HOME/.cache/tuneloop/venv/bin/python}
rounds=${1:-6}
out=$here/bench/own_script_warmup.jsonl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/inst"
cp "$here"/src/bench/instrument/*.py "$work/inst/"
cp "$here/src/bench/harness.py" "$work/inst/tuneloop_harness.py"
: > "$out"
for r in $(seq "$rounds"); do
  for n in 16 32 64; do
    for w in 5 128 256; do
      rm -rf "$work/r" && mkdir -p "$work/r"
      (cd "$work" && PYTHONPATH="$work/inst" TUNELOOP_RESULT_DIR="$work/r" TUNELOOP_STEPS=64 \
        TUNELOOP_WARMUP=$w TUNELOOP_WARMUP_MAX=$w TUNELOOP_PROJECT="$work" \
        "$py" "$here/bench/own_script_loop.py" "$n" 8 > /dev/null 2>&1)
      python3 -c "
import json; d = json.load(open('$work/r/result.0.json'))
print(json.dumps({'round': $r, 'workers': $n, 'warmup': d['warmup_steps'], 'samples_per_sec': d['samples_per_sec'],
                  'loader_cpu_s': d['loader_threads_cpu_s'], 'main_cpu_s': d['main_cpu_s'], 'wall_s': d['wall_s']}))" >> "$out"
    done
  done
  echo "round $r done" >&2
done
python3 - "$out" <<'EOF'
import json, statistics as st, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    d = json.loads(line)
    runs[(d["workers"], d["warmup"])].append(d)
print("workers  warm-up  runs  median samples/sec  main process CPU s (median)  workers' CPU s (median)")
for (n, w), rs in sorted(runs.items()):
    med = lambda k: st.median(r[k] for r in rs)
    print(f"{n:7d}  {w:7d}  {len(rs):4d}  {med('samples_per_sec'):18,.0f}  {med('main_cpu_s'):27.3f}  {med('loader_cpu_s'):23.3f}")
EOF
