"""tuneloop's measurement inside a user's own training command (command mode).

Armed by tuneloop's ``sitecustomize`` (see there) in every Python process of
the measured command. It changes nothing until torch's DataLoader module is
imported; then it wraps three things, in memory only:

- ``DataLoader.__init__`` remembers where the loader was built (the first frame
  in the project: file:line), ``DataLoader.__iter__`` times the iterator's
  creation (worker start-up) and ties the iterator to its loader;
- ``_BaseDataLoaderIter.__next__`` -- the one place every batch of every
  DataLoader (and subclass) passes -- times the wait for each batch, and the
  time from one batch to the next request is that loader's step;
- ``torch.autograd.backward`` / ``grad`` count backward passes against the
  loader whose batch came last.

The training loader is the one whose batches are followed by backward passes
(a validation or test loader has none); only its batches count, and the time
spent iterating other loaders or between epochs (validation, checkpoints,
logging) is cut out of its steps. After ``warmup + steps`` training batches
the figures are written (``result.<rank>.json`` in ``TUNELOOP_RESULT_DIR``,
the harness's schema), the ceiling is taken when asked -- the user's own loop
fed the first training batch again, so the step runs alone --, the loaders'
workers are shut down and the process ends with status 0. A command that ends
earlier leaves ``status.<rank>.json`` saying how far it got.

Timers are inclusive ``time.perf_counter`` intervals, synchronised on CUDA.
"""

import atexit
import faulthandler
import json
import os
import signal
import statistics
import sys
import time
import weakref

import tuneloop_harness as H

ENV = os.environ
RESULT_DIR = ENV.get("TUNELOOP_RESULT_DIR", "")
STEPS = int(ENV.get("TUNELOOP_STEPS", "40"))
WARMUP = max(1, int(ENV.get("TUNELOOP_WARMUP", "5")))
# The most warm-up steps the command leaves room for (its training batches
# less the timed steps and the request that closes them), once tuneloop
# knows it; 0: not known.
WARMUP_MAX = int(ENV.get("TUNELOOP_WARMUP_MAX", "0"))
MODE = ENV.get("TUNELOOP_MODE", "throughput")
# The window by time (`[bench] window_s`): past STEPS, whole stretches of
# STEPS more until this many seconds are timed (see Recorder.lengthen).
WINDOW_S = float(ENV.get("TUNELOOP_WINDOW_S", "0") or 0)
# A candidate's window ends past this many seconds (0: never; see
# Recorder.cut and the harness's window_cut).
WINDOW_CAP_S = float(ENV.get("TUNELOOP_WINDOW_CAP_S", "0") or 0)
# A window whose first STEPS take longer than this many seconds ends there
# (0: never; see Recorder.cut and the harness's window_slow).
WINDOW_SLOW_S = float(ENV.get("TUNELOOP_WINDOW_SLOW_S", "0") or 0)
# The command's training batches, once tuneloop knows them (0: not known).
COMMAND_BATCHES = int(ENV.get("TUNELOOP_COMMAND_BATCHES", "0") or 0)
CEILING = ENV.get("TUNELOOP_CEILING") == "1"
CEILING_WARM = 3
CEILING_STEPS = int(ENV.get("TUNELOOP_CEILING_STEPS", "20"))
PROJECT = os.path.realpath(ENV.get("TUNELOOP_PROJECT", os.getcwd()))
TABLE_OUT = ENV.get("TUNELOOP_TABLE_OUT")
RANK = int(ENV.get("RANK", "0"))
WORLD = int(ENV.get("WORLD_SIZE", "1"))
HERE = os.path.dirname(os.path.realpath(__file__))
NEEDED = WARMUP + STEPS
# The first training steps' losses, for the numerics guard (see the harness).
LOSSES = H.Losses()


def warmup_for(loader):
    """Warm-up steps for this loader: `[bench] warmup_steps`, or more with
    many workers (H.warmup_for), within WARMUP_MAX when known.

    A worker's first batches cost more than its later ones (the training
    process too receives a new worker's first batches dearer): on the
    argparse example, 32 and 64 workers timed from batch 5 read 5,946 and
    5,655 samples/sec, timed from batch 128 6,954 and 7,378, while 16 read
    alike (bench/RESULTS.md). A fixed warm-up favours few workers."""
    want = H.warmup_for(loader, WARMUP)
    return max(WARMUP, min(want, WARMUP_MAX)) if WARMUP_MAX else want

