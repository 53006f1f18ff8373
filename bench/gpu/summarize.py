"""The GPU check's summary: reads what bench/gpu/check.sh left in its out
folder (steps.tsv, check.json, python.json, nvidia-smi.csv, doctor.json, and
each tuning's report.json and baseline bench.json) and writes summary.json
and summary.md there.

For each tuning: the device it trained on, baseline / final / ceiling
samples/sec and the speedup with its interval, every turn (ratio, interval,
decision), the CUDA turns picked out (pin_memory, non_blocking, cudnn
benchmark, TF32, autocast: applicable or not, each turn, kept or not, or why
there was none), and the user's command timed whole where it has one.

    python summarize.py OUT_DIR [--total-s S] [--essential-failed 0|1]

Standard library only: it runs on whatever interpreter the check found.
"""

import argparse
import csv
import json
import os
import sys

# The budget of one call on the GPU machine, and of the dry run here.
BUDGET_S = {"gpu": 480, "dry-run": 180}
TUNINGS = {
    "demo": "examples/slow_loader (managed mode, build())",
    "image": "bench/gpu/image_train.py (command mode, its own command)",
}
# The CUDA turns: how a turn's change line names each, and whether the
# knob means anything on a CPU.
CUDA_TURNS = {
    "pin_memory": ("pin_memory", "loader"),
    "non_blocking": ("non_blocking", "copy"),
    "cudnn_benchmark": ("cudnn.benchmark", "compute"),
    "tf32": ("allow_tf32", "compute"),
    "autocast": ("autocast", "compute"),
}
NON_BLOCKING_NOTE = (
    "tuneloop has no non_blocking turn: the managed harness copies every batch "
    "with non_blocking=True, and the check's scripts copy with "
    "non_blocking=<loader>.pin_memory, so the pin_memory turn decides both"
)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_steps(out):
    try:
        with open(os.path.join(out, "steps.tsv")) as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    except OSError:
        return []
    for r in rows:
        r["essential"] = r["essential"] == "1"
        r["exit"] = int(r["exit"])
        r["wall_s"] = float(r["wall_s"])
        r["limit_s"] = float(r["limit_s"])
    return rows


def device_of(bench):
    runs = (bench or {}).get("runs") or []
    return runs[0].get("device") if runs else None


def turn_row(t):
    return {
        "turn": t.get("turn"),
        "change": t.get("change"),
        "decision": t.get("decision"),
        "kept": str(t.get("decision", "")).startswith("kept"),
        "ratio": t.get("ratio"),
        "ratio_ci": t.get("ratio_ci"),
        "before_sps": t.get("before_sps"),
        "after_sps": t.get("after_sps"),
        "runs": t.get("runs"),
        "reason": t.get("reason"),
    }


def cuda_turn(knob, rep, device, loader):
    pattern, _ = CUDA_TURNS[knob]
    turns = [turn_row(t) for t in rep.get("turns", []) if pattern in (t.get("change") or "")]
    applicable = bool(device) and device.startswith("cuda")
    entry = {"applicable": applicable, "turns": turns}
    if not applicable:
        entry["status"] = f"not applicable (ran on {device or 'an unknown device'})"
    elif turns:
        entry["status"] = "kept" if any(t["kept"] for t in turns) else "tried, not kept"
    elif knob == "non_blocking":
        entry["status"] = "no such turn"
        entry["note"] = NON_BLOCKING_NOTE
    elif knob == "pin_memory" and "pin_memory=true" in (loader or ""):
        entry["status"] = "already on"
    else:
        why = [n.get("why") for n in rep.get("compute_not_tried", []) if n.get("knob") == knob]
        entry["status"] = "not tried"
        entry["note"] = why[0] if why else f"the run stopped first: {rep.get('stop_reason')}"
    if knob == "non_blocking" and applicable:
        entry.setdefault("note", NON_BLOCKING_NOTE)
    return entry


