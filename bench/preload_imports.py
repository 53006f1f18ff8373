"""What preloading a command's own imports in the fork server saves.

For each bundled example whose script imports more than torch (the Hugging
Face Trainer and Lightning examples), a fresh workspace is made as a user
would (`tuneloop init -- python train.py`), then `tuneloop bench --repeats N
--json` is run by each binary, the binaries' order alternating by round. Each
bench appends one line to bench/preload_imports.jsonl: the bench's wall time
and, per run, how it started (`process_start`), spawn to exit
(`process_s`), the command's start-up before its first batch (`startup_s`)
and samples/sec.

    python3 bench/preload_imports.py --bin before=/path/a --bin after=/path/b \\
        [--rounds 2] [--repeats 3]

Needs the cached virtualenv (TUNELOOP_PYTHON, as `make` sets it).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "preload_imports.jsonl"
EXAMPLES = {
    "hf_trainer": ["python", "train.py"],
    "lightning": ["python", "train.py"],
}


def workspace(example, command, binary):
    d = Path(tempfile.mkdtemp(prefix=f"preload-{example}-"))
    shutil.copyfile(ROOT / "examples" / example / "train.py", d / "train.py")
    subprocess.run(["git", "init", "-q"], cwd=d, check=True)
    subprocess.run(["git", "add", "."], cwd=d, check=True)
    subprocess.run(["git", "-c", "user.email=b@b", "-c", "user.name=bench", "commit", "-qm",
                    "example"], cwd=d, check=True)
    subprocess.run([binary, "init", "--"] + command, cwd=d, check=True,
                   stdout=subprocess.DEVNULL)
    return d


def bench(binary, ws, repeats):
    t = time.monotonic()
    p = subprocess.run([binary, "bench", "--repeats", str(repeats), "--json"], cwd=ws,
                       capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f"{binary} bench failed in {ws}:\n{p.stderr[-2000:]}")
    runs = json.loads(p.stdout)["runs"]
    return wall, [{k: r.get(k) for k in ("process_start", "process_s", "startup_s",
                                         "samples_per_sec")} for r in runs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    bins = [b.split("=", 1) for b in args.bin]
    if not os.environ.get("TUNELOOP_PYTHON"):
        sys.exit("set TUNELOOP_PYTHON to the cached virtualenv's python (make does)")
    spaces = {(ex, name): workspace(ex, cmd, path)
              for ex, cmd in EXAMPLES.items() for name, path in bins}
    rows = []
    with open(OUT, "a") as out:
        for rnd in range(args.rounds):
            order = bins if rnd % 2 == 0 else bins[::-1]
            for ex in EXAMPLES:
                for name, path in order:
                    wall, runs = bench(path, spaces[(ex, name)], args.repeats)
                    row = {"example": ex, "binary": name, "round": rnd, "wall_s": round(wall, 1),
                           "runs": runs, "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    rows.append(row)
                    print(f"round {rnd} {ex} {name}: {wall:.1f} s, "
                          f"{[r['process_start'] for r in runs]}", flush=True)
    for d in spaces.values():
        shutil.rmtree(d, ignore_errors=True)
    print("\n| example | binary | benches | bench wall (median) | a run, spawn to exit (median) "
          "| start-up before the first batch (median) |")
    print("|---|---|---:|---:|---:|---:|")
    for ex in EXAMPLES:
        for name, _ in bins:
            mine = [r for r in rows if r["example"] == ex and r["binary"] == name]
            runs = [x for r in mine for x in r["runs"]]

            def med(key, runs=runs):
                xs = [x[key] for x in runs if x.get(key) is not None]
                return f"{statistics.median(xs):.2f} s" if xs else "–"
            print(f"| {ex} | {name} | {len(mine)} | "
                  f"{statistics.median(r['wall_s'] for r in mine):.1f} s | {med('process_s')} "
                  f"| {med('startup_s')} |")


if __name__ == "__main__":
    main()
