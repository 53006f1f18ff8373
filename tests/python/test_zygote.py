"""The fork server of managed mode (src/bench/zygote.py) as the binary uses
it: a real server process that imported torch, real client processes that
tuneloop would spawn and time, the harness beside them doing a real run.
What is checked is what a fresh process would have given: the result, the
exit status, the end of the run when its client is ended, its own random
seeds; and that a run goes fresh where the server cannot serve it."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from conftest import BENCH, OWN_FILES, Outcome

PYTHON = sys.executable
READY = "TUNELOOP_ZYGOTE_READY"


@pytest.fixture(scope="module")
def zdir(tmp_path_factory):
    """A harness folder as the binary writes it for managed mode."""
    d = tmp_path_factory.mktemp("zygote")
    shutil.copyfile(OWN_FILES["tuneloop_harness.py"], d / "tuneloop_harness.py")
    shutil.copyfile(BENCH / "zygote.py", d / "tuneloop_zygote.py")
    return d


def run_env():
    """The environment of every run (and of the server): the binary gives
    each run of a bencher the same one."""
    # (Not PYTEST_CURRENT_TEST, which pytest changes as it goes.)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TUNELOOP_") and k != "PYTEST_CURRENT_TEST"}
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    return env


class Server:
    def __init__(self, zdir):
        self.name = f"tuneloop-test-{uuid.uuid4().hex}"
        self.proc = subprocess.Popen(
            [PYTHON, str(zdir / "tuneloop_zygote.py"), "serve", "--socket", self.name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=run_env(),
            start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("the server ended before it was ready")
            if line.startswith(READY):
                return
        raise AssertionError("the server was not ready in 120 s")

    def stop(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(zdir):
    s = Server(zdir)
    yield s
    if s.proc.poll() is None:
        s.stop()


PROJECT = '''\
import os
import random
import time

import numpy
import torch
from torch.utils.data import DataLoader

OUT = {out!r}


def build():
    # What this run is: its pid, its session, its seeds.
    with open(OUT, "w") as f:
        f.write("%d %d %r %r %r\\n" % (os.getpid(), os.getsid(0), random.random(),
                                      float(numpy.random.random()), float(torch.rand(1))))
    if {fail}:
        raise RuntimeError("build failed on purpose")
    data = [(torch.full((4,), float(i)), i % 2) for i in range(64)]

    def step(batch):
        time.sleep({step_sleep})

    return {{"loader": DataLoader(data, batch_size=4), "step": step}}
'''


def project(tmp_path, name="proj", fail=False, step_sleep=0.0):
    d = tmp_path / name
    d.mkdir()
    out = tmp_path / f"{name}.out"
    (d / "train.py").write_text(textwrap.dedent(PROJECT.format(
        out=str(out), fail=fail, step_sleep=step_sleep)))
    return d, out


def client_args(zdir, name, proj, steps="4"):
    return [PYTHON, str(zdir / "tuneloop_zygote.py"), "run", "--socket", name, "--",
            "--project", str(proj), "--entry", "train:build", "--steps", steps,
            "--warmup", "1"]


def run_client(zdir, name, proj, env=None, steps="4"):
    p = subprocess.run(client_args(zdir, name, proj, steps), env=env or run_env(),
                       capture_output=True, text=True, timeout=120)
    return Outcome(p.returncode, p.stdout), p


def what_ran(out):
    pid, sid, r, n, t = out.read_text().split()
    return int(pid), int(sid), float(r), float(n), float(t)


def gone(pid, within=10.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie of the server's is gone for the purpose: reap by waiting.
        time.sleep(0.05)
    return False


def test_a_run_is_forked_and_gives_the_result_a_fresh_one_gives(zdir, server, tmp_path):
    proj, out = project(tmp_path)
    forked, p = run_client(zdir, server.name, proj)
    assert forked.code == 0, p.stderr
    assert forked.result["process_start"] == "forked"
    pid, sid, *forked_draws = what_ran(out)
    # Its own process in its own session, not the client nor the server.
    assert pid not in (server.proc.pid,) and sid == pid
    fresh, p = run_client(zdir, "no-such-server-" + uuid.uuid4().hex, proj)
    assert fresh.code == 0, p.stderr
    assert fresh.result["process_start"] == "fresh"
    for key in ("steps", "samples", "batch_size", "warmup_steps", "loader", "fingerprint"):
        assert forked.result[key] == fresh.result[key], key
    # The harness seeds random, numpy and torch the same in every run (data
    # identity): the forked run draws what the fresh one draws.
    _, _, *fresh_draws = what_ran(out)
    assert forked_draws == fresh_draws


def test_another_environment_runs_fresh(zdir, server, tmp_path):
    # torch read its environment at import: OMP_NUM_THREADS=1 would not
    # take in a process forked from a server that imported it without.
    proj, _ = project(tmp_path)
    o, p = run_client(zdir, server.name, proj, env={**run_env(), "OMP_NUM_THREADS": "1"})
    assert o.code == 0, p.stderr
    assert o.result["process_start"] == "fresh"


def test_the_run_exit_status_is_the_clients(zdir, server, tmp_path):
    proj, _ = project(tmp_path, fail=True)
    forked, _ = run_client(zdir, server.name, proj)
    fresh, _ = run_client(zdir, "no-such-server-" + uuid.uuid4().hex, proj)
    assert fresh.code != 0
    assert forked.code == fresh.code
    assert forked.error is not None and forked.error == fresh.error


def start_slow_run(zdir, server, tmp_path, name):
    proj, out = project(tmp_path, name=name, step_sleep=0.5)
    client = subprocess.Popen(client_args(zdir, server.name, proj, steps="1000"),
                              env=run_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not out.exists() or not out.read_text().strip():
        assert time.monotonic() < deadline and client.poll() is None
        time.sleep(0.05)
    return client, what_ran(out)[0]


def test_sigterm_to_the_client_ends_the_run_as_it_would_a_fresh_one(zdir, server, tmp_path):
    client, run_pid = start_slow_run(zdir, server, tmp_path, "term")
    assert run_pid != client.pid
    client.send_signal(signal.SIGTERM)
    # The run dies of the SIGTERM, and the client relays that as its own end.
    assert client.wait(timeout=30) == -signal.SIGTERM
    assert gone(run_pid)


def test_a_killed_client_takes_its_run_with_it(zdir, server, tmp_path):
    # tuneloop ends an overrunning run with SIGKILL to its group: here only
    # the client is killed, and the run still ends (its lifeline closes).
    client, run_pid = start_slow_run(zdir, server, tmp_path, "kill")
    client.kill()
    client.wait(timeout=30)
    assert gone(run_pid)


def test_the_server_ends_when_its_stdin_closes(zdir):
    s = Server(zdir)
    assert s.stop() == 0
    # Its socket went with it: a client now runs fresh.
    assert json.dumps(s.name)  # the name was a real one
    with pytest.raises(OSError):
        import socket
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect("\0" + s.name)


# -- command mode: the user's own `python train.py` / `python -m pkg.train`


@pytest.fixture(scope="module")
def cmd_dir(tmp_path_factory):
    """A harness folder as the binary writes it for command mode."""
    d = tmp_path_factory.mktemp("zygote-cmd")
    for name, src in OWN_FILES.items():
        shutil.copyfile(src, d / name)
    shutil.copyfile(BENCH / "zygote.py", d / "tuneloop_zygote.py")
    return d


def command_env(cmd_dir, result_dir, project):
    """A measured run's environment, as src/bench/command.rs sets it."""
    env = run_env()
    env.update({"PYTHONPATH": str(cmd_dir), "PYTHONHASHSEED": "0",
                "TUNELOOP_RESULT_DIR": str(result_dir), "TUNELOOP_STEPS": "6",
                "TUNELOOP_WARMUP": "2", "TUNELOOP_PROJECT": str(project)})
    return env


