"""The harness's small figures, shared by both modes: batch size and bytes,
the first losses, warm-up per worker, the usable cores (cgroup quota,
affinity) and the epoch-fill medians."""

import os

import pytest


def test_batch_size_and_bytes_of_nested_batches(H, torch):
    batch = {"image": torch.zeros(8, 3, dtype=torch.uint8), "meta": [torch.zeros(8), "x"]}
    assert H.batch_size_of(batch, torch) == 8
    assert H.batch_bytes_of(batch, torch) == 8 * 3 + 8 * 4
    assert H.batch_size_of((torch.tensor(5.0),), torch) == 1
    assert H.batch_size_of("text", torch) == 1


def test_losses_keep_the_first_n_and_mark_non_finite(H, torch):
    losses = H.Losses(n=3)
    for v in (2.0, float("nan"), float("inf"), 1.0):
        losses.add((torch.tensor(v),), {}, torch)
    assert losses.values == [2.0, None, None]
    # A vector passed to backward is not a loss.
    losses = H.Losses(n=3)
    losses.add((torch.ones(2),), {}, torch)
    losses.add((), {"tensors": [torch.tensor(0.5)]}, torch)
    assert losses.values == [0.5]


def test_watch_losses_sees_loss_backward(H, torch, monkeypatch):
    monkeypatch.setattr(torch.autograd, "backward", torch.autograd.backward)
    losses = H.Losses(n=2)
    H.watch_losses(torch, losses)
    w = torch.ones(1, requires_grad=True)
    for k in range(3):
        ((w * (k + 1)).sum()).backward()
    assert losses.values == [1.0, 2.0]
    assert w.grad.item() == 6.0  # the real backward still ran


@pytest.mark.parametrize("workers, prefetch, warmup, want", [
    (0, None, 5, 5),
    (2, 2, 5, 8),
    (4, 8, 5, 32),
    (1, 2, 10, 10),
])
def test_warmup_for(H, workers, prefetch, warmup, want):
    class Loader:
        num_workers = workers
        prefetch_factor = prefetch

    assert H.warmup_for(Loader(), warmup) == want


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_tightest_up_the_tree(H, tmp_path):
    root = tmp_path / "cg"
    write(root / "cpu.max", "max 100000\n")
    write(root / "job" / "cpu.max", "300000 100000\n")
    write(root / "job" / "step" / "cpu.max", "max 100000\n")
    selfc = tmp_path / "self"
    write(selfc, "0::/job/step\n")
    assert H.cgroup_quota_cores(str(root), str(selfc)) == 3.0
    write(root / "cpu.max", "150000 100000\n")  # the parent binds
    assert H.cgroup_quota_cores(str(root), str(selfc)) == 1.5