def tuning(out, name, steps):
    d = os.path.join(out, name)
    rep = read_json(os.path.join(d, "report.json"))
    bench = read_json(os.path.join(d, "baseline-bench.json"))
    start = next((s for s in steps if s["step"] == f"{name}-start"), None)
    t = {
        "what": TUNINGS[name],
        "ran": rep is not None,
        "report_md": os.path.isfile(os.path.join(d, "report.md")),
        "report_json": rep is not None,
        "start_exit": start["exit"] if start else None,
        "start_wall_s": start["wall_s"] if start else None,
    }
    if rep is None:
        return t
    device = device_of(bench)
    loader = rep.get("measured_loader")
    t.update(
        {
            "device": device,
            "run_id": rep.get("run_id"),
            "baseline_sps": rep.get("baseline_sps"),
            "final_sps": rep.get("final_sps"),
            "speedup": rep.get("speedup"),
            "speedup_ci": rep.get("speedup_ci"),
            "ceiling_sps": rep.get("ceiling_sps"),
            "final_share_of_ceiling": rep.get("final_share_of_ceiling"),
            "baseline_data_wait_share": rep.get("baseline_data_wait_share"),
            "final_data_wait_share": rep.get("final_data_wait_share"),
            "stop_reason": rep.get("stop_reason"),
            "interrupted": rep.get("interrupted"),
            "wall_s": rep.get("wall_s"),
            "bench_runs": rep.get("bench_runs"),
            "measured_loader": loader,
            "run_command": rep.get("run_command"),
            "turns": [turn_row(x) for x in rep.get("turns", [])],
            "cuda_turns": {k: cuda_turn(k, rep, device, loader) for k in CUDA_TURNS},
            "compute_not_tried": rep.get("compute_not_tried", []),
        }
    )
    w = rep.get("whole_command")
    if name == "demo":
        t["whole_command"] = {
            "applicable": False,
            "note": "managed mode: tuneloop imports build(); there is no command to time whole",
        }
    elif w is None:
        kept = any(x["kept"] for x in t["turns"])
        t["whole_command"] = {
            "applicable": True,
            "timed": False,
            "note": (
                "no whole_command in report.json (the run ended before it)"
                if kept
                else "nothing was kept: the final is the baseline, nothing to time whole"
            ),
        }
    else:
        t["whole_command"] = {
            "applicable": True,
            "timed": w.get("baseline_s") is not None and w.get("final_s") is not None,
            "baseline_command": w.get("baseline_command"),
            "final_command": w.get("final_command"),
            "baseline_s": w.get("baseline_s"),
            "final_s": w.get("final_s"),
            "speedup": w.get("speedup"),
            "startup_s": w.get("startup_s"),
            "rounds": w.get("rounds", []),
            "not_timed": w.get("not_timed"),
        }
    return t


def fmt(x, spec=".1f", none="–"):
    return none if x is None else format(x, spec)


def ci(c):
    return "–" if not c else f"[{c[0]:.3f}, {c[1]:.3f}]"


