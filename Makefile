# The two commands of the README: `make demo` and `make test`. Each sets up
# everything it needs on a fresh machine (the cached virtualenv with torch).
VENV ?= $(HOME)/.cache/tuneloop/venv
export TUNELOOP_PYTHON := $(VENV)/bin/python
CARGO ?= cargo

.PHONY: setup build demo test clean-runs bench-decision bench-report

setup:
	TUNELOOP_VENV=$(VENV) ./scripts/setup-venv.sh
	./scripts/setup-chromium.sh

build:
	$(CARGO) build --release

# The demo tunes examples/slow_loader, then puts its train.py back as it was
# (the tuned file stays in runs/<id>/incumbent/) so the demo can run again.
demo: setup build
	./target/release/tuneloop start --agent builtin
	./target/release/tuneloop restore --to baseline
	@echo "report: runs/$$(ls -t runs | grep -v README | head -n 1)/report.md (also report.html, plot.svg)"

test: setup
	$(CARGO) test --all-targets -- --test-threads 2

clean-runs:
	find runs -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +

# Decision quality (false keeps, real gains kept, runs per decision): about
# 30 minutes on 2 cores; writes bench/RESULTS.md and bench/decision.json.
bench-decision: setup
	$(CARGO) bench --bench decision

# Report speed: `tuneloop report` on a run of 1,000 turns, end to end through
# the release binary; writes the "Report speed" section of bench/RESULTS.md.
bench-report:
	$(CARGO) bench --bench report
