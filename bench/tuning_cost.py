"""What a tuning run costs: `tuneloop start --agent builtin` on fresh copies
of workloads, one binary against another, interleaved.

For each round, each workload and each binary (their order alternating by
round, so a drift of the machine favours neither), a fresh copy of the
workload is tuned and its run folder read: the wall time (timed here), the
bench processes, how much of the wall time the timed windows of the
throughput runs cover (the measured share), the turns, the stop reason, the
final's speedup and its share of the binding limit. Each run appends one
line to bench/tuning_cost.jsonl (a crash loses nothing); `--table` writes
the medians per workload and binary as the "Tuning cost" section of
bench/RESULTS.md.

    python3 bench/tuning_cost.py --bin before=/path/a --bin after=/path/b \\
        --rounds 1 demo io_latency own_script
    python3 bench/tuning_cost.py --bin forked=/path/a --bin fresh=/path/a \\
        --env fresh=TUNELOOP_FORK_SERVER=0 demo
    python3 bench/tuning_cost.py --table

Workloads: `demo` (examples/slow_loader as `make demo` tunes it), a name of
bench/workloads/ (managed mode, its own tuneloop.toml), or `own_script`
(examples/own_script in command mode, as its README sets it up).
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

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "tuning_cost.jsonl"
PYTHON = os.environ.get("TUNELOOP_PYTHON",
                        str(Path.home() / ".cache/tuneloop/venv/bin/python"))


def workspace(name, into):
    """A fresh workspace for `name` in the folder `into`."""
    if name == "demo":
        shutil.copytree(REPO / "examples" / "slow_loader", into,
                        ignore=shutil.ignore_patterns("runs", "__pycache__"))
        (into / "tuneloop.toml").write_text(
            '[project]\nroot = "."\neditable = ["train.py"]\n\n'
            '[bench]\nentry = "train:build"\nsteps = 40\nwarmup_steps = 5\ntimeout_s = 300\n')
        return []
    if name == "own_script":
        shutil.copytree(REPO / "examples" / "own_script", into,
                        ignore=shutil.ignore_patterns("runs", "__pycache__", "tuneloop.toml",
                                                      "policies"))
        return ["init", "--", "python", "train.py", "--epochs", "3"]
    src = REPO / "bench" / "workloads" / name
    if not src.is_dir():
        sys.exit(f"no workload {name}: use demo, own_script or one of bench/workloads/")
    shutil.copytree(src, into, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    return []


def read(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def measured_s(run):
    """The timed windows of the run's throughput runs, summed (the profiled
    run's steps are profiled, not measured)."""
    total = 0.0
    docs = [read(run / "baseline" / "bench.json"), read(run / "final.json")]
    docs += [read(p) for p in sorted((run / "turns").glob("*/bench.json"))]
    while docs:
        doc = docs.pop()
        if not doc:
            continue
        # A kept change measured again keeps its runs under "again".
        docs.append(doc.get("again"))
        for key in ("runs", "candidate", "incumbent", "best", "baseline", "set_aside_runs"):
            for m in doc.get(key) or []:
                if isinstance(m, dict):
                    total += m.get("wall_s") or 0.0
    return total