def markdown(s):
    m = s["machine"]
    gpu = m.get("gpu") or {}
    lines = [f"# GPU check ({s['mode']})", ""]
    lines.append(
        f"- Total wall: {s['total_wall_s']:.0f} s (budget {s['budget_s']} s"
        f"{', within' if s['within_budget'] else ', OVER'}); essential steps "
        f"{'failed' if s['essential_failed'] else 'all passed'}."
    )
    lines.append(
        f"- Machine: {gpu.get('name', 'no GPU')}"
        f"{', ' + str(gpu.get('memory_gib')) + ' GiB' if gpu else ''}; "
        f"{m.get('affinity', '?')} usable cores; Python {m.get('python', '?')}, "
        f"torch {m.get('torch', '?')} (CUDA {m.get('torch_cuda')}, cuDNN {m.get('cudnn')}), "
        f"torchvision {m.get('torchvision')}; tuneloop {s.get('tuneloop_version') or '?'}."
    )
    if s.get("doctor_exit") is not None:
        lines.append(f"- `tuneloop doctor`: exit {s['doctor_exit']} (doctor.txt).")
    lines.append("")
    lines.append("| step | exit | wall s | limit s | note |")
    lines.append("|---|---|---|---|---|")
    for st in s["steps"]:
        lines.append(
            f"| {st['step']}{' *' if st['essential'] else ''} | {st['exit']} | "
            f"{st['wall_s']:.1f} | {st['limit_s']:.0f} | {st['note']} |"
        )
    lines.append("")
    lines.append("\\* essential")
    for name, t in s["tunings"].items():
        lines += ["", f"## {name}: {t['what']}", ""]
        if not t["ran"] and t["start_exit"] is None:
            lines.append("Not run (TL_ONLY named the other tuning).")
            continue
        if not t["ran"]:
            lines.append(f"No report (start exited {t['start_exit']}); see logs/{name}-start.log.")
            continue
        runs = f"{t['bench_runs']} bench runs in {fmt(t['wall_s'], '.0f')} s"
        lines.append(
            f"- Device: {t['device']}; {runs}; "
            f"stopped: {t['stop_reason']}{' (interrupted)' if t['interrupted'] else ''}."
        )
        share = t["final_share_of_ceiling"]
        lines.append(
            f"- samples/sec: baseline {fmt(t['baseline_sps'])} → final {fmt(t['final_sps'])}, "
            f"×{fmt(t['speedup'], '.2f')} {ci(t['speedup_ci'])}; step-alone ceiling "
            f"{fmt(t['ceiling_sps'])} (final at {fmt(share and 100 * share, '.0f')}%)."
        )
        lines.append(
            f"- data_wait share: {fmt(t['baseline_data_wait_share'], '.2f')} → "
            f"{fmt(t['final_data_wait_share'], '.2f')}; measured loader: {t['measured_loader']}."
        )
        w = t["whole_command"]
        if not w["applicable"]:
            lines.append(f"- Whole command: not applicable ({w['note']}).")
        elif w.get("timed"):
            lines.append(
                f"- Whole command: {fmt(w['baseline_s'])} s → {fmt(w['final_s'])} s "
                f"(×{fmt(w['speedup'], '.2f')}, median of {len(w['rounds'])} rounds; "
                f"start-up {fmt(w['startup_s'])} s): `{w['final_command']}`."
            )
        else:
            lines.append(f"- Whole command: not timed ({w.get('not_timed') or w.get('note')}).")
        lines += [
            "",
            "| turn | change | ratio | interval | runs | decision |",
            "|---|---|---|---|---|---|",
        ]
        for r in t["turns"]:
            lines.append(
                f"| {r['turn']} | {r['change']} | {fmt(r['ratio'], '.3f')} | {ci(r['ratio_ci'])} | "
                f"{r['runs']} | {r['decision']} |"
            )
        lines += ["", "CUDA turns:", ""]
        for k, c in t["cuda_turns"].items():
            detail = "; ".join(
                f"turn {r['turn']} ×{fmt(r['ratio'], '.3f')} {ci(r['ratio_ci'])} {r['decision']}"
                for r in c["turns"]
            )
            note = c.get("note")
            lines.append(
                f"- {k}: {c['status']}{' — ' + detail if detail else ''}"
                f"{' (' + note + ')' if note and c['applicable'] else ''}"
            )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--total-s", type=float, default=0.0)
    ap.add_argument("--essential-failed", type=int, default=0)
    a = ap.parse_args()
    check = read_json(os.path.join(a.out, "check.json")) or {}
    mode = check.get("mode", "gpu")
    steps = read_steps(a.out)
    machine = read_json(os.path.join(a.out, "python.json")) or {}
    smi = os.path.join(a.out, "nvidia-smi.csv")
    if os.path.isfile(smi):
        with open(smi) as f:
            machine["nvidia_smi"] = list(csv.DictReader(f, skipinitialspace=True))
    version = None
    try:
        with open(os.path.join(a.out, "logs", "version.log")) as f:
            version = f.read().split()[-1]
    except (OSError, IndexError):
        pass
    doctor = next((st for st in steps if st["step"] == "doctor"), None)
    s = {
        "mode": mode,
        "total_wall_s": a.total_s,
        "budget_s": BUDGET_S.get(mode),
        "within_budget": a.total_s <= BUDGET_S.get(mode, float("inf")),
        "essential_failed": bool(a.essential_failed),
        "tuneloop_version": version,
        "config": check,
        "machine": machine,
        "doctor_exit": doctor["exit"] if doctor else None,
        "doctor": read_json(os.path.join(a.out, "doctor.json")),
        "steps": steps,
        "tunings": {name: tuning(a.out, name, steps) for name in TUNINGS},
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(s, f, indent=1)
        f.write("\n")
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(markdown(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
