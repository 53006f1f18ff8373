"""A script of someone else's, tuned beside a bursty load, then each kept
change timed quietly as a whole command.

Issue 33's check: on a shared machine, is any change kept whose quiet effect
is under x1.03, and are real gains still kept? For one project folder:

1. A fresh copy (a git repository) is set up as a new user would:
   `tuneloop init -- <command>`.
2. `tuneloop start --agent builtin` runs while a load command runs beside it
   (for example a bursty one-core load, `--seed` and `--log` passed to it).
3. With the load stopped, the project's states are rebuilt from the run
   folder (the baseline's editable files, then each kept turn's diff.patch in
   turn order) and the command is timed whole: each kept change against the
   state before it, and the baseline against the final, `--rounds` rounds,
   the two sides' order alternating by round.

One JSON line per project goes to bench/heldout_load.jsonl:

    python3 bench/heldout_load.py --bin target/release/tuneloop \\
        --load 'python3 /path/bursty.py' --project /path/imgcls \\
        --cmd 'python train.py' --rounds 5
"""

import argparse
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "heldout_load.jsonl"
PYTHON = os.environ.get("TUNELOOP_PYTHON",
                        str(Path.home() / ".cache/tuneloop/venv/bin/python"))


def git(ws, *args):
    subprocess.run(["git", "-C", str(ws), *args], check=True, capture_output=True)