@pytest.fixture(scope="module")
def cmd_server(cmd_dir, tmp_path_factory):
    """The server as the binary starts it in command mode: the run's
    environment without the TUNELOOP_* variables."""
    env = {k: v for k, v in command_env(cmd_dir, "x", "x").items()
           if not k.startswith("TUNELOOP_")}
    name = f"tuneloop-test-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [PYTHON, str(cmd_dir / "tuneloop_zygote.py"), "serve", "--socket", name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        start_new_session=True)
    assert proc.stdout.readline().startswith(READY)
    yield name
    proc.stdin.close()
    proc.wait(timeout=30)


TRAIN = '''\
import json
import random

import torch
from torch import nn
from torch.utils.data import DataLoader

# The random state the script starts from: the instrumentation's seeds.
with open("rng.json", "w") as f:
    json.dump({"random": random.random(), "torch": torch.rand(1).item(),
               "main": __name__}, f)
data = [(torch.randn(4), i % 3) for i in range(64)]
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for x, y in DataLoader(data, batch_size=4, shuffle=True):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
'''


def measured_command(cmd_dir, tmp_path, name, words, server=None):
    """Runs `python WORDS…` in a fresh project folder, forked from `server`
    (``--kind script`` or ``module`` from the words) or fresh; gives back the
    result.0.json and rng.json it left."""
    project = tmp_path / name
    (project / "pkg").mkdir(parents=True)
    (project / "train.py").write_text(TRAIN)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "train.py").write_text(TRAIN)
    result_dir = tmp_path / (name + "-result")
    result_dir.mkdir()
    env = command_env(cmd_dir, result_dir, project)
    if server is None:
        argv = [PYTHON] + words
    else:
        kind, rest = ("module", words[1:]) if words[0] == "-m" else ("script", words)
        argv = [PYTHON, str(cmd_dir / "tuneloop_zygote.py"), "run", "--socket", server,
                "--kind", kind, "--"] + rest
    p = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True,
                       timeout=120)
    result = result_dir / "result.0.json"
    assert result.exists(), f"rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(result.read_text()), json.loads((project / "rng.json").read_text())