perf = time.perf_counter
# The command's start, for its start-up: this import (sitecustomize imports
# it as the interpreter starts), less the imports a run forked from
# tuneloop's fork server did not pay itself (they were the server's).
STARTED = perf() - float(ENV.get("TUNELOOP_FORK_PRELOAD_S", "0") or 0)
cpu_now = time.process_time
thread_cpu = time.thread_time


def _write_json(name, obj):
    """Atomically, so tuneloop never reads half a file."""
    if not RESULT_DIR:
        return
    path = os.path.join(RESULT_DIR, f"{name}.{RANK}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def _in(path, folder):
    return path == folder or path.startswith(folder + os.sep)


def _where_built(loader):
    """(site, origin): the first frame in the project that led to this
    DataLoader, and the first frame outside torch (e.g. inside transformers
    when the project asked a Trainer for its loader)."""
    import torch

    torch_dir = os.path.dirname(os.path.realpath(torch.__file__))
    site = origin = None
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        real = os.path.realpath(fn) if not fn.startswith("<") else fn
        # A subclass's own __init__ (super().__init__(...)) is not where the
        # knobs are passed: the call that built the subclass is.
        building_self = f.f_code.co_name == "__init__" and f.f_locals.get("self") is loader
        if not fn.startswith("<") and not _in(real, torch_dir) and not _in(real, HERE) \
                and not building_self:
            here = f"{os.path.relpath(real, PROJECT) if _in(real, PROJECT) else real}:{f.f_lineno}"
            if origin is None:
                origin = here
            if _in(real, PROJECT):
                site = here
                break
        f = f.f_back
    return site, origin


class Track:
    """One DataLoader object's batches, across its epochs (iterators)."""

    def __init__(self, loader, index):
        self.loader = loader
        self.index = index
        self.site = loader.__dict__.get("_tl_site")
        self.origin = loader.__dict__.get("_tl_origin")
        self.batches = 0          # batches returned
        self.backward = 0         # backward passes after one of its batches
        self.waits = []           # per batch: seconds inside next() (+ iterator creation)
        self.steps = []           # per batch: seconds from its return to the next request
        self.fetch_cpu = []       # per batch: training-thread CPU inside next()
        self.last_return = None   # perf time the last batch was returned
        self.foreign = None       # [start, end, cpu_start, cpu_end] of other loaders since then
        self.carry_wait = 0.0     # a StopIteration call's wait, added to the next batch
        self.carry_cpu = 0.0
        self.epochs = 0
        self.epoch_starts = []    # batch index at which each later epoch began
        # Per later epoch: (batch index, (wait for its first batch, machine busy meanwhile)).
        self.fills = []
        self.first_batch = None
        self.batch_size = None
        self.batch_bytes = None
        self.identity = H.DataIdentity()  # its first batches, by part
        self.warmup = None        # its warm-up steps (warmup_for), once asked
        self.first_iter = None    # perf time of its first iter(): the start-up before it


class Recorder:
    def __init__(self):
        self.tracks = {}
        self.last = None          # the track whose batch came last
        self.train = None
        self.torch = None
        self.window = None        # counters at the timed window's start
        self.window_cut = False   # the window ended past WINDOW_CAP_S (cut)
        self.window_by_time = False  # it ended past WINDOW_SLOW_S, in its first STEPS
        self.excluded_cpu = 0.0   # process CPU of cut-out spans inside the window
        self.excluded_busy = 0.0
        self.gap_marks = None     # (cpu, busy) where a cut-out span of the training loader began
        self.ceiling_left = None  # replayed steps still to run
        self.ceiling_steps = []
        self.prof = None
        self.step_rf = None
        self.step_parts = None  # the profiled step by part (H.step_parts)
        self.progress_written = False
        self.finished = False
        self.live = weakref.WeakSet()

    # -- bookkeeping ---------------------------------------------------
    def track(self, loader):
        t = self.tracks.get(id(loader))
        if t is None or t.loader is not loader:
            t = Track(loader, len(self.tracks))
            self.tracks[id(loader)] = t
        return t

    def warmup_of(self, tr):
        if tr.warmup is None:
            tr.warmup = warmup_for(tr.loader)
        return tr.warmup

    def progress(self):
        _write_json("progress", {"loaders": self.describe(),
                                 "training": self.train.site if self.train else None})

    def describe(self):
        return [{"site": t.site, "origin": t.origin, "batches": t.batches,
                 "backward": t.backward, "settings": H.loader_settings(t.loader),
                 "training": t is self.train}
                for t in sorted(self.tracks.values(), key=lambda t: t.index)]

    def sync(self):
        # is_initialized() is a flag read; is_available() would cost a
        # microsecond per batch. CUDA that was never initialised has nothing to wait for.
        torch = self.torch
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    # -- one next() ----------------------------------------------------
    def next(self, it, orig_next):
        loader = it.__dict__.get("_tl_loader")
        if loader is None or self.finished:
            return orig_next(it)
        tr = self.track(loader)
        if self.train is None and tr.backward > 0:
            self.train = tr
            self.progress()
        if tr is self.train and self.ceiling_left is not None:
            return self.replay(tr)
        # Whether the window was open before this call (what happened since
        # the last batch belongs to it), and whether it opens now.
        timed = tr is self.train and self.window is not None
        begins = (tr is self.train and self.window is None
                  and tr.batches >= self.warmup_of(tr))
        if begins:
            # Before this batch's wait is timed: reading every worker's CPU
            # counters (and starting the profiler) costs the training process
            # milliseconds with many workers (about 4 ms at 32), which belong
            # to no timed step. It lands in the last warm-up step.
            self.begin_window(it)
        self.sync()
        # An iterator's first batch is its epoch's fill: the machine's CPU
        # meanwhile is read then only (not on every batch).
        fill_busy0 = H._machine_busy_s() if "_tl_created_busy" in it.__dict__ else None
        t0 = perf()
        c0 = thread_cpu()
        # Process CPU is only needed to cut other loaders' spans or an epoch
        # gap out of the training loader's figures.
        p0 = cpu_now() if len(self.tracks) > 1 or self.gap_marks is not None else 0.0
        if tr.last_return is not None:
            step = t0 - tr.last_return
            if tr.foreign is not None:
                step -= tr.foreign[1] - tr.foreign[0]
                if timed:
                    self.excluded_cpu += tr.foreign[3] - tr.foreign[2]
            tr.steps.append(step)
        elif timed and self.gap_marks is not None:
            # Back from an epoch gap: its CPU and the machine's were not the loader's.
            self.excluded_cpu += p0 - self.gap_marks[0]
            busy = H._machine_busy_s()
            if busy is not None and self.gap_marks[1] is not None:
                self.excluded_busy += busy - self.gap_marks[1]
        self.gap_marks = None if tr is self.train else self.gap_marks
        tr.foreign = None
        if tr is self.train and self.window is not None and self.cut(tr):
            self.hi = tr.batches
        if (tr is self.train and self.window is not None and tr.batches == self.hi
                and (self.window_cut or self.window_by_time or not self.lengthen(tr))):
            self.end_window(it)
            if CEILING:
                self.ceiling_left = CEILING_WARM + CEILING_STEPS
                self.ceiling_batch = tr.first_batch
                return self.replay(tr)
            self.finish()
        if begins:
            timed = True
        profiling = timed and self.prof is not None
        if profiling and self.step_rf is not None:
            self.exit_range(self.step_rf)
            self.step_rf = None
        rf = self.enter_range("data_wait") if profiling else None
        try:
            batch = orig_next(it)
        except StopIteration:
            t1 = perf()
            tr.carry_wait += t1 - t0 + it.__dict__.pop("_tl_created", 0.0)
            tr.carry_cpu += thread_cpu() - c0
            tr.last_return = None
            tr.foreign = None
            if tr is self.train and self.window is not None:
                self.gap_marks = (cpu_now(), H._machine_busy_s())
            if rf is not None:
                self.exit_range(rf)
            self.others_saw(tr, t0, t1, p0)
            raise
        except BaseException:
            # A dataset that raises: the range is closed on this way out
            # too, so none is left open when the profiler stops at exit.
            if rf is not None:
                self.exit_range(rf)
            raise
        if rf is not None:
            self.exit_range(rf)
        self.sync()
        t1 = perf()
        created = it.__dict__.pop("_tl_created", None)
        created_busy = it.__dict__.pop("_tl_created_busy", None)
        if created is not None:
            tr.epochs += 1
            if tr.epochs > 1:
                tr.epoch_starts.append(tr.batches)
                # The fill as the step saw it: making the iterator and waiting
                # for its first batch (not what the script did in between:
                # that span is cut out of the measurement like an epoch gap).
                busy1 = H._machine_busy_s()
                busy = (created_busy + busy1 - fill_busy0
                        if None not in (created_busy, busy1, fill_busy0) else None)
                tr.fills.append((tr.batches, (created + t1 - t0, busy)))
        tr.waits.append(t1 - t0 + (created or 0.0) + tr.carry_wait)
        tr.fetch_cpu.append(thread_cpu() - c0 + tr.carry_cpu)
        tr.carry_wait = tr.carry_cpu = 0.0
        tr.batches += 1
        self.observe(tr, batch, it)
        tr.last_return = perf()
        self.last = tr
        self.others_saw(tr, t0, t1, p0)
        if not self.progress_written:
            self.progress_written = True
            self.progress()
        if profiling and tr.batches - self.lo <= self.prof_active:
            self.step_rf = self.enter_range("train_step")
        elif profiling and self.prof is not None:
            self.stop_profiler()
        return batch

    def others_saw(self, tr, t0, t1, p0):
        """Time inside another loader's next() is not this loader's step."""
        if len(self.tracks) == 1:
            return
        p1 = cpu_now()
        for other in self.tracks.values():
            if other is tr or other.last_return is None:
                continue
            if other.foreign is None:
                other.foreign = [t0, t1, p0, p1]
            else:
                other.foreign[1] = t1
                other.foreign[3] = p1

    def observe(self, tr, batch, it):
        torch = self.torch
        if tr.batch_size is None:
            tr.batch_size = H.batch_size_of(batch, torch)
            tr.batch_bytes = H.batch_bytes_of(batch, torch)
            tr.first_batch = _shallow_copy(batch)
        if not tr.identity.full():
            tr.identity.add(batch, H.indices_of(it), torch)
        if tr.batches > NEEDED + 1 and self.train is None and not any(
                t.backward for t in self.tracks.values()):
            # No backward pass anywhere (a loop without autograd): the first
            # loader to serve a whole measurement is the one measured.
            self.train = tr

    # -- the timed window ------------------------------------------------
    def lengthen(self, tr):
        """At the window's planned end: one stretch of STEPS more when fewer
        than WINDOW_S seconds are timed and the batches are surely there --
        within the epoch under way (a command runs its epoch out), or
        within the command's batches once tuneloop knows them, with the
        request that closes the window. Never while profiling, nor across
        ranks (each rank would stop at its own count, and their collectives
        need the same). Whether it lengthened."""
        if WINDOW_S <= 0 or MODE == "profile" or WORLD > 1:
            return False
        if self.stretches >= H.MAX_STRETCHES:
            return False
        timed = sum(tr.waits[self.lo:tr.batches]) + sum(tr.steps[self.lo:tr.batches])
        if timed >= WINDOW_S:
            return False
        want = self.hi + STEPS + 1
        per_epoch = H.batches_per_epoch(tr.loader)
        start = tr.epoch_starts[-1] if tr.epoch_starts else 0
        in_epoch = per_epoch is not None and want - start <= per_epoch
        in_command = COMMAND_BATCHES > 0 and want <= COMMAND_BATCHES
        if not (in_epoch or in_command):
            return False
        self.hi += STEPS
        self.stretches += 1
        return True

    def cut(self, tr):
        """Whether the window ends at this batch, still in its first STEPS:
        past WINDOW_CAP_S seconds (and WINDOW_S), the harness's window_cut,
        a candidate under a fraction of the incumbent's rate; or past
        WINDOW_SLOW_S, the harness's window_slow, a slow run's first
        stretch. Only with the losses and the data check's batches in;
        never while profiling, nor across ranks. (Unlike the harness's, a
        command's profiled run times its steps whole: it is also the run
        that finds whether the command holds them, before tuneloop knows
        its batches.)"""
        if MODE == "profile" or WORLD > 1 or self.window_cut or self.window_by_time:
            return False
        if WINDOW_CAP_S <= 0 and WINDOW_SLOW_S <= 0:
            return False
        if not self.lo < tr.batches < min(self.hi, self.lo + STEPS):
            return False
        if len(LOSSES.values) < LOSSES.n or not tr.identity.full():
            return False
        timed = sum(tr.waits[self.lo:tr.batches]) + sum(tr.steps[self.lo:tr.batches])
        if WINDOW_CAP_S > 0 and timed > max(WINDOW_CAP_S, WINDOW_S):
            self.window_cut = True
        elif WINDOW_SLOW_S > 0 and timed > WINDOW_SLOW_S:
            self.window_by_time = True
        return self.window_cut or self.window_by_time

    def begin_window(self, it):
        # Usually at batch WARMUP; later when the training loader was known late.
        self.lo = self.train.batches
        self.hi = self.lo + STEPS
        self.stretches = 1
        self.loader_cpu = H.LoaderCpu()
        self.loader_cpu.begin(it)
        # Every thread of the workers, for the CPU limit (see the harness).
        self.loader_threads_cpu = H.LoaderCpu(all_threads=True)
        self.loader_threads_cpu.begin(it)
        self.window = (cpu_now(), H._machine_busy_s())
        if MODE == "profile":
            self.start_profiler()

    def end_window(self, it):
        if self.prof is not None:
            self.stop_profiler()
        tr = self.train
        # The CPU counters first: reading the workers' memory below (smaps
        # of every worker) costs this process CPU and the window wall time
        # that the timed steps do not include.
        cpu_end = cpu_now()
        busy_end = H._machine_busy_s()
        loader_cpu = self.loader_cpu.end(it)
        loader_threads_cpu = self.loader_threads_cpu.end(it)
        # The workers' memory while they are alive, and what the machine has left.
        live_workers, workers_rss, workers_pss = H.workers_memory(it)
        main_rss, _ = H._proc_memory(os.getpid())
        cores, cores_source = H.usable_cores()
        lo, hi = self.lo, self.hi
        waits, steps, fetch = tr.waits[lo:hi], tr.steps[lo:hi], tr.fetch_cpu[lo:hi]
        data_wait, train_step = sum(waits), sum(steps)
        wall = data_wait + train_step
        timed_steps = hi - lo
        samples = tr.batch_size * timed_steps if tr.batch_size else timed_steps
        fetch_cpu = sum(fetch)
        main_cpu = max(0.0, cpu_end - self.window[0] - self.excluded_cpu - fetch_cpu)
        workers = getattr(tr.loader, "num_workers", 0) or 0
        if workers == 0:
            loader_cpu = loader_threads_cpu = fetch_cpu
        busy = None
        if self.window[1] is not None and busy_end is not None:
            busy = max(0.0, busy_end - self.window[1] - self.excluded_busy)
        torch = self.torch
        data_identity, fingerprint = tr.identity.result()
        self.result = {
            "samples_per_sec": samples / wall if wall > 0 else 0.0,
            "steps": hi - lo,
            "window_stretches": self.stretches,
            "window_cut": self.window_cut,
            "window_by_time": self.window_by_time,
            "stretch_steps": STEPS,
            "warmup_steps": lo,
            "batch_size": tr.batch_size,
            "batch_bytes": tr.batch_bytes,
            "samples": samples,
            "wall_s": wall,
            "data_wait_s": data_wait,
            "train_step_s": train_step,
            "data_wait_share": data_wait / wall if wall > 0 else 0.0,
            "epochs": tr.epochs,
            # Imports, data and model set-up: what ran before the training
            # loader was first iterated, which no loader setting changes.
            "startup_s": tr.first_iter - STARTED if tr.first_iter is not None else None,
            # An epoch whose first batch is the first timed one (a window that
            # opened at the previous epoch's end) had its fill timed too.
            "epoch_starts_timed": sum(1 for b in tr.epoch_starts if lo <= b < hi),
            "batches_per_epoch": H.batches_per_epoch(tr.loader),
            **H.epoch_fill_figures(
                [f for b, f in tr.fills if lo <= b < hi]),
            "loader_cpu_s": loader_cpu,
            "loader_threads_cpu_s": loader_threads_cpu,
            "main_cpu_s": main_cpu,
            "fetch_cpu_s": fetch_cpu,
            "data_wait_step_median_s": statistics.median(waits) if waits else None,
            "machine_busy_s": busy,
            "device": self.device(),
            "torch_version": torch.__version__,
            "cuda_available": bool(torch.cuda.is_available()),
            "cpu_count": os.cpu_count(),
            "usable_cores": cores,
            "cpu_bf16": H.cpu_bf16(torch),
            "cores_limited_by": cores_source,
            "live_workers": live_workers,
            "workers_rss_bytes": workers_rss,
            "workers_pss_bytes": workers_pss,
            "main_rss_bytes": main_rss,
            "mem_available_bytes": H.mem_available_bytes(),
            "fingerprint": fingerprint,
            "fingerprint_batches": tr.identity.batches,
            "data_identity": data_identity,
            "losses": LOSSES.values,
            "torch_threads": H.torch_threads(REC.torch) if REC.torch else None,
            "ceiling_sps": None,
            "loader": H.loader_settings(tr.loader),
            "call_site": tr.site or tr.origin,
            "call_origin": tr.origin,
            "loaders": self.describe(),
            "world_size": WORLD,
            "rank": RANK,
            # Forked from tuneloop's fork server, or a process of its own.
            "process_start": "forked" if ENV.get("TUNELOOP_FORKED") else "fresh",
            "profiled": MODE == "profile",
            "step_parts": self.step_parts,
            "mode": "command",
        }

    def device(self):
        torch = self.torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return f"cuda:{torch.cuda.current_device()}"
        return "cpu"

    # -- the ceiling: the user's own loop fed its first batch again ------
    def replay(self, tr):
        now = perf()
        if tr.last_return is not None and self.ceiling_left < CEILING_WARM + CEILING_STEPS:
            step = now - tr.last_return
            if tr.foreign is not None:
                step -= tr.foreign[1] - tr.foreign[0]
            if self.ceiling_left < CEILING_STEPS:
                self.ceiling_steps.append(step)
        tr.foreign = None
        if self.ceiling_left == 0:
            total = sum(self.ceiling_steps)
            if total > 0 and tr.batch_size:
                self.result["ceiling_sps"] = tr.batch_size * len(self.ceiling_steps) / total
            self.finish()
        self.ceiling_left -= 1
        self.sync()
        tr.last_return = perf()
        return _shallow_copy(self.ceiling_batch)

    # -- the profiler ----------------------------------------------------
    # The profiled run's table is an extra: nothing here may end the run.
    # A profiler still running when the interpreter exits kills the process
    # with SIGSEGV after the script is done: at exit, libkineto's API object
    # (a static) is destroyed before torch's profiler state, whose destructor
    # finds the profiler's callback still registered and reports it through
    # that freed API (torch 2.13, CPU only; gdb: ~ProfilerStateBase ->
    # logSoftAssert -> kineto::logInvariantViolation). A command that ends,
    # raises or calls sys.exit() inside the profiled steps exits that way, so
    # the profiler is stopped on every way out (stop_profiler_at_exit), the
    # ranges are closed even when a batch raises, and a profiler that fails
    # leaves the reason in TABLE_OUT.error instead of the table.
    def start_profiler(self):
        self.prof_active = max(1, min(STEPS, 10))
        try:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU]
            if self.device().startswith("cuda"):
                acts.append(ProfilerActivity.CUDA)
            prof = profile(activities=acts)
            prof.__enter__()
        except Exception as e:
            self.profiler_failed(f"torch.profiler did not start ({type(e).__name__}: {e})")
            return
        self.prof = prof
        atexit.register(self.stop_profiler_at_exit)

    def enter_range(self, name):
        """A record_function range opened now (closed by exit_range), or None."""
        try:
            rf = self.torch.autograd.profiler.record_function(name)
            rf.__enter__()
            return rf
        except Exception:
            return None

    @staticmethod
    def exit_range(rf):
        try:
            rf.__exit__(None, None, None)
        except Exception:
            pass

    def stop_profiler(self, table=True):
        prof, self.prof = self.prof, None
        if prof is None:
            return
        if self.step_rf is not None:
            self.exit_range(self.step_rf)
            self.step_rf = None
        try:
            prof.__exit__(None, None, None)
        except Exception as e:
            self.profiler_failed(f"torch.profiler did not stop ({type(e).__name__}: {e})")
            return
        # The step's parts (see the harness); on CUDA the host's time says
        # little of the device's.
        if self.device() == "cpu":
            self.step_parts = H.step_parts(prof)
        if not table or not TABLE_OUT or RANK != 0:
            return
        try:
            text = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
        except Exception as e:
            self.profiler_failed(f"torch.profiler gave no table ({type(e).__name__}: {e})")
            return
        with open(TABLE_OUT, "w") as f:
            f.write(text)

    def stop_profiler_at_exit(self):
        if self.prof is not None:
            self.stop_profiler(table=False)
            self.profiler_failed("the command ended inside the profiled steps")

    def profiler_failed(self, reason):
        print(f"tuneloop: profiler table unavailable: {reason}", file=sys.stderr)
        if TABLE_OUT and RANK == 0:
            try:
                with open(TABLE_OUT + ".error", "w") as f:
                    f.write(reason)
            except OSError:
                pass

    # -- the end -----------------------------------------------------------
    def finish(self):
        self.finished = True
        _write_json("result", self.result)
        for it in list(self.live):
            shut = getattr(it, "_shutdown_workers", None)
            if shut is not None:
                try:
                    shut()
                except Exception:
                    pass
        sys.stdout.flush()
        sys.stderr.flush()
        # The measurement is done: end here, without the rest of the user's
        # run and without the interpreter's teardown (a process group's or a
        # logger's threads could keep the process alive).
        os._exit(0)

    def at_exit(self):
        # Only a process that iterated a loader speaks: not a launcher
        # (torchrun's agent), not a helper process the command started.
        if self.finished or not self.tracks:
            return
        if getattr(self, "result", None) is not None:
            # The measurement was complete; the loop stopped by its own step
            # count during the ceiling's replay (a Trainer's max_steps): the
            # ceiling from the steps it ran, when there are enough of them.
            steps = self.ceiling_steps
            if len(steps) >= 5 and sum(steps) > 0 and self.train.batch_size:
                self.result["ceiling_sps"] = self.train.batch_size * len(steps) / sum(steps)
            self.finished = True
            _write_json("result", self.result)
            return
        import multiprocessing

        if multiprocessing.parent_process() is not None:
            return
        best = max(self.tracks.values(), key=lambda t: (t is self.train, t.batches), default=None)
        _write_json("status", {
            "finished": False,
            "reached": best.batches if best else 0,
            "needed": NEEDED,
            # The warm-up the workers asked for (warmup_for): past
            # `[bench] warmup_steps`, tuneloop runs again within the
            # batches the command has.
            "warmup_wanted": self.warmup_of(self.train) if self.train else WARMUP,
            "training": self.train.site if self.train else None,
            "loaders": self.describe(),
        })


