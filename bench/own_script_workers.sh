#!/bin/bash
# What fixed worker counts reach on the argparse example, measured the way
# tuneloop measures (`tuneloop bench`: one whole 64-batch epoch a run), with the
# binding limit each setting's own figures give. Checks the limit against
# reality: the best any setting reaches should sit just under it.
#
#   bench/own_script_workers.sh [rounds] [counts…]   # default: 4 rounds of 16 24 32 48 64
#
# Each count gets a fresh copy of examples/own_script with `--workers` defaulting
# to it and `persistent_workers=True`; the rounds go through the counts in turn
# (interleaved, so the box's drift hits every count alike), 3 runs a call.
# One JSON line per call goes to bench/own_script_workers.jsonl; a summary
# (median samples/sec, the limit's median, the share) is printed at the end.
# About 2 minutes a round on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${TUNELOOP_BIN:-$here/target/release/tuneloop}
export TUNELOOP_PYTHON=${TUNELOOP_PYTHON:-$HOME/.cache/tuneloop/venv/bin/python}
rounds=${1:-4}
shift || true
counts=${*:-16 24 32 48 64}
out=$here/bench/own_script_workers.jsonl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -x "$bin" ] || { echo "build it first: cargo build --release" >&2; exit 1; }
for n in $counts; do
  d=$work/w$n
  cp -r "$here/examples/own_script" "$d"
  sed -i "s/\"--workers\", type=int, default=0,/\"--workers\", type=int, default=$n,/; s/num_workers=args.workers)/num_workers=args.workers, persistent_workers=True)/" "$d/train.py"
  grep -q "default=$n," "$d/train.py" && grep -q "persistent_workers=True" "$d/train.py" \
    || { echo "examples/own_script/train.py changed: cannot set $n workers" >&2; exit 1; }
  (cd "$d" && "$bin" init -- python train.py --epochs 3 > /dev/null)
done
: > "$out"
for r in $(seq "$rounds"); do
  for n in $counts; do
    (cd "$work/w$n" && "$bin" bench --repeats 3 --json 2> /dev/null) | python3 -c "
import json, sys
d = json.load(sys.stdin); L = d['limits']
print(json.dumps({'workers': $n, 'round': $r, 'timed_steps': d['timed_steps'],
                  'samples_per_sec': [m['samples_per_sec'] for m in d['runs']],
                  'binding': L.get('binding'),
                  'binding_sps': min(v for v in (L.get(k) for k in ('step_alone_sps', 'step_limit_sps', 'cpu_limit_sps', 'epoch_limit_sps')) if v),
                  'cpu_limit_sps': L.get('cpu_limit_sps'), 'others_cores': L.get('others_cores')}))" >> "$out"
    echo "round $r, $n workers: done" >&2
  done
done
python3 - "$out" <<'EOF'
import json, statistics as st, sys
from collections import defaultdict
sps, lim = defaultdict(list), defaultdict(list)
for line in open(sys.argv[1]):
    d = json.loads(line)
    sps[d["workers"]] += d["samples_per_sec"]
    lim[d["workers"]].append(d["binding_sps"])
print("workers  runs  median samples/sec  [min, max]      its own binding limit (median)  share")
for n in sorted(sps):
    m, l = st.median(sps[n]), st.median(lim[n])
    print(f"{n:7d}  {len(sps[n]):4d}  {m:18,.0f}  [{min(sps[n]):,.0f}, {max(sps[n]):,.0f}]  {l:30,.0f}  {m / l:5.0%}")
EOF