@pytest.mark.parametrize("words", [["train.py"], ["-m", "pkg.train"]])
def test_a_command_forked_measures_what_it_measures_fresh(cmd_dir, cmd_server, tmp_path,
                                                          words):
    forked, forked_rng = measured_command(cmd_dir, tmp_path, "forked", words, cmd_server)
    fresh, fresh_rng = measured_command(cmd_dir, tmp_path, "fresh", words)
    assert (forked["process_start"], fresh["process_start"]) == ("forked", "fresh")
    # The same seeds at the script's start, so the same batches and losses.
    assert forked_rng == fresh_rng and forked_rng["main"] == "__main__"
    for key in ("steps", "samples", "fingerprint", "data_identity", "losses", "loader"):
        assert forked[key] == fresh[key], key
    # The start-up counts the imports the server made for the forked run
    # (torch's alone take more than a tenth of a second).
    assert forked["startup_s"] > 0.1 and fresh["startup_s"] > 0.1


def test_what_a_run_leaves_in_its_group_ends_with_it(zdir, server, tmp_path):
    # A process the run started and left behind (persistent workers after an
    # os._exit, here a plain `sleep`): tuneloop kills a fresh run's group
    # when its leader ends; the server does the same for a forked run.
    proj = tmp_path / "leaves"
    proj.mkdir()
    pidfile = tmp_path / "sleep.pid"
    (proj / "train.py").write_text(textwrap.dedent(f'''\
        import subprocess
        import torch
        from torch.utils.data import DataLoader

        def build():
            p = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            open({str(pidfile)!r}, "w").write(str(p.pid))
            data = [(torch.zeros(2), 0) for _ in range(16)]
            return {{"loader": DataLoader(data, batch_size=4), "step": lambda b: None}}
        '''))
    o, p = run_client(zdir, server.name, proj)
    assert o.code == 0 and o.result["process_start"] == "forked", p.stderr
    assert gone(int(pidfile.read_text()), within=5.0)


# -- the script's own imports, preloaded (`serve --preload-script SCRIPT`)


def load_zygote():
    import importlib.util

    spec = importlib.util.spec_from_file_location("zygote_under_test", BENCH / "zygote.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_scripts_top_level_imports_are_found_and_nothing_else(tmp_path):
    z = load_zygote()
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent('''\
        import os, xml.dom.minidom
        from json import dumps, loads
        from . import sibling
        from email import *
        if True:
            import csv
        try:
            import wave
        except ImportError:
            import audioop
        def main():
            import tarfile
        class C:
            import zipfile
    '''))
    assert z.script_imports(str(script)) == [
        ("os", ()), ("xml.dom.minidom", ()), ("json", ("dumps", "loads")),
        ("email", ()), ("csv", ()), ("wave", ())]
    (tmp_path / "broken.py").write_text("import (")
    assert z.script_imports(str(tmp_path / "broken.py")) == []