def _shallow_copy(batch):
    """The batch's containers anew (a loop may pop a key of its batch), the
    tensors shared."""
    if type(batch) is dict:
        return {k: _shallow_copy(v) for k, v in batch.items()}
    if type(batch) is list:
        return [_shallow_copy(b) for b in batch]
    if type(batch) is tuple:
        return tuple(_shallow_copy(b) for b in batch)
    copy = getattr(batch, "copy", None)  # e.g. transformers' BatchEncoding
    if callable(copy) and hasattr(batch, "keys"):
        try:
            return copy()
        except Exception:
            return batch
    return batch


REC = Recorder()


def _patch(dl):
    import torch

    REC.torch = torch
    DataLoader = dl.DataLoader
    Base = dl._BaseDataLoaderIter
    if getattr(DataLoader, "_tl_patched", False):
        return
    _seed_torch(torch)
    H.watch_indices(dl)
    orig_init, orig_iter, orig_next = DataLoader.__init__, DataLoader.__iter__, Base.__next__

    def __init__(self, *a, **k):
        orig_init(self, *a, **k)
        if "_tl_site" not in self.__dict__:
            site, origin = _where_built(self)
            self.__dict__["_tl_site"] = site
            self.__dict__["_tl_origin"] = origin

    def __iter__(self):
        _patch_autograd(torch)
        tr = REC.track(self)
        if tr.first_iter is None:
            tr.first_iter = perf()
        busy0 = H._machine_busy_s()
        t0 = perf()
        it = orig_iter(self)
        created = perf() - t0
        busy1 = H._machine_busy_s()
        try:
            it.__dict__["_tl_loader"] = self
            it.__dict__["_tl_created"] = created
            # The machine's CPU while the iterator was made (workers started):
            # part of the epoch's fill, like the wait for its first batch.
            it.__dict__["_tl_created_busy"] = (
                busy1 - busy0 if busy0 is not None and busy1 is not None else None)
            REC.live.add(it)
        except (AttributeError, TypeError):
            pass
        return it

    def __next__(self):
        return REC.next(self, orig_next)

    __init__.__wrapped__ = orig_init
    DataLoader.__init__ = __init__
    DataLoader.__iter__ = __iter__
    Base.__next__ = __next__
    DataLoader._tl_patched = True


