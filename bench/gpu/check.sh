#!/usr/bin/env bash
# The GPU check: in one call, on a machine with an NVIDIA GPU, tune the demo
# (examples/slow_loader, managed mode) and a storage-bound torchvision script
# (bench/gpu/image_train.py, from its own command) with `--agent builtin`,
# and write every figure to one folder. bench/gpu/README.md says what it
# writes and how to read it.
#
#   bench/gpu/check.sh [--dry-run] [OUT_DIR]
#
# OUT_DIR: the argument, else $OUT, else target/gpu-check. Nothing is built:
# the binary is $TUNELOOP_BIN, else target/release/tuneloop. The interpreter
# is $TUNELOOP_PYTHON, else python3 on PATH. The repository is not touched:
# each tuning runs in a workspace of its own under a temporary folder.
#
# --dry-run: the same steps on the CPU with tiny sizes and few turns (2 to 4
# minutes on a busy 2-core machine); the CUDA turns are reported not
# applicable.
#
# Budget on the GPU: each step has a hard limit (`timeout`), the tunings also
# a [loop] max_wall_s, and the sum stays under 8 minutes. A failed step is
# recorded and the next one runs; the exit status is 1 only when something
# essential failed (no binary, no interpreter with torch, a tuning without a
# report), else 0.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
DRY=0
OUT_DIR=""
for a in "$@"; do
  case "$a" in
    --dry-run) DRY=1 ;;
    -h | --help)
      sed -n '2,/^set /p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p'
      exit 0
      ;;
    -*) echo "check.sh: unknown option $a (see --help)" >&2; exit 2 ;;
    *) OUT_DIR="$a" ;;
  esac