def test_a_module_of_the_project_is_never_taken_for_an_installed_one(tmp_path):
    z = load_zygote()
    roots = {str(tmp_path.resolve())}
    assert z.installed("json", roots)
    assert not z.installed("no_such_module_" + uuid.uuid4().hex, roots)
    # A project file named like an installed module: the run imports the file.
    (tmp_path / "json.py").write_text("")
    assert not z.installed("json.decoder", roots)
    (tmp_path / "json.py").unlink()
    # A package found on the path but inside the project (an editable install).
    (tmp_path / "sub" / "mypkg").mkdir(parents=True)
    (tmp_path / "sub" / "mypkg" / "__init__.py").write_text("")
    sys.path.insert(0, str(tmp_path / "sub"))
    try:
        assert not z.installed("mypkg", roots)
        assert z.installed("mypkg", {str((tmp_path / "elsewhere").resolve())})
    finally:
        sys.path.remove(str(tmp_path / "sub"))


PRELOAD_TRAIN = '''\
import sys
# What was imported before the script's first line ran.
with open("before.txt", "w") as f:
    f.write(" ".join(m for m in ("xml.dom.minidom", "localmod", "threader") if m in sys.modules))
import xml.dom.minidom
import localmod
{extra}
import torch
from torch.utils.data import DataLoader
for x in DataLoader(list(range(64)), batch_size=4):
    pass
'''


def preloading_server(cmd_dir, project, site, log):
    """The server as the binary starts it for `python train.py`, in the
    project's folder, `site` on the path as an installed package's place."""
    env = {k: v for k, v in command_env(cmd_dir, "x", project).items()
           if not k.startswith("TUNELOOP_")}
    env["PYTHONPATH"] += os.pathsep + str(site)
    proc = subprocess.Popen(
        [PYTHON, str(cmd_dir / "tuneloop_zygote.py"), "serve", "--socket",
         f"tuneloop-test-{uuid.uuid4().hex}", "--preload-script", "train.py"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
        cwd=project, start_new_session=True)
    assert proc.stdout.readline().startswith(READY)
    return proc, env


@pytest.mark.parametrize("extra", ["", "import threader"])
def test_the_scripts_installed_imports_are_preloaded_unless_forking_them_is_unsafe(
        cmd_dir, tmp_path, extra):
    project, site = tmp_path / "proj", tmp_path / "site"
    project.mkdir()
    site.mkdir()
    (project / "train.py").write_text(PRELOAD_TRAIN.format(extra=extra))
    (project / "localmod.py").write_text("")
    # An installed package that starts a thread when imported.
    (site / "threader.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n")
    log = tmp_path / "server.log"
    with open(log, "w") as logf:
        proc, env = preloading_server(cmd_dir, project, site, logf)
    try:
        result_dir = tmp_path / "result"
        result_dir.mkdir()
        run_env_ = {**env, **{k: v for k, v in command_env(cmd_dir, result_dir, project).items()
                               if k.startswith("TUNELOOP_")}}
        name = proc.args[4]
        p = subprocess.run(
            [PYTHON, str(cmd_dir / "tuneloop_zygote.py"), "run", "--socket", name,
             "--kind", "script", "--", "train.py"],
            cwd=project, env=run_env_, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        result = json.loads((result_dir / "result.0.json").read_text())
        assert result["process_start"] == "forked", (p.stderr, log.read_text())
        before = (project / "before.txt").read_text().split()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    said = log.read_text()
    if extra:
        # A thread in the server: it started over with torch alone.
        assert "not preloading xml.dom.minidom, threader: 1 thread(s) started" in said, said
        assert before == []
    else:
        # The installed module was there already; the project's own was not.
        assert before == ["xml.dom.minidom"], before
        assert "preloaded xml.dom.minidom" in said, said
