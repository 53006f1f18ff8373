"""Managed mode end to end in this process: the harness's main() on a tiny
project's build(), read back from its TUNELOOP_RESULT line the way the
binary reads it (src/bench/mod.rs parse_managed)."""

import subprocess
import sys

import pytest

STEPS, WARMUP = "--steps", "--warmup"


def test_counts_the_timed_steps_and_samples(run_harness, managed_project):
    out = run_harness(managed_project(batch_size=4), STEPS, "6", WARMUP, "2")
    assert out.code == 0, out.stdout
    r = out.result
    assert (r["steps"], r["warmup_steps"], r["batch_size"]) == (6, 2, 4)
    assert r["samples"] == 24
    assert r["samples_per_sec"] == r["samples"] / r["wall_s"]
    assert r["batch_bytes"] == 4 * 4 * 4 + 4 * 8  # float32 rows, int64 labels
    assert r["loader"] == {"num_workers": 0, "pin_memory": False, "prefetch_factor": None,
                           "persistent_workers": False, "batch_size": 4}
    assert r["profiled"] is False and r["world_size"] == 1 and r["ceiling_sps"] is None


def test_splits_data_wait_from_the_step(run_harness, managed_project):
    # Each batch waits 4 x 5 ms in the dataset; each step sleeps 40 ms.
    project = managed_project(batch_size=4, item_sleep=0.005, step_sleep=0.04)
    r = run_harness(project, STEPS, "5", WARMUP, "1").result
    assert r["data_wait_s"] >= 5 * 4 * 0.005
    assert r["train_step_s"] >= 5 * 0.04
    assert r["data_wait_s"] < r["train_step_s"]
    assert r["data_wait_s"] + r["train_step_s"] <= r["wall_s"] * 1.001
    assert 0.1 < r["data_wait_share"] < 0.5
    assert r["data_wait_step_median_s"] >= 4 * 0.005


def test_warmup_steps_are_not_timed(run_harness, managed_project):
    # The dataset is slow only for its first items (the first two batches,
    # the warm-up): they must not be in the timed data_wait.
    body = '''\
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 40
        def __getitem__(self, i):
            time.sleep(0.1 if i < 4 else 0)
            return torch.zeros(2), 0

    def build():
        return {"loader": DataLoader(Slow(), batch_size=2), "step": lambda b: None}
    '''
    r = run_harness(managed_project(body=body), STEPS, "4", WARMUP, "2").result
    assert r["warmup_steps"] == 2
    assert r["data_wait_s"] < 0.1


def test_epoch_restarts_inside_the_window(run_harness, managed_project):
    # 12 items in batches of 4: 3 batches an epoch. Of the epoch starts at
    # steps 3 and 6 the first is in the warm-up of 4, the second is timed.
    r = run_harness(managed_project(n=12, batch_size=4), STEPS, "5", WARMUP, "4").result
    assert r["batches_per_epoch"] == 3
    assert r["epochs"] == 3
    assert r["epoch_starts_timed"] == 1
    assert r["samples"] == 20
    assert r["epoch_fill_s"] is not None and r["epoch_fill_s"] > 0


def test_many_workers_warm_up_longer(run_harness, managed_project):
    r = run_harness(managed_project(workers=2), STEPS, "3", WARMUP, "1").result
    assert r["warmup_steps"] == 2 * 4  # WARMUP_PER_WORKER a worker
    assert r["live_workers"] == 2
    assert r["loader"]["num_workers"] == 2


def test_losses_of_the_first_steps(run_harness, managed_project):
    r = run_harness(managed_project(), STEPS, "6", WARMUP, "1").result
    assert len(r["losses"]) == 5
    assert all(isinstance(v, float) and v > 0 for v in r["losses"])