done
OUT_DIR="${OUT_DIR:-${OUT:-$REPO/target/gpu-check}}"
mkdir -p "$OUT_DIR/logs"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
BIN="${TUNELOOP_BIN:-$REPO/target/release/tuneloop}"
case "$BIN" in /*) ;; *) BIN="$REPO/$BIN" ;; esac
PY="${TUNELOOP_PYTHON:-$(command -v python3 || true)}"
export TUNELOOP_PYTHON="$PY"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tuneloop-gpu-check.XXXXXX")"
KEEP_WORK="${TL_KEEP_WORK:-0}"
trap '[ "$KEEP_WORK" = 1 ] || rm -rf "$WORK"' EXIT

# Sizes and limits. Seconds: the tunings' [loop] max_wall_s (checked before
# each turn, so a turn begun goes on, and the final measurement and the
# whole-command rounds come after it: about 60 s more for the demo, 150 s for
# the image script) and each step's hard limit, after which tuneloop gets
# SIGINT (it restores the files and writes its report) and, 20 s later,
# SIGKILL. On the GPU the two tunings' hard limits sum to 410 s; the other
# steps take about 20 s there.
if [ "$DRY" = 1 ]; then
  MODE="dry-run"
  # One thread a process: on a small busy machine torch's spinning threads
  # otherwise take seconds a batch.
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
  # The demo's baseline alone (its report has every figure but turns), and
  # one turn of the image script; no time budget of their own (the hard
  # limits, generous for a loaded box, end them).
  DEMO_STEPS=8 DEMO_WARMUP=2 DEMO_ITERATIONS=${TL_DRY_DEMO_ITERATIONS:-0} DEMO_WALL=0 DEMO_LIMIT=150
  # 4 batches of 8 an epoch, 3 epochs; the measured runs take 1 + 4 + 1
  # batches, an epoch start among the timed ones. The small conv net: a
  # ResNet-18 on 2 busy cores takes seconds a batch.
  IMG_ARGS=(--images 32 --size 40 --crop 32 --batch-size 8 --latency-ms 4 --epochs 3 --model small)
  IMG_STEPS=4 IMG_WARMUP=1 IMG_ITERATIONS=1 IMG_WALL=0 IMG_LIMIT=240
  # 2 pairs: the dry run checks the steps, not the decision.
  BASELINE_RUNS=1 REPEATS=2 MAX_REPEATS=2
else
  MODE="gpu"
  # Sized from the first H200 run (bench/RESULTS.md, "The GPU check"): every
  # bench process there pays 10-12 s of Python start, `import torch` and CUDA
  # set-up, so a turn of 2 pairs costs about 50 s, and 8 turns cannot fit.
  # Two turns each: the worker count, then pin_memory (or the CUDA compute
  # turns when the loader no longer binds).
  DEMO_STEPS=32 DEMO_WARMUP=5 DEMO_ITERATIONS=${TL_DEMO_ITERATIONS:-2} DEMO_WALL=${TL_DEMO_WALL_S:-0} DEMO_LIMIT=${TL_DEMO_LIMIT_S:-200}
  # 32 batches of 16 an epoch, 3 epochs: 96 batches, more than the 85 that
  # 16 workers' warm-up asked for on the first run (2 epochs of 16 batches
  # left the 16-worker turn with too few steps), and a whole command short
  # enough to time 3 times.
  IMG_ARGS=(--images 512 --size 160 --crop 128 --batch-size 16 --latency-ms 3 --epochs 3)
  IMG_STEPS=20 IMG_WARMUP=5 IMG_ITERATIONS=${TL_IMAGE_ITERATIONS:-2} IMG_WALL=${TL_IMAGE_WALL_S:-0} IMG_LIMIT=${TL_IMAGE_LIMIT_S:-300}
  # Up to 4 pairs a turn: run 2 capped them at 2 and reverted a ×3.70 gain
  # whose 2-pair interval was [0.13, 102.7].
  BASELINE_RUNS=1 REPEATS=2 MAX_REPEATS=4
fi
# The loader knobs and the CUDA compute turns only (cudnn.benchmark, TF32,
# autocast): what this check measures, within its budget.
LOOP_KNOBS='["num_workers", "pin_memory"]'
COMPUTE_KNOBS='["cudnn_benchmark", "tf32", "autocast"]'

STEPS_TSV="$OUT_DIR/steps.tsv"
printf 'step\tessential\texit\twall_s\tlimit_s\tnote\n' >"$STEPS_TSV"
ESSENTIAL_FAILED=0

now() { date +%s.%N; }
# record NAME ESSENTIAL EXIT WALL LIMIT NOTE
record() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" >>"$STEPS_TSV"
  if [ "$3" != 0 ] && [ "$2" = 1 ]; then ESSENTIAL_FAILED=1; fi
  echo "== $1: exit $3 in ${4}s${6:+ ($6)}" >&2
}
# step NAME ESSENTIAL LIMIT_S COMMAND...: runs COMMAND under a hard limit,
# its output in logs/NAME.log, and records how it ended.
step() {
  local name="$1" essential="$2" limit="$3"
  shift 3
  echo "== $name (limit ${limit}s)…" >&2
  local t0 rc wall note=""
  t0=$(now)
  timeout -s INT -k 20 "$limit" "$@" >"$OUT_DIR/logs/$name.log" 2>&1
  rc=$?
  wall=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  case $rc in 124 | 137) note="hard limit ${limit}s reached" ;; esac
  record "$name" "$essential" "$rc" "$wall" "$limit" "$note"
  return $rc
}

# A workspace's tuneloop.toml with its own step counts, and a policy with
# this check's limits (every other key at its default).
configure() {
  local ws="$1" steps="$2" warmup="$3" iterations="$4" wall="$5"
  sed -i -e "s/^steps = .*/steps = $steps/" -e "s/^warmup_steps = .*/warmup_steps = $warmup/" \
    "$ws/tuneloop.toml"
  cat >"$ws/policies/default.toml" <<EOF
# The GPU check's policy (bench/gpu/check.sh, mode $MODE).
[loop]
max_iterations = $iterations
knobs = $LOOP_KNOBS
max_wall_s = $wall

[decision]
baseline_runs = $BASELINE_RUNS
repeats = $REPEATS
max_repeats = $MAX_REPEATS

[compute]
knobs = $COMPUTE_KNOBS
EOF
}

