# The two commands of the README: `make demo` and `make test`. Each sets up
# everything it needs on a fresh machine (the cached virtualenv with torch).
VENV ?= $(HOME)/.cache/tuneloop/venv
export TUNELOOP_PYTHON := $(VENV)/bin/python
CARGO ?= cargo

.PHONY: setup build demo test clean-runs

setup:
	TUNELOOP_VENV=$(VENV) ./scripts/setup-venv.sh

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