def test_same_data_same_fingerprint_whatever_the_workers(run_harness, managed_project):
    a = run_harness(managed_project("a", workers=0), STEPS, "3", WARMUP, "1").result
    b = run_harness(managed_project("b", workers=2), STEPS, "3", WARMUP, "1").result
    c = run_harness(managed_project("c", scale=2.0), STEPS, "3", WARMUP, "1").result
    assert a["data_identity"] == b["data_identity"]
    assert a["fingerprint"] == b["fingerprint"]
    assert a["data_identity"]["items"] is not None
    assert c["data_identity"]["bytes"] != a["data_identity"]["bytes"]
    assert c["data_identity"]["order"] == a["data_identity"]["order"]
    assert c["fingerprint"] != a["fingerprint"]


def test_a_loader_subclass_is_measured(run_harness, managed_project):
    r = run_harness(managed_project(subclass=True), STEPS, "3", WARMUP, "1").result
    assert r["samples"] == 12
    assert r["data_identity"]["items"] is not None  # its indices are seen too


def test_tuple_return(run_harness, managed_project):
    body = '''\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    def build():
        data = TensorDataset(torch.randn(32, 3), torch.randint(0, 2, (32,)))
        model = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), 0.1)
        return DataLoader(data, batch_size=8), model, opt, "cpu"
    '''
    r = run_harness(managed_project(body=body), STEPS, "3", WARMUP, "1").result
    assert r["samples"] == 24 and r["device"] == "cpu"


def test_ceiling_times_the_step_alone(run_harness, managed_project):
    project = managed_project(item_sleep=0.01)
    r = run_harness(project, STEPS, "3", WARMUP, "1", "--ceiling", "--ceiling-steps", "5").result
    # Fed a batch already in memory the step outruns the 40 ms loader.
    assert r["ceiling_sps"] is not None
    assert r["ceiling_sps"] > r["samples_per_sec"]


def test_profile_mode_writes_the_table(run_harness, managed_project, tmp_path):
    table = tmp_path / "table.txt"
    # The table keeps the 15 rows of most self CPU time: the ranges must
    # take time of their own (sleeping inside them counts) to be among them.
    project = managed_project(item_sleep=0.005, step_sleep=0.02)
    out = run_harness(project, STEPS, "3", WARMUP, "1", "--mode", "profile",
                      "--table-out", str(table))
    assert out.result["profiled"] is True
    text = table.read_text()
    assert "data_wait" in text and "train_step" in text


