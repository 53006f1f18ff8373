"""Command mode: a user's own training script, run as ``python train.py``
with the instrumentation entering through sitecustomize, as the binary runs
it (src/bench/command.rs spec). What it leaves in TUNELOOP_RESULT_DIR --
result.<rank>.json, or status.<rank>.json for a command that ended early --
is what the binary reads.

Each run imports torch in a fresh interpreter (seconds), so a few runs are
shared by module-scoped fixtures and each test reads the part it names."""

import json
import os

import pytest
from conftest import run_command

# A training script as users write one. The knobs it reads from TL_* are the
# test's, so one script serves every run.
SCRIPT = '''\
import json
import os
import random
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

E = os.environ
time.sleep(float(E.get("TL_STARTUP_SLEEP", "0")))
# The random state the script starts from, before it draws anything itself.
with open("rng.json", "w") as f:
    json.dump({"random": random.random(), "torch": torch.rand(1).item()}, f)


class Items(Dataset):
    def __init__(self, n, sleep=0.0, scale=1.0):
        self.n, self.sleep, self.scale = n, sleep, scale
        self.calls = 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep:
            time.sleep(self.sleep)
        self.calls += 1
        if self.calls == int(E.get("TL_RAISE_AT", "0")):
            raise RuntimeError("broken item")
        return torch.full((4,), float(i) * self.scale), i % 3


class TrainLoader(DataLoader):
    def __init__(self, dataset, **kwargs):
        super().__init__(dataset, shuffle=True, **kwargs)


workers = int(E.get("TL_WORKERS", "0"))
train = TrainLoader(  # TRAIN LOADER
    Items(int(E.get("TL_N", "64")), float(E.get("TL_ITEM_SLEEP", "0")),
          float(E.get("TL_SCALE", "1"))),
    batch_size=4, num_workers=workers)
val = DataLoader(Items(8, float(E.get("TL_VAL_SLEEP", "0"))), batch_size=4)  # VAL LOADER
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(int(E.get("TL_EPOCHS", "100"))):
    for k, (x, y) in enumerate(train):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(float(E.get("TL_STEP_SLEEP", "0")))
        if k == int(E.get("TL_VAL_AT", "-1")):  # a validation inside the epoch
            with torch.no_grad():
                for vx, _ in val:
                    model(vx)
    with torch.no_grad():
        for x, y in val:
            model(x)
    time.sleep(float(E.get("TL_EPOCH_SLEEP", "0")))  # a checkpoint: no loader's time
print("SCRIPT_DONE")
'''


def env(**kw):
    return {f"TL_{k.upper()}": str(v) for k, v in kw.items()}


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("command")


@pytest.fixture(scope="module")
def command(harness_dir, module_tmp):
    """``command(name, script=SCRIPT, steps=, warmup=, env=)``: the run of
    that name, made once for the whole module."""
    made = {}

    def run(name, script=SCRIPT, **kw):
        if name not in made:
            made[name] = run_command(harness_dir, module_tmp, script, name=name, **kw)
        return made[name]
    run.harness_dir = harness_dir
    return run


@pytest.fixture(scope="module")
def timed(command):
    """The plain run: no workers, 4 x 3 ms of loading a batch, 30 ms a step,
    0.4 s of start-up before the loader is first iterated; three batches an
    epoch; a validation loader that takes 0.48 s after each epoch's second
    batch and after each epoch, and a checkpoint of 0.6 s after each epoch."""
    return command("timed", steps=7, warmup=2,
                   env=env(n=12, item_sleep=0.003, step_sleep=0.03, startup_sleep=0.4,
                           val_sleep=0.06, val_at=1, epoch_sleep=0.6))


@pytest.fixture(scope="module")
def workers(command):
    """The plain run's data with two workers (a knob), warm-up capped at 3."""
    return command("workers", steps=7, warmup=2,
                   env={**env(n=12, workers=2), "TUNELOOP_WARMUP_MAX": "3"})


@pytest.fixture(scope="module")
def scaled(command, module_tmp):
    """The plain run with other values in the items (the data changed),
    profiled, with the ceiling asked for. The profiler's table keeps the 15
    rows of most self CPU time: loading and the step sleep so that the
    data_wait and train_step ranges are among them."""
    return command("scaled", steps=7, warmup=2,
                   env={**env(n=12, scale=2.0, item_sleep=0.003, step_sleep=0.02),
                        "TUNELOOP_CEILING": "1",
                        "TUNELOOP_CEILING_STEPS": "5", "TUNELOOP_MODE": "profile",
                        "TUNELOOP_TABLE_OUT": str(module_tmp / "table.txt")})