def _patch_autograd(torch):
    ag = torch.autograd
    if getattr(ag, "_tl_patched", False):
        return
    orig_backward, orig_grad = ag.backward, ag.grad

    def backward(*a, **k):
        if REC.last is not None:
            REC.last.backward += 1
        LOSSES.add(a, k, torch)
        return orig_backward(*a, **k)

    def grad(*a, **k):
        if REC.last is not None and torch.is_grad_enabled():
            REC.last.backward += 1
        return orig_grad(*a, **k)

    ag.backward, ag.grad = backward, grad
    ag._tl_patched = True


# -- seeding: every measured run starts from the same random state --------
# Python's `random` as the command starts, numpy's global generator as soon
# as numpy is imported, torch's default generator as soon as its DataLoader
# module is (inside `import torch`, before any line of the script after it):
# an unseeded `shuffle=True` then draws the same order in every run, and the
# workers' seeds (drawn from torch's generator) the same seeds. The script's
# own seeding comes later and still applies.


def _seed_torch(torch):
    # Inside `import torch`: the CPU generator alone (the sampler's and the
    # workers' seeds come from it); torch.manual_seed would import torch.cuda
    # before torch has finished importing.
    try:
        torch._C.default_generator.manual_seed(H.SEED)
    except Exception:
        pass