def test_result_line_from_the_harness_file(harness_dir, managed_project):
    # As the binary runs it: `python tuneloop_harness.py --project P --entry M:F ...`.
    project = managed_project(body='''\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    def build():
        print("building")
        data = TensorDataset(torch.randn(16, 2), torch.zeros(16, dtype=torch.long))
        return {"loader": DataLoader(data, batch_size=4), "step": lambda b: None}
    ''')
    p = subprocess.run([sys.executable, str(harness_dir / "tuneloop_harness.py"),
                        "--project", str(project), "--entry", "train:build",
                        "--steps", "3", "--warmup", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "building"
    assert [line for line in lines if line.startswith("TUNELOOP_")] == [lines[-1]]
    assert lines[-1].startswith("TUNELOOP_RESULT {")


def test_ceiling_with_a_namedtuple_batch(run_harness, managed_project):
    # default_collate keeps a dataset's namedtuple: the batch is one, and
    # the ceiling moves it to the device whole.
    body = '''\
    from collections import namedtuple

    import torch
    from torch.utils.data import DataLoader, Dataset

    Sample = namedtuple("Sample", "x y")

    class Items(Dataset):
        def __len__(self):
            return 32

        def __getitem__(self, i):
            return Sample(torch.full((2,), float(i)), i % 2)

    def build():
        seen = []
        return {"loader": DataLoader(Items(), batch_size=4),
                "step": lambda b: seen.append(b.x)}
    '''
    out = run_harness(managed_project(body=body), STEPS, "3", WARMUP, "1", "--ceiling",
                      "--ceiling-steps", "3")
    assert out.code == 0, out.stdout
    assert out.result["ceiling_sps"] > 0


def test_window_by_time_adds_whole_stretches_until_long_enough(run_harness, managed_project):
    # A step of at least 10 ms: 4 steps take about 40 ms, so a 0.5 s window
    # needs more than one stretch of 4, each one whole, until 0.5 s are timed.
    project = managed_project(batch_size=4, step_sleep=0.01)
    r = run_harness(project, STEPS, "4", WARMUP, "1", "--window-s", "0.5").result
    assert r["window_stretches"] >= 2, r
    assert r["steps"] == 4 * r["window_stretches"]
    assert r["samples"] == 4 * r["steps"]
    assert r["wall_s"] >= 0.5


def test_window_by_time_off_or_already_long_enough_keeps_the_steps(run_harness, managed_project):
    project = managed_project(batch_size=4, step_sleep=0.01)
    off = run_harness(project, STEPS, "4", WARMUP, "1").result
    assert (off["steps"], off["window_stretches"]) == (4, 1)
    # 4 steps of 10 ms already pass a 10 ms window.
    met = run_harness(project, STEPS, "4", WARMUP, "1", "--window-s", "0.01").result
    assert (met["steps"], met["window_stretches"]) == (4, 1)


def test_window_by_time_stops_at_the_most_stretches(H, monkeypatch):
    import time
    now = time.perf_counter()
    assert H.window_short(now, 10.0, 1)
    assert not H.window_short(now, 10.0, H.MAX_STRETCHES)
    assert not H.window_short(now - 11.0, 10.0, 1)
    assert not H.window_short(None, 10.0, 1)


def test_a_window_past_its_cap_ends_with_the_rate_of_the_steps_it_timed(
        run_harness, managed_project):
    # 40 steps of 20 ms would take 0.8 s; a cap of 0.2 s ends the window
    # after about 10, once the losses and the data check's batches are in.
    project = managed_project(batch_size=4, step_sleep=0.02)
    r = run_harness(project, STEPS, "40", WARMUP, "1", "--window-cap-s", "0.2").result
    assert r["window_cut"] is True
    assert 4 <= r["steps"] < 40, r["steps"]
    assert 0.2 <= r["wall_s"] < 0.4, r["wall_s"]
    assert r["samples"] == 4 * r["steps"]
    assert r["samples_per_sec"] == pytest.approx(r["samples"] / r["wall_s"])
    assert len(r["losses"]) == 5
    assert r["data_identity"]["batches"] is not None
    # Without a cap, or a cap the window never reaches, every step is timed.
    for extra in ([], ["--window-cap-s", "30"]):
        full = run_harness(project, STEPS, "40", WARMUP, "1", *extra).result
        assert (full["steps"], full["window_cut"]) == (40, False)


class ChecksIn:
    """Stands for both the losses (Losses: n, values) and the data check
    (DataIdentity: full()) of a run whose checks are all in."""
    n = 1

    def __init__(self):
        self.values = [1.0]

    def full(self):
        return True


def test_a_window_is_cut_only_in_its_first_stretch_and_past_window_s(H, monkeypatch):
    import time

    started = time.perf_counter() - 1.0  # a window open for a second
    full = ChecksIn()
    assert H.window_cut(started, 0.5, 0.0, 3, 40, full, full)
    # Past its first `steps` it was as fast as the incumbent: never cut.
    assert not H.window_cut(started, 0.5, 0.0, 40, 40, full, full)
    # Under [bench] window_s, which a window may always take.
    assert not H.window_cut(started, 0.5, 2.0, 3, 40, full, full)
    assert not H.window_cut(started, 0.0, 0.0, 3, 40, full, full)  # no cap
    assert not H.window_cut(started, 0.5, 0.0, 0, 40, full, full)  # nothing timed yet
    full.values = []  # the losses the numerics guard compares not all in
    assert not H.window_cut(started, 0.5, 0.0, 3, 40, full, full)


def test_a_slow_first_stretch_ends_past_the_slow_limit_and_says_so(run_harness, managed_project):
    # 40 steps of 20 ms would take 0.8 s; with a 0.1 s window a slow first
    # stretch ends past 0.2 s (tuneloop passes twice the window), with the
    # rate of the steps it timed and the stretch it was given.
    project = managed_project(batch_size=4, step_sleep=0.02)
    r = run_harness(project, STEPS, "40", WARMUP, "1", "--window-s", "0.1",
                    "--window-slow-s", "0.2").result
    assert r["window_by_time"] is True and r["window_cut"] is False, r
    assert 4 <= r["steps"] < 40, r["steps"]
    assert (r["stretch_steps"], r["window_stretches"]) == (40, 1)
    assert 0.2 <= r["wall_s"] < 0.4, r["wall_s"]
    assert r["samples_per_sec"] == pytest.approx(r["samples"] / r["wall_s"])
    assert len(r["losses"]) == 5
    # No slow limit (tuneloop passes none for a whole epoch, or window_s 0):
    # every step is timed, as when the stretch ends first.
    for extra in ([], ["--window-slow-s", "30"]):
        full = run_harness(project, STEPS, "40", WARMUP, "1", "--window-s", "0.1", *extra).result
        assert (full["steps"], full["window_by_time"]) == (40, False), full


def test_a_slow_window_ends_only_in_its_first_stretch_with_the_checks_in(H):
    import time

    started = time.perf_counter() - 1.0  # a window open for a second
    full = ChecksIn()
    assert H.window_slow(started, 0.5, 3, 40, full, full)
    assert not H.window_slow(started, 2.0, 3, 40, full, full)  # not past the limit yet
    assert not H.window_slow(started, 0.0, 3, 40, full, full)  # no limit
    assert not H.window_slow(started, 0.5, 40, 40, full, full)  # its first stretch is done
    assert not H.window_slow(started, 0.5, 0, 40, full, full)  # nothing timed yet
    full.values = []
    assert not H.window_slow(started, 0.5, 3, 40, full, full)


def test_profiled_run_ends_with_its_profilers_steps_never_by_time(
        run_harness, managed_project, tmp_path):
    # 20 steps asked: the profiler's warm-up step and its 10 active ones are
    # timed, then the window ends with the table written, the losses and the
    # data check's batches in, and the stretch it was given recorded. The
    # slow limit (0.1 s, passed 20 ms steps) never ends a profiled run.
    project = managed_project(batch_size=4, step_sleep=0.02)
    table = tmp_path / "t.txt"
    r = run_harness(project, STEPS, "20", WARMUP, "1", "--window-s", "0.05",
                    "--window-slow-s", "0.1", "--mode", "profile",
                    "--table-out", str(table)).result
    assert (r["profile_only"], r["window_by_time"], r["window_cut"]) == (True, False, False)
    assert (r["steps"], r["stretch_steps"], r["window_stretches"]) == (11, 20, 1)
    assert "train_step" in table.read_text()
    assert len(r["losses"]) == 5 and r["fingerprint"]
    # A throughput run times its steps whole.
    plain = run_harness(project, STEPS, "20", WARMUP, "1").result
    assert (plain["steps"], plain["profile_only"]) == (20, False)


def test_profile_after_the_window_leaves_the_window_unprofiled(
        run_harness, managed_project, tmp_path):
    # The baseline's first run: its 20 steps timed whole with the profiler
    # off, then the profiler's warm-up step and 10 steps after the window,
    # in the same process and with the same iterator. 24 items of 4 a
    # batch: the window ends with the epoch after its warm-up step and 5
    # timed ones, so the profiler's 11 batches cross two epochs' ends.
    project = managed_project(n=24, batch_size=4, step_sleep=0.02)
    table = tmp_path / "t.txt"
    r = run_harness(project, STEPS, "5", WARMUP, "1", "--ceiling", "--profile-after",
                    "--table-out", str(table)).result
    assert (r["profiled"], r["profile_only"], r["step_parts"]) == (False, False, None)
    assert (r["steps"], r["samples"], r["epoch_starts_timed"]) == (5, 20, 0)
    assert r["ceiling_sps"] > 0
    after = r["profile_after"]
    assert (after["steps"], after["samples"]) == (5, 20)  # min(steps, 10) profiled
    assert after["train_step_s"] >= 5 * 0.02
    assert after["data_wait_s"] + after["train_step_s"] <= after["wall_s"]
    assert after["samples_per_sec"] == after["samples"] / after["wall_s"]
    assert set(after["step_parts"]) == {"optimizer", "convolution"}
    assert "train_step" in table.read_text()
    # 10 profiled steps where the window has more.
    r = run_harness(project, STEPS, "12", WARMUP, "1", "--profile-after",
                    "--table-out", str(tmp_path / "t2.txt")).result
    assert (r["steps"], r["profile_after"]["steps"], r["profile_after"]["samples"]) == (12, 10, 40)
    # Without the flag a throughput run takes no profiler steps.
    assert run_harness(project, STEPS, "5", WARMUP, "1").result["profile_after"] is None


def test_a_profiled_run_ends_only_past_its_profile_with_the_checks_in(H):
    full = ChecksIn()
    assert H.profile_taken(12, 12, 41, full, full)
    assert H.profile_taken(12, 13, 41, full, full)  # checks in late: ends then
    assert not H.profile_taken(12, 11, 41, full, full)  # the profiler's last step to come
    assert not H.profile_taken(12, 12, 12, full, full)  # the planned steps end there anyway
    assert not H.profile_taken(None, 20, 41, full, full)  # not a profiled run
    full.values = []
    assert not H.profile_taken(12, 12, 41, full, full)


def test_profiled_run_is_never_lengthened(run_harness, managed_project, tmp_path):
    project = managed_project(batch_size=4, step_sleep=0.01)
    r = run_harness(project, STEPS, "4", WARMUP, "1", "--window-s", "0.5",
                    "--mode", "profile", "--table-out", str(tmp_path / "t.txt")).result
    assert (r["steps"], r["window_stretches"]) == (4, 1)


def test_reports_where_the_time_around_the_window_went(run_harness, managed_project):
    import time

    # build() takes 0.2 s; each item 5 ms, so the first batch (4 items) 20 ms.
    body = '''\
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 400
        def __getitem__(self, i):
            time.sleep(0.005)
            return torch.zeros(2), 0

    def build():
        time.sleep(0.2)
        return {"loader": DataLoader(Slow(), batch_size=4), "step": lambda b: None}
    '''
    t0 = time.perf_counter()
    r = run_harness(managed_project(body=body), STEPS, "4", WARMUP, "3").result
    elapsed = time.perf_counter() - t0
    p = r["phases_s"]
    assert set(p) == {"before_main", "import_torch", "build", "first_batch", "warmup",
                      "after_window"}
    assert r["process_start"] == "fresh"
    assert p["build"] >= 0.2
    assert p["first_batch"] >= 4 * 0.005
    # Two more warm-up batches after the first.
    assert p["warmup"] >= 2 * 4 * 0.005
    assert all(v >= 0 for v in p.values())
    # In this process before_main is the test process's age; the rest and
    # the window fit in the call.
    inside = sum(v for k, v in p.items() if k != "before_main") + r["wall_s"]
    assert inside <= elapsed


def test_a_calibration_run_pins_torchs_threads_whatever_the_script_sets(
    run_harness, managed_project, torch, monkeypatch
):
    # The numerics guard's yardstick: TUNELOOP_THREADS=1 is the baseline with
    # one thread though the project asks for two, at import and in build().
    body = """\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(2)

    def build():
        torch.set_num_threads(2)
        ds = TensorDataset(torch.zeros(16, 2), torch.zeros(16))
        return {"loader": DataLoader(ds, batch_size=2), "step": lambda b: None}
    """
    set_threads, threads = torch.set_num_threads, torch.get_num_threads()
    # What the pinned run replaces in this process is put back after the test.
    monkeypatch.setattr(torch, "set_num_threads", set_threads)
    monkeypatch.setattr(torch, "_tl_threads_pinned", False, raising=False)
    monkeypatch.delenv("TUNELOOP_THREADS", raising=False)
    try:
        plain = run_harness(managed_project("plain", body=body), STEPS, "2", WARMUP, "1")
        assert plain.result["torch_threads"] == 2, plain.stdout
        monkeypatch.setenv("TUNELOOP_THREADS", "1")
        pinned = run_harness(managed_project("pinned", body=body), STEPS, "2", WARMUP, "1")
        assert pinned.result["torch_threads"] == 1, pinned.stdout
    finally:
        set_threads(threads)


def test_a_pinned_processs_workers_still_set_their_own_threads(H, torch, monkeypatch):
    # DataLoader workers call torch.set_num_threads(1) when they start; the
    # pin must not swallow that call in them, only in the pinned process.
    threads = torch.get_num_threads()
    monkeypatch.setattr(torch, "set_num_threads", torch.set_num_threads)
    monkeypatch.setattr(torch, "_tl_threads_pinned", False, raising=False)
    monkeypatch.setenv("TUNELOOP_THREADS", "2")
    try:
        H.pin_threads(torch)
        torch.set_num_threads(1)
        assert torch.get_num_threads() == 2
        from torch.utils.data import DataLoader, Dataset

        class Threads(Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                return torch.get_num_threads()

        seen = {int(t) for b in DataLoader(Threads(), batch_size=2, num_workers=2) for t in b}
        assert seen == {1}
        assert torch.get_num_threads() == 2
    finally:
        monkeypatch.undo()
        torch.set_num_threads(threads)


PARTS_TRAIN = '''\
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Blurred(Dataset):
    """Items blurred by a convolution in the loading (no workers: in the
    training process, between the steps)."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        img = torch.rand(1, 3, 16, 16)
        img = nn.functional.conv2d(img, torch.full((3, 1, 3, 3), 1 / 9), padding=1, groups=3)
        return img[0], i % 3


def build():
    loader = DataLoader(Blurred(), batch_size=8, num_workers=0)
    if {conv_model}:
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(),
                              nn.Linear(8 * 14 * 14, 3))
    else:
        model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 3))
    opt = torch.optim.AdamW(model.parameters())
    return {{"loader": loader, "model": model, "optimizer": opt}}
'''


def test_profiled_run_weighs_the_steps_parts(run_harness, managed_project, tmp_path):
    # What the compute knobs act on, as shares of the step: the optimizer's
    # step (fused, foreach) and the model's convolutions (channels_last).
    # The loading's convolution is not the model's.
    args = (STEPS, "4", WARMUP, "1", "--mode", "profile", "--table-out", str(tmp_path / "t.txt"))
    conv = run_harness(managed_project("conv", body=PARTS_TRAIN.format(conv_model=True)), *args)
    parts = conv.result["step_parts"]
    assert 0 < parts["convolution"] < 1, parts
    assert 0 < parts["optimizer"] < 1, parts
    assert parts["convolution"] + parts["optimizer"] <= 1
    flat = run_harness(managed_project("flat", body=PARTS_TRAIN.format(conv_model=False)), *args)
    assert flat.result["step_parts"]["convolution"] == 0, flat.result["step_parts"]
    assert flat.result["step_parts"]["optimizer"] > 0
    # A throughput run has no profiler, and no parts.
    plain = run_harness(managed_project("plain", body=PARTS_TRAIN.format(conv_model=True)),
                        STEPS, "4", WARMUP, "1")
    assert plain.result["step_parts"] is None
