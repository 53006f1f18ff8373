#!/usr/bin/env bash
# Installs (once) headless Chromium, which the tests use to open the HTML
# report (tests/review.rs). Idempotent: a working chromium is left alone.
# Debian/Ubuntu: the `chromium` package via apt-get (as root, or with sudo).
# Where it cannot be installed (no apt-get, no root) it says so and exits 0,
# so that `make demo` still works there; the browser test then fails with a
# hint, unless TUNELOOP_SKIP_BROWSER=1.
set -euo pipefail

for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1 && "$b" --version >/dev/null 2>&1; then
    echo "chromium ready: $("$b" --version 2>/dev/null | head -n 1)"
    exit 0
  fi
done

if ! command -v apt-get >/dev/null 2>&1; then
  echo "headless Chromium is missing and this is not a Debian-like system: install Chromium yourself," >&2
  echo "or run the tests with TUNELOOP_SKIP_BROWSER=1 to skip the browser check of the HTML report." >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "warning: installing chromium needs root: run \`apt-get install -y chromium\` as root, or set TUNELOOP_SKIP_BROWSER=1 for the tests" >&2
    exit 0
  fi
fi
echo "installing Debian's chromium (for the HTML report test; once per machine)…"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
chromium --version
