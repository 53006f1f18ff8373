"""tuneloop's measurement harness (managed mode).

Embedded in the tuneloop binary and written into the run folder before each
run -- never into the user's project, so an agent editing the project cannot
touch the measurement. It imports the user's ``build()``, runs the loop of the
article (``record_function("data_wait")`` around ``next(it)``,
``record_function("train_step")`` around the step), and prints exactly one line
``TUNELOOP_RESULT {json}`` on stdout. On a user error it prints
``TUNELOOP_ERROR {json}`` with a ``kind`` and exits 3.

Under a launcher such as torchrun each rank runs this file; see Distributed.

Modes:
  throughput  no profiler at all; warm-up steps excluded from the timers
  profile     torch.profiler with a schedule; the table goes to --table-out,
              and the run ends once the profiler's steps are taken
  ceiling     (flag, any mode) also times the step alone, fed one batch already
              on the device: the samples/sec no DataLoader setting can beat

Timers are the harness's own (time.perf_counter, inclusive, synchronised on
CUDA), never read from a position in a sorted profiler table.
"""

import argparse
import contextlib
import faulthandler
import hashlib
import importlib
import json
import math
import os
import signal
import statistics
import sys
import time
import traceback

RESULT = "TUNELOOP_RESULT "
ERROR = "TUNELOOP_ERROR "
FINGERPRINT_BATCHES = 3
SEED = 0
# The first training steps whose loss is recorded for the numerics guard.
LOSS_STEPS = int(os.environ.get("TUNELOOP_LOSS_STEPS", "5"))


def fail(kind, message, code=3):
    sys.stdout.flush()
    print(ERROR + json.dumps({"kind": kind, "message": message}), flush=True)
    sys.exit(code)


def load_build(project, entry):
    if ":" not in entry:
        fail("config", f"entry {entry!r} must look like MODULE:FUNCTION, e.g. train:build")
    mod_name, fn_name = entry.split(":", 1)
    sys.path.insert(0, project)
    os.chdir(project)
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:  # the user's module failed to import
        fail("import", f"could not import {mod_name!r} from {project}: "
             f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}")
    fn = getattr(mod, fn_name, None)
    if fn is None or not callable(fn):
        fail("no_build", f"module {mod_name!r} has no function {fn_name!r}; "
             f"define `def {fn_name}():` returning a dict with 'loader' and "
             f"'model'+'optimizer' or 'step'")
    return fn