# The run folder a `start` printed first (`run: <folder>`), copied into
# OUT_DIR/NAME: its report (md, json, html, plot) and the whole folder as
# a tarball; a report missing after an interrupted start is asked for.
collect() {
  local name="$1" ws="$2" run log
  log="$OUT_DIR/logs/$name-start.log"
  run="$(sed -n 's/^run: //p' "$log" | head -n 1)"
  [ -n "$run" ] && [ "${run#/}" = "$run" ] && run="$ws/$run"
  if [ -z "$run" ] || [ ! -d "$run" ]; then
    run="$(ls -td "$ws"/runs/*/ 2>/dev/null | head -n 1)"
    run="${run%/}"
  fi
  mkdir -p "$OUT_DIR/$name"
  if [ -z "$run" ] || [ ! -d "$run" ]; then
    echo "no run folder" >"$OUT_DIR/$name/missing"
    return 1
  fi
  for f in md json; do
    if [ ! -s "$run/report.$f" ]; then
      "$BIN" -C "$ws" report --format "$f" "$(basename "$run")" >"$run/report.$f" 2>>"$OUT_DIR/logs/$name-report.log" || rm -f "$run/report.$f"
    fi
  done
  for f in report.md report.json report.html plot.svg; do
    [ -f "$run/$f" ] && cp "$run/$f" "$OUT_DIR/$name/"
  done
  [ -f "$run/baseline/bench.json" ] && cp "$run/baseline/bench.json" "$OUT_DIR/$name/baseline-bench.json"
  cp "$ws/tuneloop.toml" "$ws/policies/default.toml" "$OUT_DIR/$name/" 2>/dev/null
  tar -czf "$OUT_DIR/$name/run.tar.gz" -C "$(dirname "$run")" "$(basename "$run")" 2>/dev/null
  [ -s "$OUT_DIR/$name/report.json" ] && [ -s "$OUT_DIR/$name/report.md" ]
}

T_START=$(now)
cat >"$OUT_DIR/check.json" <<EOF
{"mode": "$MODE", "binary": "$BIN", "python": "$PY", "started_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
 "image_args": "${IMG_ARGS[*]}", "loop_knobs": $LOOP_KNOBS, "compute_knobs": $COMPUTE_KNOBS,
 "demo": {"steps": $DEMO_STEPS, "warmup_steps": $DEMO_WARMUP, "max_iterations": $DEMO_ITERATIONS, "max_wall_s": $DEMO_WALL, "limit_s": $DEMO_LIMIT},
 "image": {"steps": $IMG_STEPS, "warmup_steps": $IMG_WARMUP, "max_iterations": $IMG_ITERATIONS, "max_wall_s": $IMG_WALL, "limit_s": $IMG_LIMIT},
 "decision": {"baseline_runs": $BASELINE_RUNS, "repeats": $REPEATS, "max_repeats": $MAX_REPEATS}}
EOF

# 1. The machine: the binary, the GPU, Python and its packages.
if [ -x "$BIN" ]; then
  step version 1 10 "$BIN" --version
else
  record version 1 127 0 0 "no binary at $BIN (build it first, or set TUNELOOP_BIN)"
fi
if command -v nvidia-smi >/dev/null; then
  step nvidia-smi 0 30 nvidia-smi
  nvidia-smi --query-gpu=name,memory.total,driver_version,pstate,clocks.max.sm --format=csv \
    >"$OUT_DIR/nvidia-smi.csv" 2>/dev/null
  cp "$OUT_DIR/logs/nvidia-smi.log" "$OUT_DIR/nvidia-smi.txt"
else
  record nvidia-smi 0 127 0 0 "nvidia-smi not on PATH"
fi
if [ -n "$PY" ]; then
  step python 1 60 "$PY" -c '
