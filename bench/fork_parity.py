"""Forked against fresh: does a run forked from the fork server measure what
a fresh process measures, and what does each cost in wall time?

For each workload (a fresh copy), rounds alternate the order of the two
settings; each setting is one `tuneloop bench --repeats N --json` with
TUNELOOP_FORK_SERVER=1 or 0. Recorded per invocation: every run's
samples/sec and process_start, and the invocation's wall time (the server's
start included, once). Each invocation appends a line to
bench/fork_parity.jsonl; the summary (medians, the paired ratio of each
round's medians) is printed at the end.

    python3 bench/fork_parity.py --bin target/release/tuneloop --rounds 4 \\
        --repeats 3 demo compute_bound

Workloads: `demo` (examples/slow_loader) or a name of bench/workloads/.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "fork_parity.jsonl"
sys.path.insert(0, str(REPO / "bench"))
from tuning_cost import PYTHON, workspace  # noqa: E402


def bench(binary, ws, repeats, fork):
    env = dict(os.environ, TUNELOOP_PYTHON=PYTHON, NO_COLOR="1",
               TUNELOOP_FORK_SERVER="1" if fork else "0")
    t0 = time.monotonic()
    p = subprocess.run([binary, "-C", str(ws), "bench", "--repeats", str(repeats), "--json"],
                       env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"bench failed ({p.returncode}):\n{p.stderr[-3000:]}")
    runs = json.loads(p.stdout)["runs"]
    return wall, [m["samples_per_sec"] for m in runs], [m.get("process_start") for m in runs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("workloads", nargs="+")
    a = ap.parse_args()
    for name in a.workloads:
        with tempfile.TemporaryDirectory(prefix=f"tl-fork-{name}-") as tmp:
            ws = Path(tmp) / name
            workspace(name, ws)
            rows = []
            for rnd in range(a.rounds):
                order = (True, False) if rnd % 2 == 0 else (False, True)
                for fork in order:
                    wall, sps, starts = bench(a.bin, ws, a.repeats, fork)
                    row = {"workload": name, "round": rnd, "fork_server": fork,
                           "wall_s": round(wall, 2), "sps": [round(x, 1) for x in sps],
                           "process_start": starts,
                           "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
                    rows.append(row)
                    with OUT.open("a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
            summarize(name, rows)


def summarize(name, rows):
    def med(fork, key):
        return statistics.median(
            statistics.median(r[key]) if isinstance(r[key], list) else r[key]
            for r in rows if r["fork_server"] == fork)

    ratios = []
    for rnd in sorted({r["round"] for r in rows}):
        pair = {r["fork_server"]: statistics.median(r["sps"]) for r in rows
                if r["round"] == rnd}
        if True in pair and False in pair:
            ratios.append(pair[True] / pair[False])
    print(f"{name}: samples/sec forked {med(True, 'sps'):.1f} vs fresh {med(False, 'sps'):.1f}; "
          f"paired ratios {', '.join(f'{x:.3f}' for x in ratios)} "
          f"(median {statistics.median(ratios):.3f}); "
          f"wall a bench {med(True, 'wall_s'):.1f} s vs {med(False, 'wall_s'):.1f} s")


if __name__ == "__main__":
    main()
