# The two commands of the README: `make demo` and `make test`. Each sets up
# everything it needs on a fresh machine (the cached virtualenv with torch).
VENV ?= $(HOME)/.cache/tuneloop/venv
export TUNELOOP_PYTHON := $(VENV)/bin/python
CARGO ?= cargo
# The wheel's build tools (maturin, zig), pinned in scripts/setup-wheel-tools.sh.
BUILD_VENV ?= $(HOME)/.cache/tuneloop/build-venv
export TUNELOOP_BUILD_VENV := $(BUILD_VENV)
# The test suite's two builds besides the main one (the wheel's, linked through
# zig, and the libtorch feature's, linked against the venv's torch) keep their
# target folders beside the venv, as caches: a fresh clone on the same machine
# then rebuilds only tuneloop itself there, not its ~200 dependencies (1 to 2
# minutes each on 2 cores). The main build stays in target/.
AUX_TARGET ?= $(HOME)/.cache/tuneloop/target
export TUNELOOP_WHEEL_TARGET_DIR := $(AUX_TARGET)/wheel-test

.PHONY: setup setup-venv setup-wheel-tools build wheel demo test pytest clean-runs bench-decision bench-report bench-tuner bench-command gpu-check gpu-check-dry-run

# The tests need the venv and headless Chromium (for the HTML report); the
# demo needs only the venv.
setup: setup-venv setup-wheel-tools
	./scripts/setup-chromium.sh

setup-venv:
	TUNELOOP_VENV=$(VENV) ./scripts/setup-venv.sh

setup-wheel-tools:
	./scripts/setup-wheel-tools.sh

build:
	$(CARGO) build --release

