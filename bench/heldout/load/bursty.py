#!/usr/bin/env python3
"""Bursty single-core CPU load generator.

Alternates between a busy period (tight pure-Python loop in this one
process/thread, ~100% of exactly one core) and an idle period (sleep).
Both period lengths are drawn uniformly from [0.5, 3.0] seconds using a
seeded RNG.  Runs until SIGTERM/SIGINT or until --duration seconds pass.

--log PATH appends one line per period:
    <wall-clock start, time.time()> <busy|idle> <actual length in s>
On exit a one-line summary goes to stderr.

Standard library only.
"""
import argparse
import random
import signal
import sys
import time

MIN_PERIOD = 0.5
MAX_PERIOD = 3.0
IDLE_SLICE = 0.05  # sleep granularity so signals/deadline are noticed fast

_stop = False


def _on_signal(signum, frame):
    global _stop
    _stop = True


def busy(seconds, deadline):
    """Spin in a tight arithmetic loop until `seconds` elapse, stop, or deadline."""
    end = time.monotonic() + seconds
    if deadline is not None:
        end = min(end, deadline)
    x = 0
    while not _stop:
        # inner batch of pure arithmetic; clock is checked every batch
        for i in range(20000):
            x = (x * 1103515245 + i) & 0xFFFFFFFF
        if time.monotonic() >= end:
            break
    return x


def idle(seconds, deadline):
    end = time.monotonic() + seconds
    if deadline is not None:
        end = min(end, deadline)
    while not _stop:
        left = end - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(IDLE_SLICE, left))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=None,
                   help="stop after this many seconds (default: run until killed)")
    p.add_argument("--seed", type=int, default=0, help="RNG seed (default 0)")
    p.add_argument("--log", metavar="PATH", default=None,
                   help="append one line per period: start_time kind seconds")
    args = p.parse_args(argv)

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    rng = random.Random(args.seed)
    logf = open(args.log, "a", buffering=1) if args.log else None

    t0 = time.monotonic()
    deadline = t0 + args.duration if args.duration is not None else None
    busy_total = 0.0
    kind = "busy"
    try:
        while not _stop and (deadline is None or time.monotonic() < deadline):
            length = rng.uniform(MIN_PERIOD, MAX_PERIOD)
            wall = time.time()
            s = time.monotonic()
            if kind == "busy":
                busy(length, deadline)
            else:
                idle(length, deadline)
            actual = time.monotonic() - s
            if kind == "busy":
                busy_total += actual
            if logf:
                logf.write("%.6f %s %.3f\n" % (wall, kind, actual))
            kind = "idle" if kind == "busy" else "busy"
    finally:
        total = time.monotonic() - t0
        if logf:
            logf.close()
        frac = busy_total / total if total > 0 else 0.0
        sys.stderr.write("bursty: total %.2f s, busy %.2f s, busy fraction %.3f\n"
                         % (total, busy_total, frac))
    return 0


if __name__ == "__main__":
    sys.exit(main())