def test_cgroup_v1_quota(H, tmp_path):
    root = tmp_path / "cg"
    write(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    write(root / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    write(root / "cpu,cpuacct" / "slurm" / "cpu.cfs_quota_us", "250000\n")
    write(root / "cpu,cpuacct" / "slurm" / "cpu.cfs_period_us", "100000\n")
    selfc = tmp_path / "self"
    write(selfc, "4:cpu,cpuacct:/slurm\n")
    assert H.cgroup_quota_cores(str(root), str(selfc)) == 2.5


def test_no_quota(H, tmp_path):
    selfc = tmp_path / "self"
    write(selfc, "0::/\n")
    write(tmp_path / "cg" / "cpu.max", "max 100000\n")
    assert H.cgroup_quota_cores(str(tmp_path / "cg"), str(selfc)) is None


def test_usable_cores_takes_the_smallest_limit(H, tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    selfc = tmp_path / "self"
    write(selfc, "0::/\n")
    write(tmp_path / "cg" / "cpu.max", "max 100000\n")
    assert H.usable_cores(str(tmp_path / "cg"), str(selfc)) == (4.0, "affinity")
    write(tmp_path / "cg" / "cpu.max", "50000 100000\n")
    assert H.usable_cores(str(tmp_path / "cg"), str(selfc)) == (0.5, "cgroup_quota")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    write(tmp_path / "cg" / "cpu.max", "max 100000\n")
    assert H.usable_cores(str(tmp_path / "cg"), str(selfc)) == (16.0, "cpu_count")


def test_epoch_fill_figures_are_medians(H):
    assert H.epoch_fill_figures([]) == {"epoch_fill_s": None, "epoch_fill_busy_s": None}
    fills = [(0.1, 1.0), (0.3, None), (0.2, 3.0)]
    assert H.epoch_fill_figures(fills) == {"epoch_fill_s": 0.2, "epoch_fill_busy_s": 2.0}


def test_batches_per_epoch(H, torch):
    from torch.utils.data import DataLoader, IterableDataset

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(10))

    assert H.batches_per_epoch(DataLoader(list(range(10)), batch_size=4)) == 3
    assert H.batches_per_epoch(DataLoader(Stream(), batch_size=4)) is None


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def test_cpu_bf16_agrees_with_the_cpus_own_flags(H, torch, monkeypatch):
    import platform
    monkeypatch.delenv("TUNELOOP_CPU_BF16", raising=False)
    flags = _cpu_flags()
    if flags is None or platform.machine() != "x86_64":
        pytest.skip("no x86 /proc/cpuinfo flags to compare with")
    assert H.cpu_bf16(torch) == bool({"avx512_bf16", "amx_bf16"} & flags)


def test_cpu_bf16_unknown_where_torch_lacks_the_checks(H):
    class Cpu:
        @staticmethod
        def _is_avx512_bf16_supported():
            return False

        @staticmethod
        def _is_amx_tile_supported():
            return True

    class Torch:
        cpu = Cpu

    assert H.cpu_bf16(Torch, machine="x86_64") is True  # AMX alone is enough
    Cpu._is_amx_tile_supported = staticmethod(lambda: False)
    assert H.cpu_bf16(Torch, machine="x86_64") is False
    del Cpu._is_amx_tile_supported
    assert H.cpu_bf16(Torch, machine="x86_64") is None
    # On Arm the question goes to oneDNN's bf16 check, which this stand-in lacks.
    assert H.cpu_bf16(Torch, machine="aarch64") is None


def test_cpu_bf16_can_be_forced_either_way(H, torch, monkeypatch):
    monkeypatch.setenv("TUNELOOP_CPU_BF16", "1")
    assert H.cpu_bf16(torch) is True
    monkeypatch.setenv("TUNELOOP_CPU_BF16", "0")
    assert H.cpu_bf16(torch) is False
    # Anything else leaves the question to torch.
    monkeypatch.setenv("TUNELOOP_CPU_BF16", "yes")
    monkeypatch.delenv("TUNELOOP_CPU_BF16")
    unforced = H.cpu_bf16(torch)
    monkeypatch.setenv("TUNELOOP_CPU_BF16", "yes")
    assert H.cpu_bf16(torch) == unforced


class _Worker:
    def __init__(self, pid):
        self.pid = pid


@pytest.mark.parametrize("cores", [1, 2, 8])
def test_workers_memory_reads_each_worker_once_on_every_lane(H, monkeypatch, cores):
    read = []
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(H, "_proc_memory", lambda pid: (read.append(pid), (pid, 10 * pid))[1])

    class It:
        _workers = [_Worker(p) for p in (1, 2, 3, 4, 5)]

    assert H.workers_memory(It()) == (5, 15, 150)
    assert sorted(read) == [1, 2, 3, 4, 5]


def test_workers_memory_sums_are_none_when_a_figure_is_missing(H, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(H, "_proc_memory", lambda pid: (pid, None if pid == 2 else pid))

    class It:
        _workers = [_Worker(p) for p in (1, 2, 3)]

    assert H.workers_memory(It()) == (3, 6, None)
    assert H.workers_memory(object()) == (0, None, None)


def test_workers_memory_of_live_workers(H, torch):
    # Real workers: their count, and figures as /proc gives them one by one.
    from torch.utils.data import DataLoader

    loader = DataLoader(list(range(64)), batch_size=4, num_workers=3, persistent_workers=True)
    it = iter(loader)
    next(it)
    count, rss, pss = H.workers_memory(it)
    one_by_one = [H._proc_memory(w.pid) for w in it._workers]
    assert count == 3
    assert rss > 0 and pss > 0
    # The same processes: within a tenth of the figures read one by one.
    assert abs(rss - sum(r for r, _ in one_by_one)) < 0.1 * rss
    assert abs(pss - sum(p for _, p in one_by_one)) < 0.1 * pss
    it._shutdown_workers()