def _seed_at_start():
    H.seed_all()


class _PatchAfterImport:
    """Loader wrapper: runs the real module, then `after(module)`."""

    def __init__(self, loader, after=None):
        self.loader = loader
        self.after = after or _patch

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.after(module)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _Finder:
    """Waits for ``torch.utils.data.dataloader`` to be imported (and for
    numpy, to seed it)."""

    TARGET = "torch.utils.data.dataloader"
    NUMPY = "numpy"
    # torch itself, for a calibration run's threads: pinned once its import
    # is complete (torch documents its functions late in the import, so a
    # replaced set_num_threads must wait for that).
    TORCH = "torch"

    def find_spec(self, name, path=None, target=None):
        if name not in (self.TARGET, self.NUMPY) and not (
            name == self.TORCH and os.environ.get("TUNELOOP_THREADS")
        ):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    after = {self.NUMPY: H.seed_numpy, self.TORCH: H.pin_threads}.get(name, _patch)
                    spec.loader = _PatchAfterImport(spec.loader, after)
                return spec
        return None


def arm():
    if getattr(sys, "_tuneloop_armed", False):
        return
    sys._tuneloop_armed = True
    # A measurement past timeout_s gets SIGTERM: show where every thread was.
    try:
        faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    except (AttributeError, ValueError, RuntimeError):
        pass
    atexit.register(REC.at_exit)
    _seed_at_start()
    # Forked from the fork server, torch is imported already.
    if sys.modules.get("torch") is not None and os.environ.get("TUNELOOP_THREADS"):
        H.pin_threads(sys.modules["torch"])
    mod = sys.modules.get(_Finder.TARGET)
    if mod is not None:
        _patch(mod)
    else:
        sys.meta_path.insert(0, _Finder())
