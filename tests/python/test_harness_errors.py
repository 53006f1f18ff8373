"""The harness's user errors: one ``TUNELOOP_ERROR {"kind", "message"}``
line and exit status 3, the kinds the binary turns into hints
(src/bench/mod.rs parse_managed: import, no_build, bad_return)."""

import os
import subprocess
import sys

import pytest


def error_of(out):
    assert out.code == 3, out.stdout
    assert out.result is None
    assert set(out.error) == {"kind", "message"}
    errors = [line for line in out.stdout.splitlines() if line.startswith("TUNELOOP_ERROR ")]
    assert len(errors) == 1
    return out.error


def test_entry_without_a_colon(run_harness, managed_project):
    e = error_of(run_harness(managed_project(), entry="train.build"))
    assert e["kind"] == "config"
    assert "MODULE:FUNCTION" in e["message"]


def test_module_that_does_not_import(run_harness, managed_project):
    e = error_of(run_harness(managed_project(body="import no_such_module_here\n")))
    assert e["kind"] == "import"
    assert "ModuleNotFoundError" in e["message"] and "no_such_module_here" in e["message"]


def test_missing_module(run_harness, managed_project):
    e = error_of(run_harness(managed_project(), entry="nothere:build"))
    assert e["kind"] == "import"
    assert "'nothere'" in e["message"]


def test_missing_function(run_harness, managed_project):
    e = error_of(run_harness(managed_project(), entry="train:make"))
    assert e["kind"] == "no_build"
    assert "no function 'make'" in e["message"]


def test_name_that_is_not_a_function(run_harness, managed_project):
    e = error_of(run_harness(managed_project(body="build = 3\n")))
    assert e["kind"] == "no_build"


def test_build_that_raises(run_harness, managed_project):
    body = "def build():\n    raise ValueError('no data at /nowhere')\n"
    e = error_of(run_harness(managed_project(body=body)))
    assert e["kind"] == "build_failed"
    assert "ValueError: no data at /nowhere" in e["message"]
    assert "Traceback" in e["message"]


@pytest.mark.parametrize("returned, words", [
    ("[1, 2]", "returned list"),
    ("{'model': None}", "without 'loader'"),
    ("{'loader': [1]}", "'step'"),
    ("{'loader': [1], 'step': 5}", "not callable"),
])
def test_bad_returns(run_harness, managed_project, returned, words):
    e = error_of(run_harness(managed_project(body=f"def build():\n    return {returned}\n")))
    assert e["kind"] == "bad_return"
    assert words in e["message"]


def test_python_without_torch(harness_dir, tmp_path, managed_project):
    # An interpreter where `import torch` fails: the no_torch error, which
    # names the interpreter, before any of the project is imported; exit
    # status 3 in a process of its own, as the binary runs the harness.
    fake = tmp_path / "site"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ImportError('torch is not installed')\n")
    env = {**os.environ, "PYTHONPATH": str(fake)}
    p = subprocess.run([sys.executable, str(harness_dir / "tuneloop_harness.py"),
                        "--project", str(managed_project()), "--entry", "train:build"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 3
    line = p.stdout.splitlines()[-1]
    assert line.startswith('TUNELOOP_ERROR {"kind": "no_torch"')
    assert sys.executable in line and "TUNELOOP_PYTHON" in line