def test_ends_the_command_after_the_window(timed):
    assert timed.rc == 0, timed.stderr
    assert "SCRIPT_DONE" not in timed.stdout  # os._exit once measured
    assert timed.json("status") is None


def test_counts_steps_and_samples(timed):
    r = timed.result
    assert r["mode"] == "command"
    assert (r["steps"], r["warmup_steps"], r["batch_size"]) == (7, 2, 4)
    assert r["samples"] == 28
    assert r["samples_per_sec"] == pytest.approx(28 / r["wall_s"])


def test_splits_data_wait_from_the_step(timed):
    r = timed.result
    assert r["data_wait_s"] >= 7 * 4 * 0.003
    assert r["train_step_s"] >= 7 * 0.03
    assert r["wall_s"] == pytest.approx(r["data_wait_s"] + r["train_step_s"])
    assert 0.05 < r["data_wait_share"] < 0.5


def test_startup_is_what_ran_before_the_first_iteration(timed):
    r = timed.result
    assert r["startup_s"] >= 0.4
    assert r["startup_s"] < 60


def test_training_loader_found_by_its_backward_passes(timed):
    r = timed.result
    # A subclass built through super().__init__: its site is the line that
    # built it, not the subclass's own __init__.
    assert r["call_site"] == timed.line_of("# TRAIN LOADER")
    sites = {d["site"]: d for d in r["loaders"]}
    assert sites[timed.line_of("# TRAIN LOADER")]["training"] is True
    assert r["loader"]["num_workers"] == 0 and r["loader"]["batch_size"] == 4


def test_seeds_the_script_at_start(timed, workers):
    import random

    import torch

    random.seed(0)
    torch.manual_seed(0)
    want = {"random": random.random(), "torch": torch.rand(1).item()}
    for run in (timed, workers):
        assert json.loads((run.project / "rng.json").read_text()) == want


def test_losses_recorded(timed):
    assert len(timed.result["losses"]) == 5


def test_epoch_restarts_inside_the_window(timed):
    r = timed.result
    # Warm-up 2 and 7 steps, 3 batches an epoch: the window crosses two epoch ends.
    assert r["epochs"] == 3
    assert r["epoch_starts_timed"] == 2
    assert r["batches_per_epoch"] == 3
    assert r["epoch_fill_s"] is not None


def test_validation_inside_an_epoch_is_cut_out(timed):
    # The window (batches 2 to 8) holds two validations inside an epoch
    # (after batches 4 and 7): 0.96 s inside the timed steps' span, not in
    # their time (about 0.3 s).
    assert timed.result["wall_s"] < 1.0


def test_validation_and_checkpoints_between_epochs_are_cut_out(timed):
    r = timed.result
    # Each epoch end is followed by a validation of 0.48 s and a 0.6 s
    # checkpoint, which are no step of the training loader: 2.2 s inside the
    # window, not in its time (about 0.3 s).
    assert r["wall_s"] < 1.0
    val = [d for d in r["loaders"] if d["site"] == timed.line_of("# VAL LOADER")]
    assert val and val[0]["training"] is False and val[0]["backward"] == 0


def test_workers_keep_the_identity(timed, workers):
    a, b = timed.result, workers.result
    assert a["data_identity"]["items"] is not None
    assert a["data_identity"] == b["data_identity"]
    assert a["fingerprint"] == b["fingerprint"]


def test_warmup_grows_with_workers_within_the_cap(workers):
    r = workers.result
    assert r["warmup_steps"] == 3  # 2 workers want 8, TUNELOOP_WARMUP_MAX allows 3
    assert r["loader"]["num_workers"] == 2


def test_changed_data_changes_the_bytes(timed, scaled):
    a, b = timed.result["data_identity"], scaled.result["data_identity"]
    assert a["bytes"] != b["bytes"]
    assert (a["items"], a["order"], a["structure"]) == (b["items"], b["order"], b["structure"])


def test_ceiling_replays_the_first_batch(scaled):
    r = scaled.result
    assert scaled.rc == 0
    assert r["ceiling_sps"] is not None and r["ceiling_sps"] > 0


def test_short_command_leaves_its_status(command):
    # One epoch of 3 batches: fewer than warm-up + steps.
    run = command("short", steps=6, warmup=2, env=env(n=12, epochs=1))
    assert run.rc == 0
    assert "SCRIPT_DONE" in run.stdout
    assert run.json("result") is None
    s = run.json("status")
    assert s["finished"] is False
    assert (s["reached"], s["needed"]) == (3, 8)
    assert s["training"] == run.line_of("# TRAIN LOADER")