def box():
    """The machine in a few words: runs on different boxes are not compared."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                  if line.startswith("model name")), "unknown CPU")
    # bf16 autocast's worth on CPU turns on this flag (compute_bound's final differs by it).
    bf16 = ", avx512_bf16" if "avx512_bf16" in info else ""
    return f"{model}, {os.cpu_count()} cores{bf16}"


def tune(label, binary, name, rnd, extra_env):
    with tempfile.TemporaryDirectory(prefix=f"tl-cost-{name}-") as tmp:
        ws = Path(tmp) / name
        init = workspace(name, ws)
        env = dict(os.environ, TUNELOOP_PYTHON=PYTHON, NO_COLOR="1", **extra_env)
        if init:
            subprocess.run([binary, "-C", str(ws), *init], env=env, check=True,
                           capture_output=True)
        t0 = time.monotonic()
        p = subprocess.run([binary, "-C", str(ws), "start", "--agent", "builtin"],
                           env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        runs = sorted((ws / "runs").glob("2*"))
        rep = read(runs[-1] / "report.json") if runs else None
        if runs and (runs[-1] / "report.md").exists():
            keep = OUT.parent / "tuning_cost"
            keep.mkdir(exist_ok=True)
            shutil.copy(runs[-1] / "report.md", keep / f"{name}-{label}-{runs[-1].name}.md")
        row = {"workload": name, "binary": label, "env": extra_env, "round": rnd,
               "rc": p.returncode,
               "wall_s": round(wall, 1), "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
               "box": box()}
        if rep:
            limits = rep.get("limits") or {}
            row.update({
                "bench_runs": rep.get("bench_runs"),
                "turns": len(rep.get("turns") or []),
                "stop_reason": rep.get("stop_reason"),
                "speedup": rep.get("speedup"),
                "final_sps": rep.get("final_sps"),
                "final_share_of_binding": limits.get("final_share"),
                "binding": limits.get("binding"),
                "measured_s": round(measured_s(runs[-1]), 1),
            })
        else:
            row["stderr_tail"] = p.stderr[-2000:]
        with OUT.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def table():
    rows = [json.loads(line) for line in OUT.read_text().splitlines() if line.strip()]
    groups = {}
    for r in rows:
        if r.get("bench_runs") is None:
            continue
        groups.setdefault((r["workload"], r["binary"]), []).append(r)

    def med(rs, key):
        v = [r[key] for r in rs if isinstance(r.get(key), (int, float))]
        return statistics.median(v) if v else None

    def fmt(x, spec):
        return "—" if x is None else format(x, spec)

    md = ["Each row: `tuneloop start --agent builtin` on a fresh copy, medians over the rounds "
          "(n); the binaries interleaved round by round on this 2-core box "
          "(bench/tuning_cost.py, every run in bench/tuning_cost.jsonl). Measured: the timed "
          "windows of the throughput runs, summed, as a share of the wall time.",
          "",
          "Binaries: `before` is 3f5ecf5 (main when issue 32 was filed); `after` is the "
          "build its section names (the demo: the first issue-32 session's, 2026-12-05; the "
          "bench workloads: f289453, 2026-12-06); `forked` / `fresh` one binary with the fork "
          "server on and off; `f289453` / `issue33` before and after issue 33's load-aware "
          "pairs, confirmations and sequential final; `9e6424d` this project's build with "
          "the command's imports preloaded (its yardstick run was slow where workers run: "
          "see \"The bench workloads with the final build\"), `5df6288` the same with that "
          "fixed; `d167339` / `3f51a0b` before and after the futility look from the second "
          "pair and the confirmation's look at the cap, on a noisier box (see \"The futility "
          "look from the second pair\"; `3f51a0b-alone`: two runs of it not interleaved); "
          "`3f5ecf5` / `6ae923c` / `cd6fde6` main when issue 32 was filed, the per-knob part "
          "gate, and the slow candidate's window cut, all three on one slower box on "
          "2026-12-07 (see \"One box, medians of 3\"; each row since then names its box in "
          "the jsonl), `-bf16box` the first two on another box that day, whose CPU has bf16; "
          "`9945e8c` the futility look at the cap, interleaved with three more rounds of "
          "`cd6fde6` on the same slower box later that day (see \"The futility look at the "
          "cap\"); `7d9611e` the interpreter's announcement without importing torch, and "
          "`c14ff23` the cheaper search's floor after a jump from no workers, both on that "
          "box on 2026-12-07 (see \"Slots for the test suite\"); `5e6b8dc` bf16 autocast "
          "passed over on a CPU without bf16 arithmetic, on that box the same day (see \"A "
          "CPU without bf16\"); `d69f444` windows by time both ways (a slow first stretch "
          "ends at twice window_s) and `fd5abd0` the same with the agent judging such a "
          "window as planned, on that box the same day (see \"Windows by time, both "
          "ways\"); `72e9159` the profiled run ended with its profiler's steps, on that "
          "box later that day (see \"The profiled run ends with its profile\"); "
          "`015bfb6` the profiler's steps taken after the first throughput run's window, "
          "in its process, on that box the next session (see \"The profiler's steps in "
          "the first run\"); `b8878ef` main after that (015bfb6's behaviour) and `c5f3984` "
          "runs ended at their result line, on that box the session after (see \"Runs end "
          "at their result\"), and `7db07d7` the same for commands (same section).",
          "",
          "| workload | binary | n | wall | processes | measured | turns | speedup "
          "| final / binding limit | stop reason (last run) |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for (name, label), rs in sorted(groups.items()):
        wall = med(rs, "wall_s")
        meas = med(rs, "measured_s")
        share = f"{meas:.0f} s ({meas / wall:.0%})" if wall and meas is not None else "—"
        binding = med(rs, "final_share_of_binding")
        md.append(
            f"| {name} | {label} | {len(rs)} | {wall / 60:.1f} min "
            f"| {fmt(med(rs, 'bench_runs'), '.0f')} "
            f"| {share} | {fmt(med(rs, 'turns'), '.0f')} | ×{fmt(med(rs, 'speedup'), '.2f')} "
            f"| {fmt(binding and binding * 100, '.0f')}% | {rs[-1].get('stop_reason') or '—'} |")
    text = "\n".join(md) + "\n"
    print(text)
    results = REPO / "bench" / "RESULTS.md"
    body = results.read_text()
    head = "## Tuning cost\n"
    start = body.find(head)
    section = head + "\n" + text
    if start < 0:
        body = body.rstrip("\n") + "\n\n" + section
    else:
        end = body.find("\n## ", start + len(head))
        body = body[:start] + section + (body[end + 1:] if end >= 0 else "")
    results.write_text(body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", default=[], metavar="LABEL=PATH")
    ap.add_argument("--env", action="append", default=[], metavar="LABEL=VAR=VALUE",
                    help="a variable set for that binary's runs only")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--first-round", type=int, default=0,
                    help="the first round's number, to go on with a series (it sets the order too)")
    ap.add_argument("--table", action="store_true", help="write the RESULTS.md section only")
    ap.add_argument("workloads", nargs="*")
    a = ap.parse_args()
    if a.table:
        table()
        return
    bins = [b.split("=", 1) for b in a.bin]
    envs = {label: {} for label, _ in bins}
    for e in a.env:
        label, var, value = (e.split("=", 2) + ["", ""])[:3]
        if label not in envs or not var:
            ap.error(f"--env {e}: give LABEL=VAR=VALUE for a --bin LABEL")
        envs[label][var] = value
    if not bins or not a.workloads:
        ap.error("give --bin LABEL=PATH (one or more) and workloads")
    for rnd in range(a.first_round, a.first_round + a.rounds):
        for name in a.workloads:
            order = bins if rnd % 2 == 0 else bins[::-1]
            for label, path in order:
                tune(label, path, name, rnd, envs[label])


if __name__ == "__main__":
    main()