class Job:
    """What build() returned, normalised."""

    def __init__(self, built, torch):
        self.torch = torch
        if isinstance(built, (tuple, list)) and len(built) == 4:
            built = {"loader": built[0], "model": built[1],
                     "optimizer": built[2], "device": built[3]}
        if not isinstance(built, dict):
            fail("bad_return", f"build() returned {type(built).__name__}; it must return a "
                 "dict with 'loader' and 'model'+'optimizer' (or 'step'), or the tuple "
                 "(loader, model, optimizer, device)")
        if "loader" not in built:
            fail("bad_return", "build() returned a dict without 'loader'")
        self.loader = built["loader"]
        dev = built.get("device", "cpu")
        self.device = dev if isinstance(dev, torch.device) else torch.device(dev)
        self.step_fn = built.get("step")
        self.model = built.get("model")
        self.optimizer = built.get("optimizer")
        self.loss_fn = built.get("loss_fn") or torch.nn.functional.cross_entropy
        if self.step_fn is None and (self.model is None or self.optimizer is None):
            fail("bad_return", "build() must return 'step' (a callable taking one batch) "
                 "or both 'model' and 'optimizer'")
        if self.step_fn is not None and not callable(self.step_fn):
            fail("bad_return", "build()['step'] is not callable")

    def to_device(self, batch):
        torch = self.torch
        if isinstance(batch, torch.Tensor):
            return batch.to(self.device, non_blocking=True)
        if isinstance(batch, tuple) and hasattr(batch, "_fields"):
            # A namedtuple (default_collate keeps a dataset's): built from
            # its fields, not from one iterable.
            return type(batch)(*(self.to_device(b) for b in batch))
        if isinstance(batch, (list, tuple)):
            return type(batch)(self.to_device(b) for b in batch)
        if isinstance(batch, dict):
            return {k: self.to_device(v) for k, v in batch.items()}
        return batch

    def step(self, batch):
        if self.step_fn is not None:
            self.step_fn(batch)
            return
        x, y = self.to_device(batch[0]), self.to_device(batch[1])
        loss = self.loss_fn(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()


class Distributed:
    """Under torchrun (or any launcher that sets RANK / WORLD_SIZE / LOCAL_RANK):
    one process group (gloo on CPU, nccl on CUDA), the model wrapped in DDP,
    each rank timed on its own, and rank 0 reporting for all."""

    def __init__(self, torch, rank, world, local_rank):
        self.torch, self.rank, self.world, self.local_rank = torch, rank, world, local_rank
        import torch.distributed as dist
        self.dist = dist

    @classmethod
    def from_env(cls, torch):
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return None
        return cls(torch, int(os.environ.get("RANK", "0")), world,
                   int(os.environ.get("LOCAL_RANK", "0")))

    def setup(self, job, distributed_sampler):
        torch, dist = self.torch, self.dist
        if job.device.type == "cuda":
            job.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(job.device)
            if job.model is not None:
                job.model.to(job.device)
        backend = "nccl" if job.device.type == "cuda" else "gloo"
        if not dist.is_initialized():
            dist.init_process_group(backend)
        from torch.nn.parallel import DistributedDataParallel as DDP
        if job.model is not None and not isinstance(job.model, DDP):
            ids = [self.local_rank] if job.device.type == "cuda" else None
            job.model = DDP(job.model, device_ids=ids)
        if distributed_sampler:
            self.shard_loader(job)

    def shard_loader(self, job):
        """Rebuilds the user's loader with a DistributedSampler (asked for in
        tuneloop.toml), keeping every other setting."""
        from torch.utils.data import DataLoader, DistributedSampler
        old = job.loader
        if isinstance(getattr(old, "sampler", None), DistributedSampler):
            return
        shuffle = type(old.sampler).__name__ == "RandomSampler"
        kwargs = dict(batch_size=old.batch_size, num_workers=old.num_workers,
                      collate_fn=old.collate_fn, pin_memory=old.pin_memory,
                      drop_last=old.drop_last, worker_init_fn=old.worker_init_fn,
                      persistent_workers=old.persistent_workers, timeout=old.timeout)
        if old.num_workers > 0:
            kwargs["prefetch_factor"] = old.prefetch_factor
        sampler = DistributedSampler(old.dataset, shuffle=shuffle)
        job.loader = DataLoader(old.dataset, sampler=sampler, **kwargs)

    def combine(self, mine):
        """Gathers every rank's figures; rank 0 returns the combined result."""
        mine["rank"] = self.rank
        everyone = [None] * self.world
        self.dist.all_gather_object(everyone, mine)
        self.dist.barrier()
        self.dist.destroy_process_group()
        if self.rank != 0:
            return None
        slowest = max(everyone, key=lambda r: r["data_wait_share"])
        # Rank 0's own timings (data_wait_s, its median step wait, …) stay together;
        # the totals and the slowest share are set below.
        total = dict(everyone[0])
        total["samples_per_sec"] = sum(r["samples_per_sec"] for r in everyone)
        total["samples"] = sum(r["samples"] for r in everyone)
        total["data_wait_share"] = slowest["data_wait_share"]
        total["slowest_rank"] = slowest["rank"]
        if all(r["ceiling_sps"] for r in everyone):
            total["ceiling_sps"] = sum(r["ceiling_sps"] for r in everyone)
        total["world_size"] = self.world
        total["per_rank"] = [
            {k: r[k] for k in ("rank", "samples_per_sec", "data_wait_share", "data_wait_s",
                               "train_step_s", "wall_s", "fingerprint")}
            for r in everyone
        ]
        return total


class Losses:
    """The loss of the first LOSS_STEPS training steps: the scalar each of
    the first backward passes starts from, which the numerics guard of
    compute turns compares between runs. Read (``.item()``, a device sync)
    only for those few steps; a NaN or infinite loss is recorded as None."""

    def __init__(self, n=LOSS_STEPS):
        self.n = n
        self.values = []

    def add(self, args, kwargs, torch):
        if len(self.values) >= self.n:
            return
        t = args[0] if args else kwargs.get("tensors")
        if isinstance(t, (list, tuple)) and len(t) == 1:
            t = t[0]
        if isinstance(t, torch.Tensor) and t.numel() == 1:
            v = float(t.detach().float().item())
            self.values.append(v if math.isfinite(v) else None)


def watch_losses(torch, losses):
    """Records the losses of the first backward passes (``loss.backward()``
    goes through ``torch.autograd.backward``)."""
    ag = torch.autograd
    orig = ag.backward

    def backward(*a, **k):
        losses.add(a, k, torch)
        return orig(*a, **k)

    ag.backward = backward


def batch_size_of(batch, torch):
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else 1
    if isinstance(batch, (list, tuple)) and batch:
        return batch_size_of(batch[0], torch)
    if isinstance(batch, dict) and batch:
        return batch_size_of(next(iter(batch.values())), torch)
    return 1


def batch_bytes_of(batch, torch):
    """Bytes of every tensor of a batch (what a copy to the device moves)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.numel() * batch.element_size())
    if isinstance(batch, (list, tuple)):
        return sum(batch_bytes_of(b, torch) for b in batch)
    if isinstance(batch, dict):
        return sum(batch_bytes_of(v, torch) for v in batch.values())
    return 0


# -- data identity and seeding ------------------------------------------
# What tuneloop checks a setting did not change: the first FINGERPRINT_BATCHES
# batches, by part. A part that differs between the baseline's own runs (an
# order drawn from the clock, augmentation from an unseeded generator) is not
# compared; tuneloop decides which parts a turn compares (src/judge.rs).
# Shared by managed mode (below) and command mode (tuneloop_instrument).


# What the profiled step's parts are called: torch's optimizers record
# their step as "Optimizer.step#<Class>.step"; convolutions, forward and
# backward, have "convolution" in their op's or autograd node's name.
def _step_part(name):
    if name.startswith("Optimizer.step#"):
        return "optimizer"
    if "convolution" in name.lower():
        return "convolution"
    return None


def step_parts(prof, range_name="train_step"):
    """The profiled steps' time by part: the optimizer's step and the
    convolutions, each as a share of the `range_name` ranges' CPU time
    (what the compute knobs act on: fused or foreach optimizers the one,
    channels_last the other; tuneloop passes over a knob whose part is too
    small to win a change's gain). Only what runs inside the step's ranges
    counts: a convolution in the loading (augmentation) is not the model's.
    None without such a range, or when the profiler's event tree cannot be
    read."""
    try:
        events = prof.events()
        step = 0.0
        parts = {"optimizer": 0.0, "convolution": 0.0}
        for e in events:
            if e.name != range_name:
                continue
            step += e.cpu_time_total
            stack = list(e.cpu_children)
            while stack:  # the outermost event of each part, so none counts twice
                child = stack.pop()
                part = _step_part(child.name)
                if part is not None:
                    parts[part] += child.cpu_time_total
                else:
                    stack.extend(child.cpu_children)
    except Exception:
        return None
    if step <= 0:
        return None
    return {k: min(1.0, v / step) for k, v in parts.items()}


def pin_threads(torch):
    """``TUNELOOP_THREADS=N`` (the numerics guard's calibration run): torch's
    intra-op threads set to N, and the script's own ``torch.set_num_threads``
    calls ignored, so the run is the baseline with another summation order
    and nothing else changed. Without the variable, nothing happens."""
    n = os.environ.get("TUNELOOP_THREADS")
    if not n or getattr(torch, "_tl_threads_pinned", False):
        return
    original, pinned_in = torch.set_num_threads, os.getpid()
    original(int(n))

    def set_num_threads(*args, **kwargs):
        # Ignored in this process only. A DataLoader worker forked from it
        # sets its own to 1, as it would unpinned: left at N, six workers
        # of N threads each took a 2-core box to a 43rd of its speed.
        if os.getpid() != pinned_in:
            return original(*args, **kwargs)

    torch.set_num_threads = set_num_threads
    torch._tl_threads_pinned = True


def torch_threads(torch):
    """torch's intra-op threads now (``None`` when torch cannot say)."""
    try:
        return int(torch.get_num_threads())
    except Exception:
        return None


def seed_all(torch=None):
    """Seeds Python's ``random``, numpy's global generator (when numpy is
    already imported: never imported here) and, given torch, torch's: a
    measured run starts from the same random state whatever the setting, so
    an unseeded ``shuffle=True`` draws the same order every run. A script's
    own seeding comes after and still applies."""
    import random

    random.seed(SEED)
    np = sys.modules.get("numpy")
    if np is not None:
        seed_numpy(np)
    if torch is not None:
        torch.manual_seed(SEED)


def seed_numpy(np):
    try:
        np.random.seed(SEED)
    except Exception:  # a numpy without the legacy global generator
        pass


def watch_indices(dl):
    """Wraps ``_BaseDataLoaderIter._next_index`` of torch's dataloader module
    ``dl`` -- the one place a loader's indices come from its sampler (or batch
    sampler), in the training process even with workers, before they are sent
    to a worker -- so each iterator keeps the indices of its epoch's first
    FINGERPRINT_BATCHES batches. Their order is the sampler's, so it is the
    same for any worker count. Idempotent."""
    Base = getattr(dl, "_BaseDataLoaderIter", None)
    if Base is None or getattr(Base, "_tl_indices", False):
        return
    orig = Base._next_index

    def _next_index(self):
        index = orig(self)
        try:
            d = self.__dict__
            kept = d.get("_tl_idx")
            # A new sampler iterator: a new epoch (persistent workers reuse
            # the iterator object and only reset its sampler iterator).
            if kept is None or kept[0] is not self._sampler_iter:
                kept = d["_tl_idx"] = [self._sampler_iter, []]
            if len(kept[1]) < FINGERPRINT_BATCHES:
                kept[1].append(index)
        except Exception:
            pass
        return index

    Base._next_index = _next_index
    Base._tl_indices = True


def indices_of(it):
    """The sampler's indices of the batch ``it`` returned last, or None
    (another iterator, indices not seen, past the first batches)."""
    try:
        kept = it.__dict__.get("_tl_idx")
        pos = it._num_yielded - 1
    except Exception:
        return None
    if kept is None or pos < 0 or pos >= len(kept[1]):
        return None
    return kept[1][pos]


def _flat(index):
    """A batch's indices as one flat list (None stays None: an iterable
    dataset's placeholder)."""
    if index is None:
        return [None]
    if isinstance(index, (list, tuple)):
        out = []
        for i in index:
            out.extend(_flat(i))
        return out
    try:
        return [int(index)]
    except (TypeError, ValueError):
        return [repr(index)]


class DataIdentity:
    """The first FINGERPRINT_BATCHES batches, fingerprinted by part:

    - ``items``: the sampler's indices of those batches, as a set (sorted);
    - ``order``: the same indices in the order the sampler gave them, batch by batch;
    - ``structure``: containers, keys, tensor shapes and dtypes, other leaves' types;
    - ``bytes``: every tensor's bytes and every other leaf's value.

    ``items`` and ``order`` are None where the indices are not known (an
    iterable dataset, a loader that is not torch's)."""

    def __init__(self):
        self.batches = 0
        self.indices = []         # per batch: the flat indices, or None
        self.structure = hashlib.sha256()
        self.bytes = hashlib.sha256()

    def full(self):
        return self.batches >= FINGERPRINT_BATCHES

    def add(self, batch, indices, torch):
        if self.full():
            return
        self.batches += 1
        self.indices.append(None if indices is None else _flat(indices))
        try:
            self._walk(batch, torch)
        except Exception as e:  # an odd batch object never breaks the run
            self.structure.update(f"unreadable:{type(e).__name__}|".encode())

    def _walk(self, batch, torch):
        s, b = self.structure, self.bytes
        if isinstance(batch, torch.Tensor):
            t = batch.detach().cpu().contiguous()
            s.update(f"T{tuple(t.shape)}|{t.dtype}|".encode())
            try:
                b.update(t.view(torch.uint8).numpy().tobytes())
            except Exception:  # no numpy, or a dtype numpy lacks: values as float64 text
                b.update(repr(t.double().flatten().tolist()).encode())
        elif isinstance(batch, (list, tuple)):
            s.update(f"{type(batch).__name__}[{len(batch)}]|".encode())
            for x in batch:
                self._walk(x, torch)
        elif isinstance(batch, dict) or (hasattr(batch, "keys") and hasattr(batch, "__getitem__")):
            keys = sorted(batch.keys(), key=repr)
            s.update(f"{type(batch).__name__}{{{len(keys)}}}|".encode())
            for k in keys:
                s.update(f"key:{k!r}|".encode())
                self._walk(batch[k], torch)
        else:
            s.update(f"{type(batch).__name__}|".encode())
            b.update(repr(batch).encode() + b"|")

    def result(self):
        """The result JSON's ``data_identity`` and (the older single figure,
        structure and bytes together) ``fingerprint``."""
        known = bool(self.indices) and all(
            i is not None and any(x is not None for x in i) for i in self.indices)
        items = order = None
        if known:
            order = hashlib.sha256(repr(self.indices).encode()).hexdigest()
            flat = sorted((x for i in self.indices for x in i), key=repr)
            items = hashlib.sha256(repr(flat).encode()).hexdigest()
        structure, data = self.structure.hexdigest(), self.bytes.hexdigest()
        ident = {"batches": self.batches, "items": items, "order": order,
                 "structure": structure, "bytes": data}
        whole = hashlib.sha256((structure + data).encode()).hexdigest()
        return ident, whole


def _proc_cpu_s(pid, all_threads=False):
    """CPU seconds a live process has used (Linux /proc; None elsewhere): its
    main thread's, or with ``all_threads`` every live thread's (a worker's
    queue feeder thread, a ``__getitems__`` thread pool)."""
    try:
        if all_threads:
            total = 0
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            return total / 1e9
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _proc_memory(pid):
    """(RSS, PSS) in bytes of a live process (Linux /proc; None elsewhere).
    PSS shares each page among the processes that map it: forked workers
    share torch's pages with the training process, which RSS counts in full."""
    rss = pss = None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return rss, pss


def workers_memory(it):
    """The loader's live workers' memory: (count, RSS sum, PSS sum), the sums
    None when a worker's figure cannot be read."""
    workers = getattr(it, "_workers", None) or []
    if not workers:
        return 0, None, None
    pids = [getattr(w, "pid", None) for w in workers]
    figures = [None] * len(pids)

    # A worker's smaps_rollup is a walk of its page tables in the kernel,
    # 6-15 ms with torch mapped: after every window, with 31 workers a
    # quarter of a second. The reads release the GIL, so one thread a core
    # takes them side by side.
    def read(lane):
        for i in range(lane, len(pids), lanes):
            figures[i] = _proc_memory(pids[i])

    lanes = max(1, min(len(pids), os.cpu_count() or 1))
    if lanes == 1:
        read(0)
    else:
        import threading

        threads = [threading.Thread(target=read, args=(k,)) for k in range(lanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rss_sum, pss_sum = 0, 0
    for rss, pss in figures:
        rss_sum = None if rss is None or rss_sum is None else rss_sum + rss
        pss_sum = None if pss is None or pss_sum is None else pss_sum + pss
    return len(workers), rss_sum, pss_sum


def mem_available_bytes():
    """The machine's MemAvailable (Linux /proc/meminfo), less nothing: what
    new processes may take before others are squeezed. None elsewhere."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _machine_busy_s():
    """CPU seconds the whole machine has been busy, every process counted
    (Linux /proc/stat; None elsewhere): on a shared machine, what others take."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        user, nice, system, _idle, _iowait, irq, softirq, steal = v
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None


def _epoch_fill(start, t1):
    """One epoch start's figures: seconds from the new iterator to its first
    batch (the pipeline filling from empty, the step idle) and the CPU
    seconds the machine was busy meanwhile."""
    t0, busy0 = start
    busy1 = _machine_busy_s()
    busy = busy1 - busy0 if busy0 is not None and busy1 is not None else None
    return (t1 - t0, busy)


def epoch_fill_figures(fills):
    """The medians of the timed epoch starts' fills (see _epoch_fill)."""
    waits = [w for w, _ in fills]
    busy = [b for _, b in fills if b is not None]
    return {
        "epoch_fill_s": statistics.median(waits) if waits else None,
        "epoch_fill_busy_s": statistics.median(busy) if busy else None,
    }


# The most `steps`-long stretches one timed window holds: a step so fast
# that a second of it is thousands of steps ends there.
MAX_STRETCHES = 64


def window_short(t_start, window_s, stretches):
    """Whether a timed window that began at `t_start` (perf_counter) and has
    held `stretches` stretches of `steps` is still under `window_s` seconds,
    so that one stretch more is timed."""
    if t_start is None or stretches >= MAX_STRETCHES:
        return False
    return time.perf_counter() - t_start < window_s


def window_cut(t_start, cap_s, window_s, timed_steps, steps, losses, identity):
    """Whether a timed window that began at `t_start` and has timed
    `timed_steps` of its first `steps` ends now, past `cap_s` seconds
    (`--window-cap-s`, 0: never) and `window_s`. tuneloop sets the cap on a
    candidate's runs at several times the incumbent's window
    (`bench::window::cap_s`): a window still in its first stretch then is a
    rate under that fraction of the incumbent's, which no decision keeps,
    and timing it to its end (a minute for bf16 autocast on a CPU without
    bf16) tells the rule nothing more. Never before one step is timed, the
    losses the numerics guard compares are all in, and the data check's
    batches are seen: a cut run is checked like any other."""
    if cap_s <= 0:
        return False
    return window_over(t_start, max(cap_s, window_s), timed_steps, steps, losses, identity)


def window_slow(t_start, slow_s, timed_steps, steps, losses, identity):
    """Whether a timed window ends now because its first `steps` take longer
    than `slow_s` (`--window-slow-s`, 0: never; tuneloop passes twice
    `--window-s`, `bench::window::SLOW_AFTER`): a slow run's steps (the
    baseline without workers) take seconds a stretch, and past that a
    longer window only costs time. The same conditions as window_cut, so
    the run is checked like any other (window_by_time)."""
    if slow_s <= 0:
        return False
    return window_over(t_start, slow_s, timed_steps, steps, losses, identity)


def window_over(t_start, limit_s, timed_steps, steps, losses, identity):
    """Whether a window still in its first `steps` (one timed at least) has
    run past `limit_s`, with the losses and the data check's batches in."""
    if t_start is None or not 1 <= timed_steps < steps:
        return False
    if len(losses.values) < losses.n or not identity.full():
        return False
    return time.perf_counter() - t_start > limit_s


def profile_taken(profile_end, i, total_steps, losses, identity):
    """Whether the profiled run's window ends before step `i`: the profiler's
    steps end at `profile_end` (None: not a profiled run, or across ranks),
    before the `total_steps` planned, and the losses and the data check's
    batches are in."""
    if profile_end is None or not profile_end <= i < total_steps:
        return False
    return len(losses.values) >= losses.n and identity.full()


# Warm-up batches per worker before the timing starts.
WARMUP_PER_WORKER = 4


def warmup_for(loader, warmup):
    """`warmup`, and at least WARMUP_PER_WORKER batches a worker (and the
    workers' first prefetch round)."""
    nw = getattr(loader, "num_workers", 0) or 0
    pf = getattr(loader, "prefetch_factor", None) or 2
    return max(warmup, nw * max(WARMUP_PER_WORKER, pf))


def batches_per_epoch(loader):
    """len(loader): the batches one epoch holds (this rank's under a
    DistributedSampler); None for an iterable dataset without a length."""
    try:
        n = len(loader)
    except (TypeError, NotImplementedError):
        return None
    return n if isinstance(n, int) and n > 0 else None


class LoaderCpu:
    """CPU seconds the loader's worker processes spend over the timed steps:
    the live workers' own counters plus what the workers that were joined in
    between (a new epoch without persistent_workers) left in RUSAGE_CHILDREN.
    With the agent's data_wait and train_step figures, it tells a loader that
    waits (more workers pay) from one that computes (the cores are the limit)."""

    def __init__(self, all_threads=False):
        self.start = None
        self.all_threads = all_threads

    def _now(self, it):
        try:
            import resource
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            total = children.ru_utime + children.ru_stime
        except (ImportError, OSError):
            return None
        for w in getattr(it, "_workers", None) or []:
            cpu = _proc_cpu_s(getattr(w, "pid", None), self.all_threads)
            if cpu is None:
                return None
            total += cpu
        return total

    def begin(self, it):
        self.start = self._now(it)

    def end(self, it):
        now = self._now(it)
        if self.start is None or now is None:
            return None
        return max(0.0, now - self.start)


def _cgroup_v2_quota(root, rel):
    """The tightest ``cpu.max`` (quota period, or ``max``) from the job's
    cgroup up to the root of a cgroup v2 tree: a parent's limit binds too."""
    best = None
    rel = rel.strip("/")
    while True:
        path = os.path.join(root, rel, "cpu.max") if rel else os.path.join(root, "cpu.max")
        try:
            with open(path) as f:
                quota, period = f.read().split()[:2]
            if quota != "max" and int(period) > 0:
                cores = int(quota) / int(period)
                best = cores if best is None else min(best, cores)
        except (OSError, ValueError):
            pass
        if not rel:
            return best
        rel = os.path.dirname(rel)


def _cgroup_v1_quota(root, rel):
    """cgroup v1: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (quota -1: none)."""
    best = None
    rel = rel.strip("/")
    for ctl in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        base = os.path.join(root, ctl)
        if not os.path.isdir(base):
            continue
        r = rel
        while True:
            d = os.path.join(base, r) if r else base
            try:
                with open(os.path.join(d, "cpu.cfs_quota_us")) as f:
                    quota = int(f.read().strip())
                with open(os.path.join(d, "cpu.cfs_period_us")) as f:
                    period = int(f.read().strip())
                if quota > 0 and period > 0:
                    cores = quota / period
                    best = cores if best is None else min(best, cores)
            except (OSError, ValueError):
                pass
            if not r:
                break
            r = os.path.dirname(r)
    return best


def cgroup_quota_cores(root="/sys/fs/cgroup", self_cgroup="/proc/self/cgroup"):
    """Cores the job's cgroup CPU quota allows (a container's --cpus, a Slurm
    job's cgroup), or None without a quota. ``/proc/self/cgroup`` names the
    job's group: ``0::/path`` on cgroup v2, ``N:cpu,cpuacct:/path`` on v1. A
    container sees its own group as the root, so the root is read too."""
    v2, v1 = None, None
    try:
        with open(self_cgroup) as f:
            for line in f:
                parts = line.strip().split(":", 2)
                if len(parts) != 3:
                    continue
                if parts[0] == "0" and parts[1] == "":
                    v2 = parts[2]
                elif "cpu" in parts[1].split(","):
                    v1 = parts[2]
    except OSError:
        pass
    found = []
    if os.path.exists(os.path.join(root, "cpu.max")) or v2 is not None:
        q = _cgroup_v2_quota(root, v2 or "")
        if q is not None:
            found.append(q)
    q = _cgroup_v1_quota(root, v1 or "")
    if q is not None:
        found.append(q)
    return min(found) if found else None


def usable_cores(root="/sys/fs/cgroup", self_cgroup="/proc/self/cgroup"):
    """The cores this job may really use, and what limited them: the host's
    count, the affinity mask (taskset, a Slurm or container cpuset), or the
    cgroup CPU quota -- whichever is smallest. A quota may be fractional."""
    host = os.cpu_count() or 1
    usable, source = float(host), "cpu_count"
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    if affinity and affinity < usable:
        usable, source = float(affinity), "affinity"
    quota = cgroup_quota_cores(root, self_cgroup)
    if quota is not None and quota < usable:
        usable, source = quota, "cgroup_quota"
    return usable, source


def cpu_bf16(torch, machine=None):
    """Whether this CPU does bf16 arithmetic in hardware, as torch's CPU
    kernels see it: AVX512-BF16 or AMX on x86, BF16 on Arm (oneDNN's bf16
    check). Without it bf16 autocast on the CPU runs converted to and from
    float32 and is slower than float32 (bench/RESULTS.md: x0.01-0.11 on a
    CPU without it, x1.4-2.0 with AMX), so the compute side passes it over.
    None where this torch cannot say (older builds lack the checks).
    TUNELOOP_CPU_BF16=1 or 0 overrides the check (a CPU torch misreads, or
    to see the other side's behaviour)."""
    forced = os.environ.get("TUNELOOP_CPU_BF16", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    import platform
    machine = (machine or platform.machine()).lower()
    try:
        if machine in ("x86_64", "amd64", "i386", "i686"):
            cpu = torch.cpu
            return bool(cpu._is_avx512_bf16_supported() or cpu._is_amx_tile_supported())
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # a private check renamed or missing: unknown, not "no"
        return None


def loader_settings(loader):
    out = {}
    for k in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers",
              "batch_size"):
        v = getattr(loader, k, None)
        if isinstance(v, (int, float, bool, str)) or v is None:
            out[k] = v
    return out


def _since_process_start():
    """Seconds since this process began (its exec, or its fork from the fork
    server), from /proc: where the run's start went before main(). None
    where /proc does not say."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def profile_after_window(job, it, active, activities, torch, profile, schedule,
                         record_function):
    """The profiler's steps taken after a throughput run's timed window, in
    the same process, with the same loader iterator: one warm-up step and
    `active` profiled steps, each a ``data_wait`` and a ``train_step`` range
    as in a profiled run. The window was timed with the profiler off; this
    saves the baseline a process of its own (its start, build() and warm-up)
    for the table and the step's parts. Returns (the profiler, or None where
    it could not start or stop; the steps' figures, with the reason under
    "error" then; the iterator). The window's figures stand either way."""
    figures = {"steps": active, "samples": 0, "wall_s": 0.0, "data_wait_s": 0.0,
               "train_step_s": 0.0}
    try:
        prof = profile(activities=activities,
                       schedule=schedule(wait=0, warmup=1, active=active, repeat=1))
        prof.start()
    except Exception as e:
        figures["error"] = f"the profiler did not start ({type(e).__name__}: {e})"
        return None, figures, it
    try:
        t_begin = None
        for i in range(1 + active):
            if i == 1:  # the profiler's warm-up step is not among its figures
                job.sync()
                t_begin = time.perf_counter()
            t0 = time.perf_counter()
            with record_function("data_wait"):
                try:
                    batch = next(it)
                except StopIteration:
                    it = iter(job.loader)
                    batch = next(it)
            t1 = time.perf_counter()
            with record_function("train_step"):
                job.step(batch)
                job.sync()
            t2 = time.perf_counter()
            if i >= 1:
                figures["samples"] += batch_size_of(batch, torch)
                figures["data_wait_s"] += t1 - t0
                figures["train_step_s"] += t2 - t1
            prof.step()
        figures["wall_s"] = time.perf_counter() - t_begin
        step_total = figures["data_wait_s"] + figures["train_step_s"]
        figures["samples_per_sec"] = figures["samples"] / figures["wall_s"]
        figures["data_wait_share"] = figures["data_wait_s"] / step_total if step_total > 0 else 0.0
    finally:
        try:
            prof.stop()
        except Exception as e:
            figures["error"] = f"the profiler did not stop ({type(e).__name__}: {e})"
            prof = None
    return prof, figures, it


def main():
    t_main = time.perf_counter()
    before_main = _since_process_start()
    # On tuneloop's SIGTERM (a run past timeout_s), print where every thread
    # was stuck before dying: the tail of that output goes into the report.
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", required=True)
    ap.add_argument("--entry", required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--window-s", type=float, default=0.0)
    ap.add_argument("--window-cap-s", type=float, default=0.0)
    ap.add_argument("--window-slow-s", type=float, default=0.0)
    ap.add_argument("--mode", choices=["throughput", "profile"], default="throughput")
    ap.add_argument("--ceiling", action="store_true")
    ap.add_argument("--ceiling-steps", type=int, default=20)
    ap.add_argument("--table-out")
    # A throughput run that profiles after its timed window, in its own
    # process (the baseline's first run; see profile_after_window).
    ap.add_argument("--profile-after", action="store_true")
    ap.add_argument("--distributed-sampler", action="store_true")
    args = ap.parse_args()

    try:
        import torch
        from torch.profiler import ProfilerActivity, profile, record_function, schedule
    except ImportError as e:
        fail("no_torch", f"{sys.executable} cannot import torch ({e}); point [project] python "
             "in tuneloop.toml (or TUNELOOP_PYTHON) at the interpreter your training uses")

    t_torch = time.perf_counter()
    pin_threads(torch)
    dist_env = Distributed.from_env(torch)
    losses = Losses()
    watch_losses(torch, losses)
    build = load_build(args.project, args.entry)
    # Seed before build() and before iter(): the sampler's generator and the
    # workers' base seed come from the default generator, so the first batches
    # are the same for every DataLoader setting that should not change data.
    seed_all(torch)
    try:
        job = Job(build(), torch)
    except SystemExit:
        raise
    except Exception as e:
        fail("build_failed", f"build() raised {type(e).__name__}: {e}\n"
             f"{traceback.format_exc(limit=6)}")
    t_built = time.perf_counter()

    if dist_env is not None:
        dist_env.setup(job, args.distributed_sampler)

    seed_all(torch)
    import torch.utils.data.dataloader as dataloader_module
    watch_indices(dataloader_module)
    it = iter(job.loader)
    # A worker's first batches cost more than its later ones: with many
    # workers a fixed warm-up times them cold and favours few (as in command
    # mode, tuneloop_instrument.warmup_for; measured in bench/RESULTS.md).
    args.warmup = warmup_for(job.loader, args.warmup)
    epochs = 1
    epoch_starts_timed = 0
    identity = DataIdentity()
    total_steps = args.warmup + args.steps
    seen = 0
    data_wait = 0.0
    train_step = 0.0
    batch_size = None
    batch_bytes = None
    first_batch = None

    profiling = args.mode == "profile"
    activities = [ProfilerActivity.CPU]
    if job.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    active = max(1, min(args.steps, 10))
    ctx = (profile(activities=activities,
                   schedule=schedule(skip_first=args.warmup, wait=0, warmup=1,
                                     active=active, repeat=1))
           if profiling else contextlib.nullcontext())
    job.sync()
    t_start = None
    t_first_batch = None
    loader_cpu = LoaderCpu()
    # Every thread of the workers: what the CPU limit needs (the agent's
    # loader model was calibrated on the main threads' figure above).
    loader_threads_cpu = LoaderCpu(all_threads=True)
    main_cpu_start = None
    busy_start = None
    step_waits = []  # each timed step's data_wait: steady waiting, or a few long stalls?
    # Each timed epoch start: (wait for its first batch, machine CPU busy meanwhile).
    epoch_fills = []
    fetch_cpu = 0.0  # this thread's CPU inside next(): the loading itself without workers,
    # receiving a batch from a worker with them
    # The window by time: past `steps`, whole stretches of `steps` more
    # until `--window-s` seconds are timed (window_stretches). Not while
    # profiling (the profiler's schedule is set), nor across ranks, whose
    # collectives need every rank to take the same steps.
    lengthen = args.window_s > 0 and not profiling and dist_env is None
    stretches = 1
    # A window past `--window-cap-s` ends at the step under way (window_cut);
    # not while profiling, nor across ranks, for the same reasons.
    cap_s = args.window_cap_s if not profiling and dist_env is None else 0.0
    cut = False
    # A slow first stretch ends past `--window-slow-s` (window_slow); not
    # while profiling or across ranks, for the same reasons.
    slow_s = args.window_slow_s if lengthen else 0.0
    by_time = False
    # The profiled run ends once the profiler's steps are taken (its warm-up
    # step and `active` steps), with the losses and the data check's batches
    # in: its table, its step's parts and its first batches are what
    # tuneloop reads of it, and the rest of `steps` would only time a rate
    # under the profiler that no decision uses (profile_only). Not across
    # ranks, for the same reason as above.
    profile_end = args.warmup + 1 + active if profiling and dist_env is None else None
    profile_only = False
    with ctx as prof:
        i = -1
        while True:
            i += 1
            if not (cut or by_time):
                if window_cut(t_start, cap_s, args.window_s, i - args.warmup, args.steps,
                              losses, identity):
                    total_steps = i
                    cut = True
                elif window_slow(t_start, slow_s, i - args.warmup, args.steps, losses, identity):
                    total_steps = i
                    by_time = True
            if profile_taken(profile_end, i, total_steps, losses, identity):
                total_steps = i
                profile_only = True
            if i == total_steps:
                ended = cut or by_time or profile_only
                if ended or not (lengthen and window_short(t_start, args.window_s, stretches)):
                    break
                stretches += 1
                total_steps += args.steps
            if i == args.warmup:
                job.sync()
                loader_cpu.begin(it)
                loader_threads_cpu.begin(it)
                main_cpu_start = time.process_time()
                busy_start = _machine_busy_s()
                t_start = time.perf_counter()
            c0 = time.thread_time()
            t0 = time.perf_counter()
            fill = None
            with record_function("data_wait"):
                try:
                    batch = next(it)
                except StopIteration:
                    # A new epoch: worker start-up is part of the cost.
                    fill = (time.perf_counter(), _machine_busy_s())
                    it = iter(job.loader)
                    epochs += 1
                    epoch_starts_timed += i >= args.warmup
                    batch = next(it)
            t1 = time.perf_counter()
            if t_first_batch is None:
                t_first_batch = t1
            if fill is not None and i >= args.warmup:
                epoch_fills.append(_epoch_fill(fill, t1))
            c1 = time.thread_time()
            with record_function("train_step"):
                job.step(batch)
                job.sync()
            t2 = time.perf_counter()
            identity.add(batch, indices_of(it), torch)
            if first_batch is None and args.ceiling:
                first_batch = batch
            bs = batch_size_of(batch, torch)
            if batch_size is None:
                batch_size = bs
                batch_bytes = batch_bytes_of(batch, torch)
            if i >= args.warmup:
                seen += bs
                data_wait += t1 - t0
                step_waits.append(t1 - t0)
                fetch_cpu += c1 - c0
                train_step += t2 - t1
            if profiling:
                prof.step()
        job.sync()
    t_end = time.perf_counter()
    wall = t_end - (t_start if t_start is not None else t_end)
    main_cpu = time.process_time() - main_cpu_start if main_cpu_start is not None else None
    busy_end = _machine_busy_s()
    machine_busy = (busy_end - busy_start
                    if None not in (main_cpu_start, busy_start, busy_end)
                    else None)
    workers = getattr(job.loader, "num_workers", 0) or 0
    # The workers' CPU before their memory: reading every worker's smaps
    # takes time the timed steps do not include, and the workers run on.
    worker_threads_cpu = None
    if workers > 0:
        worker_cpu = loader_cpu.end(it)
        worker_threads_cpu = loader_threads_cpu.end(it)
    else:
        worker_cpu = fetch_cpu if main_cpu is not None else None
        if main_cpu is not None:
            main_cpu = max(0.0, main_cpu - fetch_cpu)
    # The workers' memory while they are alive, and what the machine has left.
    live_workers, workers_rss, workers_pss = workers_memory(it)
    main_rss, _ = _proc_memory(os.getpid())
    after = None
    if args.profile_after and not profiling and dist_env is None:
        prof, after, it = profile_after_window(job, it, active, activities, torch, profile,
                                               schedule, record_function)
        profiling = prof is not None
    del it  # shut the workers down before the ceiling run

    # On CUDA the host's time says little of the device's: no parts there.
    parts = step_parts(prof) if profiling and job.device.type == "cpu" else None
    if profiling and args.table_out:
        # The table is an extra: a profiler that cannot tabulate leaves its
        # reason next to it (tuneloop reports "profiler table unavailable")
        # and the figures stand.
        try:
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
            with open(args.table_out, "w") as f:
                f.write(table)
        except Exception as e:
            with open(args.table_out + ".error", "w") as f:
                f.write(f"torch.profiler gave no table ({type(e).__name__}: {e})")
    elif after is not None and after.get("error") and args.table_out:
        with open(args.table_out + ".error", "w") as f:
            f.write(after["error"])

    ceiling_sps = None
    if args.ceiling and first_batch is not None:
        on_device = job.to_device(first_batch)
        for _ in range(3):
            job.step(on_device)
        job.sync()
        c0 = time.perf_counter()
        for _ in range(args.ceiling_steps):
            job.step(on_device)
        job.sync()
        c_wall = time.perf_counter() - c0
        ceiling_sps = batch_size_of(first_batch, torch) * args.ceiling_steps / c_wall

    step_total = data_wait + train_step
    cores, cores_source = usable_cores()
    data_identity, fingerprint = identity.result()
    result = {
        "samples_per_sec": seen / wall if wall > 0 else 0.0,
        "steps": total_steps - args.warmup,
        "window_stretches": stretches,
        "window_cut": cut,
        "window_by_time": by_time,
        "profile_only": profile_only,
        "stretch_steps": args.steps,
        "warmup_steps": args.warmup,
        "batch_size": batch_size,
        "batch_bytes": batch_bytes,
        "samples": seen,
        "wall_s": wall,
        "data_wait_s": data_wait,
        "train_step_s": train_step,
        "data_wait_share": data_wait / step_total if step_total > 0 else 0.0,
        "epochs": epochs,
        "epoch_starts_timed": epoch_starts_timed,
        "loader_cpu_s": worker_cpu,
        "loader_threads_cpu_s": worker_threads_cpu if workers > 0 else worker_cpu,
        "main_cpu_s": main_cpu,
        "fetch_cpu_s": fetch_cpu if main_cpu is not None else None,
        "data_wait_step_median_s": statistics.median(step_waits) if step_waits else None,
        "machine_busy_s": machine_busy,
        "batches_per_epoch": batches_per_epoch(job.loader),
        **epoch_fill_figures(epoch_fills),
        "device": str(job.device),
        "torch_version": torch.__version__,
        "cuda_available": bool(torch.cuda.is_available()),
        "cpu_count": os.cpu_count(),
        "usable_cores": cores,
        "cpu_bf16": cpu_bf16(torch),
        "live_workers": live_workers,
        "workers_rss_bytes": workers_rss,
        "workers_pss_bytes": workers_pss,
        "main_rss_bytes": main_rss,
        "mem_available_bytes": mem_available_bytes(),
        "cores_limited_by": cores_source,
        "fingerprint": fingerprint,
        "fingerprint_batches": identity.batches,
        "data_identity": data_identity,
        "losses": losses.values,
        "torch_threads": torch_threads(torch),
        "ceiling_sps": ceiling_sps,
        "loader": loader_settings(job.loader),
        "world_size": dist_env.world if dist_env is not None else 1,
        "profiled": profiling and after is None,
        "step_parts": parts if after is None else None,
        # The profile taken after the window (--profile-after): its steps'
        # own figures and the step's parts; the window's are the run's.
        "profile_after": dict(after, step_parts=parts) if after is not None else None,
        # Forked from tuneloop's fork server (torch already imported), or
        # started as a process of its own.
        "process_start": "forked" if os.environ.get("TUNELOOP_FORKED") else "fresh",
        # Where the run's time went around the timed window (seconds): the
        # process's start to main() (the interpreter's start; its fork when
        # forked), `import torch` (none when forked: the server did it), the
        # project's import and build(), the first batch, the rest of the
        # warm-up, and after the window (the workers' memory and shutdown,
        # the ceiling's steps).
        "phases_s": {
            "before_main": before_main,
            "import_torch": t_torch - t_main,
            "build": t_built - t_torch,
            "first_batch": (t_first_batch or t_built) - t_built,
            "warmup": (t_start or t_end) - (t_first_batch or t_built),
            "after_window": time.perf_counter() - t_end,
        },
    }
    if dist_env is not None:
        result = dist_env.combine(result)
        if result is not None:  # rank 0 speaks for all
            print(RESULT + json.dumps(result), flush=True)
        # The measurement is done: skip the interpreter's teardown, where a
        # process group's threads can keep a rank (and torchrun) from exiting.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    print(RESULT + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
    # The result is out: skip the interpreter's teardown (with torch loaded,
    # time each run that measures nothing). Workers still alive (persistent
    # ones) end with the run's process group, which tuneloop, or the fork
    # server for a forked run, kills when the run ends.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