def test_profiled_run_writes_the_table(scaled, module_tmp):
    assert scaled.result["profiled"] is True
    text = (module_tmp / "table.txt").read_text()
    assert "data_wait" in text and "train_step" in text
    # The step's parts, for the compute side: the script's optimizer step
    # is a share of its step, and it has no convolution.
    parts = scaled.result["step_parts"]
    assert 0 < parts["optimizer"] < 1, parts
    assert parts["convolution"] == 0, parts


def test_an_unprofiled_run_has_no_parts(timed):
    assert timed.result["profiled"] is False
    assert timed.result["step_parts"] is None


def test_profiler_stopped_when_the_command_dies_inside_it(command, module_tmp):
    # The dataset raises inside the profiled steps: the command fails as it
    # would without tuneloop (status 1, its traceback), not with SIGSEGV
    # from a profiler left running at exit, and the table's absence is
    # explained.
    # The 13th item is the first of batch 4 (warm-up 1, 8 profiled steps).
    table = module_tmp / "dies.txt"
    run = command("dies", steps=8, warmup=1,
                  env={**env(raise_at=13), "TUNELOOP_MODE": "profile",
                       "TUNELOOP_TABLE_OUT": str(table)})
    assert run.rc == 1, (run.rc, run.stderr)
    assert "RuntimeError: broken item" in run.stderr
    assert not table.exists()
    assert "ended inside the profiled steps" in (module_tmp / "dies.txt.error").read_text()
    assert run.json("status")["finished"] is False


NO_TORCH = """\
import json
import os
import sys

import sitecustomize

print(os.environ.get("USER_SITE_RAN"), sitecustomize.USERS_OWN, "torch" in sys.modules)
print("plain", json.dumps([1, 2]))
sys.exit(7)
"""


def test_script_without_torch_runs_untouched(command, module_tmp):
    # Nothing is written and nothing said; the user's own sitecustomize
    # (which tuneloop's takes the place of) still runs, its names kept.
    own = module_tmp / "own-site"
    own.mkdir()
    (own / "sitecustomize.py").write_text(
        "import os\nos.environ['USER_SITE_RAN'] = '1'\nUSERS_OWN = 42\n")
    run = command("notorch", script=NO_TORCH,
                  env={"PYTHONPATH": f"{command.harness_dir}{os.pathsep}{own}"})
    assert run.rc == 7, run.stderr
    assert run.stdout.splitlines() == ["1 42 False", "plain [1, 2]"]
    assert run.stderr == ""
    assert list(run.result_dir.iterdir()) == []


def test_shallow_copy_makes_containers_anew(harness_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(harness_dir))
    monkeypatch.delenv("TUNELOOP_RESULT_DIR", raising=False)
    import tuneloop_instrument as T

    t = object()
    batch = {"x": [t, (t,)], "y": t}
    copy = T._shallow_copy(batch)
    assert copy == batch and copy is not batch
    assert copy["x"] is not batch["x"] and copy["x"][0] is t
    copy.pop("y")
    assert "y" in batch


ARMED = """\
import sys

print(getattr(sys, "_tuneloop_armed", False), "tuneloop_instrument" in sys.modules)
"""


def test_armed_only_with_a_result_dir(command):
    armed = command("armed", script=ARMED)
    inert = command("inert", script=ARMED, env={"TUNELOOP_RESULT_DIR": ""})
    assert armed.stdout.split() == ["True", "True"]
    assert inert.stdout.split() == ["False", "False"]


def test_a_failing_user_sitecustomize_is_reported_and_the_command_runs(command, module_tmp):
    own = module_tmp / "bad-site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("raise ValueError('broken start-up')\n")
    run = command("badsite", script=ARMED,
                  env={"PYTHONPATH": f"{command.harness_dir}{os.pathsep}{own}"})
    assert run.rc == 0
    assert "tuneloop: your sitecustomize raised ValueError: broken start-up" in run.stderr
    assert run.stdout.split() == ["True", "True"]


NUMPY = """\
import numpy as np

print(repr(np.random.rand()))
"""


def test_numpy_seeded_when_the_script_imports_it(command):
    import numpy as np

    np.random.seed(0)
    want = repr(np.random.rand())
    runs = [command(f"numpy{k}", script=NUMPY) for k in range(2)]
    assert [r.stdout.strip() for r in runs] == [want, want]


