"""Fixtures for the tests of tuneloop's Python side: the managed-mode harness
(src/bench/harness.py) and the command-mode instrumentation
(src/bench/instrument/).

The files are laid out as the binary lays them out (src/bench/mod.rs,
src/bench/command.rs): the harness as ``tuneloop_harness.py`` beside
``sitecustomize.py`` and ``tuneloop_instrument.py`` in one folder. The
harness's functions and its ``main()`` run in this process (``main`` reads
``sys.argv`` as the binary's command line sets it); a user's command runs
as a subprocess with that folder first on PYTHONPATH and the TUNELOOP_*
variables the binary sets, because that is how command mode enters it.
Projects and scripts are tiny real PyTorch programs written to tmp_path.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "src" / "bench"
# What the binary writes into the run folder, under these names.
OWN_FILES = {
    "tuneloop_harness.py": BENCH / "harness.py",
    "sitecustomize.py": BENCH / "instrument" / "sitecustomize.py",
    "tuneloop_instrument.py": BENCH / "instrument" / "tuneloop_instrument.py",
}


@pytest.fixture(scope="session")
def harness_dir(tmp_path_factory):
    """The run folder's harness directory, as the binary fills it."""
    d = tmp_path_factory.mktemp("harness")
    for name, src in OWN_FILES.items():
        shutil.copyfile(src, d / name)
    return d


@pytest.fixture(scope="session")
def H(harness_dir):
    """The harness module, imported from the harness directory under the
    name the instrument imports it by (no bytecode lands in src/)."""
    path = harness_dir / "tuneloop_harness.py"
    spec = importlib.util.spec_from_file_location("tuneloop_harness", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def torch():
    import torch

    return torch


# -- managed mode: a project with build() ---------------------------------

MANAGED_TRAIN = '''\
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    """Item i is a row of 4 values i * SCALE, labelled i % 3."""

    def __len__(self):
        return {n}

    def __getitem__(self, i):
        if {item_sleep}:
            time.sleep({item_sleep})
        return torch.full((4,), float(i) * {scale}), i % 3


class MyLoader(DataLoader):
    """A project's own DataLoader subclass."""


def build():
    cls = MyLoader if {subclass} else DataLoader
    loader = cls(Items(), batch_size={batch_size}, shuffle={shuffle}, num_workers={workers})
    model = nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if {step_sleep}:
        def step(batch):
            x, y = batch
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            time.sleep({step_sleep})

        return {{"loader": loader, "step": step}}
    return {{"loader": loader, "model": model, "optimizer": opt}}
'''

MANAGED_DEFAULTS = dict(n=64, batch_size=4, shuffle=True, workers=0, scale=1.0,
                        item_sleep=0, step_sleep=0, subclass=False)


@pytest.fixture
def managed_project(tmp_path):
    """``managed_project(name, **settings)``: a project folder whose
    ``train.build()`` returns a loader of ``Items`` (settings: see
    MANAGED_DEFAULTS), or ``body=`` for a train.py of the test's own."""
    def make(name="proj", body=None, **settings):
        d = tmp_path / name
        d.mkdir()
        if body is None:
            body = MANAGED_TRAIN.format(**{**MANAGED_DEFAULTS, **settings})
        (d / "train.py").write_text(textwrap.dedent(body))
        return d
    return make


class Outcome:
    """What one harness run printed: its exit status, its result or error."""

    def __init__(self, code, stdout):
        self.code = code
        self.stdout = stdout
        self.result = self.error = None
        for line in stdout.splitlines():
            if line.startswith("TUNELOOP_RESULT "):
                self.result = json.loads(line[len("TUNELOOP_RESULT "):])
            elif line.startswith("TUNELOOP_ERROR "):
                self.error = json.loads(line[len("TUNELOOP_ERROR "):])


@pytest.fixture
def run_harness(H, torch, monkeypatch, capfd):
    """``run_harness(project, *args, entry="train:build")`` runs the harness's
    ``main()`` here with the command line the binary gives it, and gives back
    its Outcome. What main() changes in this process is put back: the
    working folder, sys.path, torch.autograd.backward (wrapped for the
    losses), the dataloader iterator's _next_index (wrapped for the indices),
    and the project's modules (each test's project has its own train.py)."""
    import torch.utils.data.dataloader as dl

    monkeypatch.chdir(os.getcwd())
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(torch.autograd, "backward", torch.autograd.backward)
    monkeypatch.setattr(dl._BaseDataLoaderIter, "_next_index", dl._BaseDataLoaderIter._next_index)
    monkeypatch.setattr(dl._BaseDataLoaderIter, "_tl_indices", False, raising=False)
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)

    def run(project, *args, entry="train:build"):
        argv = ["tuneloop_harness.py", "--project", str(project), "--entry", entry, *args]
        monkeypatch.setattr(sys, "argv", argv)
        code = 0
        try:
            H.main()
        except SystemExit as e:
            code = e.code
        finally:
            root = os.path.realpath(project)
            for name, mod in list(sys.modules.items()):
                f = getattr(mod, "__file__", None) or ""
                if f and os.path.realpath(f).startswith(root + os.sep):
                    del sys.modules[name]
        return Outcome(code, capfd.readouterr().out)

    return run


# -- command mode: the user's own command ---------------------------------

PYTHON = sys.executable


def run_command(harness_dir, base, script, steps=8, warmup=2, env=None, name="cmd",
                timeout=120):
    """Writes ``script`` as train.py in ``base/name`` and runs ``python
    train.py`` there with the instrumentation armed as the binary arms it
    (PYTHONPATH, TUNELOOP_*); ``env`` adds to or overrides that. Gives back
    a Command."""
    project = base / name
    project.mkdir()
    (project / "train.py").write_text(textwrap.dedent(script))
    result_dir = base / (name + "-result")
    result_dir.mkdir()
    full = dict(os.environ)
    for k in list(full):
        if k.startswith("TUNELOOP_") or k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
            del full[k]
    full.update({
        "PYTHONPATH": str(harness_dir),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "TUNELOOP_RESULT_DIR": str(result_dir),
        "TUNELOOP_STEPS": str(steps),
        "TUNELOOP_WARMUP": str(warmup),
        "TUNELOOP_PROJECT": str(project),
    })
    full.update(env or {})
    p = subprocess.run([PYTHON, "train.py"], cwd=project, env=full,
                       capture_output=True, text=True, timeout=timeout)
    return Command(p, project, result_dir)


class Command:
    def __init__(self, proc, project, result_dir):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.project = project
        self.result_dir = result_dir

    def json(self, kind, rank=0):
        """result / status / progress of a rank, or None when not written."""
        p = self.result_dir / f"{kind}.{rank}.json"
        return json.loads(p.read_text()) if p.exists() else None

    @property
    def result(self):
        r = self.json("result")
        assert r is not None, f"no result.0.json; rc={self.rc}\n{self.stdout}\n{self.stderr}"
        return r

    def line_of(self, marker):
        """``train.py:N`` of the script's line holding ``marker``."""
        lines = (self.project / "train.py").read_text().splitlines()
        n = next(i for i, line in enumerate(lines, 1) if marker in line)
        return f"train.py:{n}"
