"""Tuning beside a bursty load: what a busy machine does to the decisions.

For each round, workload and binary (order alternating by round), a fresh
copy of the workload is tuned by `tuneloop start --agent builtin` while a
load process beside it takes one core for 0.5-3 s, then idles for 0.5-3 s
(uniform, at normal priority; the same seeded schedule for every binary of a
round). Each run appends one line to bench/busy_load.jsonl: every turn's
change, decision, ratio and interval, whether it was measured again and what
that gave, the pairs set aside and the waits for a quiet machine (from the
run log), the headline and its interval's width, the wall time.

    python3 bench/busy_load.py --bin before=/path/a --bin after=/path/b \\
        --rounds 1 compute_bound

Workloads as in bench/tuning_cost.py. Compare each kept change with the same
change's quiet effect (bench/tuning_cost.jsonl's quiet runs, or
`tuneloop bench` on the two states).
"""

import argparse
import json
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tuning_cost  # noqa: E402

OUT = Path(__file__).resolve().parent / "busy_load.jsonl"


def bursts(seed, stop):
    """One core busy 0.5-3 s, idle 0.5-3 s, until `stop` is set."""
    rng = random.Random(seed)
    while not stop.is_set():
        end = time.monotonic() + rng.uniform(0.5, 3.0)
        x = 0
        while time.monotonic() < end:
            x += 1
        stop.wait(rng.uniform(0.5, 3.0))


def events(run):
    out = {"set_aside": 0, "waits": 0, "waited_s": 0.0}
    try:
        lines = (run / "events.jsonl").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        kind = e.get("event")
        if kind == "pair_set_aside":
            out["set_aside"] += 1
        elif kind == "machine_waited":
            out["waits"] += 1
            out["waited_s"] += e.get("waited_s") or 0.0
    return out


def tune(label, binary, name, rnd, seed):
    with tempfile.TemporaryDirectory(prefix=f"tl-busy-{name}-") as tmp:
        ws = Path(tmp) / name
        init = tuning_cost.workspace(name, ws)
        env = dict(os.environ, TUNELOOP_PYTHON=tuning_cost.PYTHON, NO_COLOR="1")
        if init:
            subprocess.run([binary, "-C", str(ws), *init], env=env, check=True, capture_output=True)
        stop = multiprocessing.Event()
        load = multiprocessing.Process(target=bursts, args=(seed, stop), daemon=True)
        load.start()
        t0 = time.monotonic()
        try:
            p = subprocess.run(
                [binary, "-C", str(ws), "start", "--agent", "builtin"],
                env=env,
                capture_output=True,
                text=True,
            )
        finally:
            stop.set()
            load.join(10)
        wall = time.monotonic() - t0
        runs = sorted((ws / "runs").glob("2*"))
        rep = tuning_cost.read(runs[-1] / "report.json") if runs else None
        row = {
            "workload": name,
            "binary": label,
            "round": rnd,
            "seed": seed,
            "rc": p.returncode,
            "wall_s": round(wall, 1),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        if p.returncode != 0:
            row["stderr_tail"] = p.stderr[-2000:]
        if rep:
            ci = rep.get("speedup_ci") or [None, None]
            row.update(
                {
                    "speedup": rep.get("speedup"),
                    "speedup_ci": ci,
                    "hi_over_lo": (ci[1] / ci[0]) if ci[0] else None,
                    "final_pairs": (rep.get("final_interval") or {}).get("pairs"),
                    "bench_runs": rep.get("bench_runs"),
                    "machine_load": rep.get("machine_load"),
                    "turns": [
                        {
                            "change": t.get("change"),
                            "decision": t.get("decision"),
                            "ratio": t.get("ratio"),
                            "ci": t.get("ratio_ci"),
                            "runs": t.get("runs"),
                            "confirmation": t.get("confirmation"),
                        }
                        for t in rep.get("turns") or []
                    ],
                    **events(runs[-1]),
                }
            )
        with OUT.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", default=[], metavar="LABEL=PATH")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("workloads", nargs="+")
    a = ap.parse_args()
    bins = [b.split("=", 1) for b in a.bin]
    if not bins:
        sys.exit("--bin LABEL=PATH at least once")
    for rnd in range(a.rounds):
        order = bins if rnd % 2 == 0 else bins[::-1]
        for name in a.workloads:
            for label, binary in order:
                tune(label, binary, name, rnd, seed=1000 + rnd)


if __name__ == "__main__":
    main()