@pytest.fixture(scope="module")
def lengthened(command):
    """Long epochs (400 batches), 10 ms a step, 5 steps a stretch and a
    window of at least 0.6 s: more than one stretch, within the epoch."""
    return command("lengthened", steps=5, warmup=2,
                   env={**env(n=1600, step_sleep=0.01, epochs=1), "TUNELOOP_WINDOW_S": "0.6"})


def test_window_by_time_lengthens_within_the_epoch(lengthened):
    r = lengthened.result
    assert r["window_stretches"] >= 2
    assert r["window_cut"] is False
    assert r["steps"] == 5 * r["window_stretches"]
    assert r["samples"] == 4 * r["steps"]
    assert r["data_wait_s"] + r["train_step_s"] >= 0.6


def test_window_by_time_never_crosses_an_epoch_end_it_cannot_see(command):
    # Epochs of 16 batches and a window that would want 40 steps: the
    # window stops at a stretch that fits the epoch under way, and the
    # run ends with its result (not a status of a command that ended short).
    c = command("epoch_bound", steps=4, warmup=2,
                env={**env(n=64, step_sleep=0.01, epochs=1), "TUNELOOP_WINDOW_S": "5"})
    r = c.result
    assert c.json("status") is None
    assert r["steps"] == 4 * r["window_stretches"]
    assert 2 + r["steps"] + 1 <= 16  # warm-up, the timed steps, the closing request
    assert r["window_stretches"] == 3


def test_window_by_time_within_the_known_command_batches(command):
    # With the command's length known (20 batches over 5 epochs of 4),
    # stretches go on across epochs but leave the closing request inside it.
    c = command("command_bound", steps=3, warmup=2,
                env={**env(n=16, step_sleep=0.01, epochs=5), "TUNELOOP_WINDOW_S": "5",
                     "TUNELOOP_COMMAND_BATCHES": "20"})
    r = c.result
    assert r["window_stretches"] == 5  # 2 + 15 timed + 1 = 18 <= 20; one more is 21
    assert r["steps"] == 15


def test_a_window_past_its_cap_ends_with_the_steps_it_timed(command):
    # Long epochs, 20 ms a step, 40 steps asked (0.8 s): TUNELOOP_WINDOW_CAP_S
    # (a candidate's run, set by tuneloop) ends the window at about 0.2 s,
    # and the command ends with that window's result.
    c = command("capped", steps=40, warmup=2,
                env={**env(n=1600, step_sleep=0.02, epochs=1), "TUNELOOP_WINDOW_CAP_S": "0.2"})
    r = c.result
    assert c.rc == 0, c.stderr
    assert r["window_cut"] is True
    assert 3 <= r["steps"] < 40, r["steps"]
    assert r["samples"] == 4 * r["steps"]
    assert 0.2 <= r["data_wait_s"] + r["train_step_s"] < 0.5
    assert len(r["losses"]) == 5


def test_a_slow_first_stretch_ends_by_time_and_the_command_ends_with_its_result(command):
    # Long epochs, 20 ms a step, 40 steps asked (0.8 s): TUNELOOP_WINDOW_SLOW_S
    # (twice the window, set by tuneloop) ends the window at about 0.2 s.
    c = command("slow", steps=40, warmup=2,
                env={**env(n=1600, step_sleep=0.02, epochs=1), "TUNELOOP_WINDOW_S": "0.1",
                     "TUNELOOP_WINDOW_SLOW_S": "0.2"})
    r = c.result
    assert c.rc == 0, c.stderr
    assert r["window_by_time"] is True and r["window_cut"] is False
    assert 3 <= r["steps"] < 40, r["steps"]
    assert (r["stretch_steps"], r["window_stretches"]) == (40, 1)
    assert r["samples"] == 4 * r["steps"]
    assert 0.2 <= r["data_wait_s"] + r["train_step_s"] < 0.5
    assert len(r["losses"]) == 5


def test_a_calibration_run_pins_torchs_threads(command, timed):
    # TUNELOOP_THREADS (the numerics guard's yardstick run): the command runs
    # with torch's intra-op threads at that count, and says so.
    pinned = command("pinned", steps=3, warmup=1, env={**env(n=12), "TUNELOOP_THREADS": "1"})
    assert pinned.rc == 0, pinned.stderr
    assert pinned.result["torch_threads"] == 1
    assert isinstance(timed.result["torch_threads"], int)