import json, os, platform, sys
import torch
info = {"python": sys.version.split()[0], "executable": sys.executable,
        "platform": platform.platform(), "cpus": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cuda_available": torch.cuda.is_available()}
try:
    import torchvision
    info["torchvision"] = torchvision.__version__
except ImportError:
    info["torchvision"] = None
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    info["gpu"] = {"name": p.name, "memory_gib": round(p.total_memory / 2**30, 1),
                   "capability": f"{p.major}.{p.minor}", "count": torch.cuda.device_count(),
                   "bf16": torch.cuda.is_bf16_supported()}
print(json.dumps(info, indent=1))'
  cp "$OUT_DIR/logs/python.log" "$OUT_DIR/python.json"
else
  record python 1 127 0 0 "no python3 on PATH and TUNELOOP_PYTHON unset"
fi

if [ "$ESSENTIAL_FAILED" = 0 ]; then
  # TL_ONLY=demo or TL_ONLY=image runs one of the two tunings (a rerun that
  # fits what is left of a GPU lease); the summary marks the other not run.
  ONLY="${TL_ONLY:-}"
  # 2. The demo's workspace: a copy of examples/slow_loader/train.py.
  DEMO="$WORK/demo"
  mkdir -p "$DEMO"
  cp "$REPO/examples/slow_loader/train.py" "$DEMO/train.py"
  step demo-init 1 30 "$BIN" -C "$DEMO" init --entry train:build &&
    configure "$DEMO" "$DEMO_STEPS" "$DEMO_WARMUP" "$DEMO_ITERATIONS" "$DEMO_WALL"
  # 3. doctor, in the demo's workspace (text and json).
  step doctor 0 60 "$BIN" -C "$DEMO" doctor
  "$BIN" -C "$DEMO" doctor --json >"$OUT_DIR/doctor.json" 2>/dev/null
  cp "$OUT_DIR/logs/doctor.log" "$OUT_DIR/doctor.txt"
  # 4. The demo tuned.
  if [ "$ONLY" != image ]; then
    step demo-start 0 "$DEMO_LIMIT" "$BIN" -C "$DEMO" start --agent builtin
    if collect demo "$DEMO"; then record demo-report 1 0 0 0 ""; else record demo-report 1 1 0 0 "no report.md/json"; fi
  fi

  if [ "$ONLY" != demo ]; then
    # 5. The image script's workspace and its images (written once, outside
    # the workspace, before any timing: `--epochs 0` writes them and stops).
    IMG="$WORK/image"
    mkdir -p "$IMG"
    cp "$HERE/image_train.py" "$IMG/train.py"
    IMG_CMD=(python train.py --data "$WORK/images" "${IMG_ARGS[@]}")
    step image-data 1 120 bash -c 'cd "$1" && shift && "$@"' _ "$IMG" "$PY" train.py \
      --data "$WORK/images" "${IMG_ARGS[@]}" --epochs 0
    step image-init 1 30 "$BIN" -C "$IMG" init -- "${IMG_CMD[@]}" &&
      configure "$IMG" "$IMG_STEPS" "$IMG_WARMUP" "$IMG_ITERATIONS" "$IMG_WALL"
    # 6. The image script tuned from its own command (then timed whole).
    step image-start 0 "$IMG_LIMIT" "$BIN" -C "$IMG" start --agent builtin
    if collect image "$IMG"; then record image-report 1 0 0 0 ""; else record image-report 1 1 0 0 "no report.md/json"; fi
  fi
  [ -n "${IMG:-}" ] && cp "$IMG/train.py" "$OUT_DIR/image/train.final.py" 2>/dev/null
  [ "$ONLY" != image ] && cp "$DEMO/train.py" "$OUT_DIR/demo/train.final.py" 2>/dev/null
fi

# 7. The summary (summary.json, summary.md) from everything above.
T_END=$(now)
TOTAL=$(awk -v a="$T_START" -v b="$T_END" 'BEGIN { printf "%.1f", b - a }')
SUMMARIZE_PY="$PY"
[ -n "$SUMMARIZE_PY" ] || SUMMARIZE_PY=python3
if ! "$SUMMARIZE_PY" "$HERE/summarize.py" "$OUT_DIR" --total-s "$TOTAL" --essential-failed "$ESSENTIAL_FAILED" \
  >"$OUT_DIR/logs/summarize.log" 2>&1; then
  echo "== summary: failed, see $OUT_DIR/logs/summarize.log" >&2
  ESSENTIAL_FAILED=1
fi
[ -f "$OUT_DIR/summary.md" ] && cat "$OUT_DIR/summary.md"
echo "check: $MODE in ${TOTAL}s; figures in $OUT_DIR" >&2
exit "$ESSENTIAL_FAILED"