# `pip install tuneloop`: the release binary as a Python wheel in target/wheels/
# (version, description and licence from Cargo.toml; README and LICENSE inside).
# Linked through zig against glibc 2.17, so it is tagged manylinux_2_17 whatever
# this machine's glibc; the optional `libtorch` feature stays out. Elsewhere than
# Linux x86_64: `make wheel WHEEL_ARGS=` builds a wheel for this machine only.
WHEEL_ARGS ?= --zig --compatibility manylinux_2_17 --target x86_64-unknown-linux-gnu
wheel: setup-wheel-tools
	PATH="$(BUILD_VENV)/bin:$$PATH" maturin build --release $(WHEEL_ARGS) --out target/wheels
	@ls -1 target/wheels/*.whl

# The demo tunes examples/slow_loader, then puts its train.py back as it was
# (the tuned file stays in runs/<id>/incumbent/) so the demo can run again.
demo: setup-venv build
	./target/release/tuneloop start --agent builtin
	./target/release/tuneloop restore --to baseline
	@echo "report: runs/$$(ls -t runs | grep -v README | head -n 1)/report.md (also report.html, plot.svg)"

# The optional `libtorch` feature (`tuneloop probe`) links the virtualenv's own
# torch, which must be 2.13.0 (tch 0.26): torch-sys asks that venv's `python`
# where libtorch is, and build.rs puts its torch/lib in the binary's rpath. It
# builds in its own target folder, so target/debug/tuneloop never links libtorch
# and the two builds never overwrite each other's binary.
LIBTORCH_ENV = PATH="$(VENV)/bin:$$PATH" VIRTUAL_ENV="$(VENV)" LIBTORCH_USE_PYTORCH=1 CARGO_TARGET_DIR=$(AUX_TARGET)/libtorch

# The Python side first (a minute): ruff over every .py of the repository
# (ruff.toml), then the pytest suite of the harness and the instrumentation.
pytest: setup-venv
	$(VENV)/bin/ruff check
	$(VENV)/bin/python -m pytest tests/python -q

# The benches are built with the tests (in the test profile, sharing their
# dependencies' builds) and, run without `--bench`, each returns at once.
# The Rust tests build while pytest runs, at the lowest priority (nice 19):
# pytest's processes get the cores whenever they want them, and the build
# takes what they leave (its subprocesses' starts, its tests' sleeps). A clean
# clone's build is minutes on 2 cores; its log is target/test-build.log. It
# runs in a process group of its own, which Ctrl-C ends with pytest. The
# wheel test's build comes with it (the same maturin command as tests/wheel.rs
# runs, into the same cached target folder), so inside the suite it finds its
# build done instead of compiling beside the tuning tests.
RUST_TESTS = --lib --bins --tests --benches
# The integration tests are one binary, tests/suite.rs; these files stay
# binaries of their own (tests/suite.rs says why). The suite runs on more
# threads than cores: its tests take one of as many running slots as cores
# (tests/support), so a thread waiting for the tuning lock leaves its core
# to the tests that tune nothing.
OWN_TEST_BINARIES = distributed layers probe
SUITE_THREADS = 12
WHEEL_TEST_BUILD = PATH="$(BUILD_VENV)/bin:$$PATH" CARGO_TARGET_DIR=$(TUNELOOP_WHEEL_TARGET_DIR) \
	nice -n 19 maturin build --profile dev --zig --compatibility manylinux_2_17 \
	--target x86_64-unknown-linux-gnu --out $(AUX_TARGET)/wheel-test-out
test: setup
	$(VENV)/bin/ruff check
	@mkdir -p target
	@setsid sh -c 'nice -n 19 $(CARGO) test $(RUST_TESTS) --no-run \
	   && $(LIBTORCH_ENV) nice -n 19 $(CARGO) test --features libtorch --lib --test probe --no-run \
	   && rm -rf $(AUX_TARGET)/wheel-test-out && $(WHEEL_TEST_BUILD)' \
	 > target/test-build.log 2>&1 & build=$$!; \
	trap 'kill -- -$$build 2>/dev/null; exit 130' INT TERM; \
	$(VENV)/bin/python -m pytest tests/python -q; py=$$?; \
	echo "waiting for the Rust tests' build (target/test-build.log)"; \
	wait $$build; b=$$?; \
	if [ $$b -ne 0 ]; then cat target/test-build.log; exit $$b; fi; \
	tail -n 1 target/test-build.log; exit $$py
	$(CARGO) test --lib --bins --benches $(OWN_TEST_BINARIES:%=--test %) --no-fail-fast \
	  -- --test-threads 2; own=$$?; \
	$(CARGO) test --test suite --no-fail-fast -- --test-threads $(SUITE_THREADS); suite=$$?; \
	[ $$own -eq 0 ] && [ $$suite -eq 0 ]
	$(LIBTORCH_ENV) $(CARGO) test --features libtorch --lib probe
	$(LIBTORCH_ENV) $(CARGO) test --features libtorch --test probe -- --test-threads 2

clean-runs:
	find runs -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +

# Decision quality (false keeps, real gains kept, runs per decision): about
# 30 minutes on 2 cores; writes bench/RESULTS.md and bench/decision.json.
bench-decision: setup-venv
	$(CARGO) bench --bench decision

# Report speed: `tuneloop report` on a run of 1,000 turns, end to end through
# the release binary; writes the "Report speed" section of bench/RESULTS.md.
bench-report:
	$(CARGO) bench --bench report

# Tuner quality: on each workload of bench/workloads/, an exhaustive sweep of
# the DataLoader settings (the oracle) and `tuneloop start --agent builtin`
# (the release binary cargo builds for the bench), then re-measurements of
# every kept change and of tuneloop's final against the oracle's best. About
# 1 h 30 min on 2 cores; writes bench/tuner.json and the "Tuner vs exhaustive
# sweep" section of bench/RESULTS.md. Smaller: TL_TUNER_ONLY=io_latency
# TL_SWEEP_REPEATS=1 TL_SWEEP_WORKERS=0,2,8 make bench-tuner.
bench-tuner: setup-venv
	$(CARGO) bench --bench tuner

# Command mode: the instrumentation's cost (the same script with and without
# it, interleaved) and each example of examples/ tuned from its own command,
# then the user's own command timed before and after. About 25 minutes on 2
# cores; writes bench/command.json and the "Command mode" section of
# bench/RESULTS.md. Smaller: TL_COMMAND_ONLY=own_script TL_OVERHEAD_PAIRS=4.
bench-command: setup-venv
	$(CARGO) bench --bench command

# The GPU check (bench/gpu/README.md): on a machine with an NVIDIA GPU, the
# demo and a storage-bound torchvision script tuned on CUDA, every figure in
# GPU_OUT (default target/gpu-check), at most 8 minutes on one H200. It builds
# nothing: run `make build` first (or carry target/release/tuneloop there).
# The interpreter: the venv's when this machine has it, else python3 on PATH
# (a GPU machine's own torch). gpu-check-dry-run: the same steps on the CPU,
# tiny (tests/gpu_check.rs runs it too).
GPU_OUT ?= target/gpu-check
GPU_PYTHON = $$(test -x "$(TUNELOOP_PYTHON)" && echo "$(TUNELOOP_PYTHON)" || command -v python3)
gpu-check:
	TUNELOOP_PYTHON="$(GPU_PYTHON)" ./bench/gpu/check.sh $(GPU_OUT)

gpu-check-dry-run: setup-venv build
	TUNELOOP_PYTHON="$(GPU_PYTHON)" ./bench/gpu/check.sh --dry-run $(GPU_OUT)