def fresh(project, into):
    shutil.copytree(project, into, ignore=shutil.ignore_patterns(
        "runs", "__pycache__", "tuneloop.toml", "policies", "prompts", "CLAUDE.md"))
    git(into, "init", "-q")
    git(into, "add", ".")
    git(into, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")


def read(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def states(run, rep, also=()):
    """The comparisons to time quietly, as (label, before, after) with each
    side {relative path: text}: each kept turn against the state before it,
    and each turn kept at first but reverted when measured again (its
    confirmation), or named in `also`, against the state it was tried on. The states are rebuilt
    from the baseline's editable files and the turns' diff.patch, applied in
    turn order in a scratch copy; the last is the final's."""
    base = run / "baseline" / "files"
    files = {str(f.relative_to(base)): f.read_text() for f in sorted(base.rglob("*"))
             if f.is_file()}
    baseline, now, out = dict(files), dict(files), []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)

        def apply(state, patch):
            for rel, text in state.items():
                (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
                (scratch / rel).write_text(text)
            subprocess.run(["git", "apply", "--unidiff-zero", str(patch)], cwd=scratch,
                           check=True, capture_output=True)
            return {rel: (scratch / rel).read_text() for rel in state}

        for t in rep.get("turns") or []:
            kept = t.get("decision") in ("kept", "kept_cheaper")
            if not kept and not t.get("confirmation") and t["turn"] not in also:
                continue
            after = apply(now, run / "turns" / f"{t['turn']:02}" / "diff.patch")
            out.append((f"turn {t['turn']}: {t.get('change')} ({t['decision']})", now, after))
            if kept:
                now = after
    return baseline, now, out


def put(ws, state):
    for rel, text in state.items():
        (ws / rel).write_text(text)


def whole(ws, cmd):
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ws, shell=True, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed: {p.stderr[-2000:]}")
    return time.monotonic() - t0


def quiet(ws, cmd, a, b, rounds):
    """Whole-command seconds of states a and b, interleaved; b's speedup over
    a per round (a's seconds / b's), their median and range."""
    ta, tb = [], []
    for r in range(rounds):
        for side in ((a, ta), (b, tb)) if r % 2 == 0 else ((b, tb), (a, ta)):
            put(ws, side[0])
            side[1].append(whole(ws, cmd))
    ratios = [x / y for x, y in zip(ta, tb)]
    return {"before_s": [round(x, 2) for x in ta], "after_s": [round(x, 2) for x in tb],
            "ratio_median": round(statistics.median(ratios), 3),
            "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3)}


def tune(a, binary, cmd, env, ws, load_log):
    """A fresh copy tuned beside the load: (exit code, wall seconds, the
    load's own summary line)."""
    fresh(Path(a.project), ws)
    subprocess.run([binary, "-C", str(ws), "init", "--", *cmd], env=env, check=True,
                   capture_output=True)
    load = None
    if a.load:
        load = subprocess.Popen(shlex.split(a.load) + ["--seed", str(a.seed),
                                                     "--log", str(load_log)],
                                stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    p = subprocess.run([binary, "-C", str(ws), "start", "--agent", "builtin"],
                       env=env, capture_output=True, text=True)
    wall = round(time.monotonic() - t0, 1)
    summary = None
    if load:
        load.send_signal(signal.SIGTERM)
        summary = load.communicate(timeout=30)[1].strip()
    if p.returncode != 0:
        print(p.stderr[-3000:])
    return p.returncode, wall, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="the tuneloop binary")
    ap.add_argument("--project", required=True, help="the script's folder")
    ap.add_argument("--cmd", required=True,
                    help="its command; a leading `python` becomes TUNELOOP_PYTHON")
    ap.add_argument("--load", default="", help="a load command run beside the tuning")
    ap.add_argument("--seed", type=int, default=0, help="passed to the load as --seed")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--label", default="", help="the binary's name in the row (a commit)")
    ap.add_argument("--keep", help="copy the workspace (with its run folder) here")
    ap.add_argument("--turns", default="",
                    help="also time these turns (1,3), whatever their decision")
    ap.add_argument("--from", dest="from_", metavar="DIR",
                    help="no tuning: time quietly what a kept workspace (--keep) holds")
    a = ap.parse_args()
    cmd = shlex.split(a.cmd)
    if cmd[0] == "python":
        cmd[0] = PYTHON
    binary = str(Path(a.bin).resolve())
    env = dict(os.environ, TUNELOOP_PYTHON=PYTHON, NO_COLOR="1")
    with tempfile.TemporaryDirectory(prefix="tl-heldout-") as tmp:
        load_log = Path(tmp) / "load.log"
        if a.from_:
            ws, rc, wall, load_summary = Path(a.from_), None, None, None
        else:
            ws = Path(tmp) / Path(a.project).name
            rc, wall, load_summary = tune(a, binary, cmd, env, ws, load_log)
        runs = sorted((ws / "runs").glob("2*"))
        rep = read(runs[-1] / "report.json") if runs else None
        row = {"project": Path(a.project).name, "binary": a.label, "cmd": a.cmd,
               "load": a.load, "seed": a.seed,
               "rc": rc, "wall_s": wall, "load_summary": load_summary,
               "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
        if not rep:
            print(json.dumps(row))
            raise SystemExit(1)
        run = runs[-1]
        row.update({
            "wall_s": wall or (rep.get("time") or {}).get("wall_s"),
            "speedup": rep.get("speedup"), "speedup_ci": rep.get("speedup_ci"),
            "hi_over_lo": (rep.get("final_interval") or {}).get("hi_over_lo"),
            "stop_reason": rep.get("stop_reason"), "bench_runs": rep.get("bench_runs"),
            "turns": [{k: t.get(k) for k in ("turn", "change", "decision", "ratio",
                                            "ratio_ci", "reason", "confirmation")}
                      for t in rep.get("turns") or []],
        })
        shown = quiet_cmd = " ".join(shlex.quote(c) for c in cmd)
        also = {int(t) for t in a.turns.split(",") if t}
        baseline, final, comparisons = states(run, rep, also)
        if sum(1 for c in comparisons if "(kept" in c[0]) > 1:
            comparisons.append(("baseline → final", baseline, final))
        row["quiet"] = []
        for label, before, after in comparisons:
            q = quiet(ws, quiet_cmd, before, after, a.rounds)
            row["quiet"].append({"change": label, **q})
            print(label, q, flush=True)
        put(ws, final)
        row["quiet_cmd"] = shown
        if a.keep and not a.from_:
            shutil.copytree(ws, a.keep, dirs_exist_ok=True)
            if load_log.exists():
                shutil.copy(load_log, Path(a.keep) / "load.log")
        with OUT.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
