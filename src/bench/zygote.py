"""tuneloop's fork server (managed mode): import torch once, fork each run.

A managed-mode run spends more time starting than measuring: Python, then
``import torch`` (1-2.5 s on a 2-core box), then the lazy imports of the first
optimizer step (``torch._dynamo`` and what it pulls in, about 1-2 s more),
before the one second the decision uses. This file is two programs:

``serve --socket NAME [--preload-script SCRIPT]``
    The server. tuneloop starts it once per bencher with the environment of
    every run. It imports torch and those modules (and, for a command-mode
    ``python SCRIPT``, the installed packages SCRIPT imports at its top level:
    ``transformers``' Trainer or Lightning take seconds more than torch),
    listens on the abstract
    Unix socket NAME, prints ``TUNELOOP_ZYGOTE_READY`` and then, for each
    request, forks a child that becomes the harness run: its own session,
    the client's stdin/stdout/stderr, environment, working folder and argv,
    fresh random seeds, then ``tuneloop_harness.py`` as ``__main__``. No torch
    op ever runs in the server, so no thread pool or device exists to fork.
    It ends when its stdin (a pipe from tuneloop) closes.

``run --socket NAME [--kind KIND] -- ARGS...``
    The client, the process tuneloop spawns and times like any run. It hands
    its own stdio and environment to the server and relays the child's end
    as its own: the exit code, or the same signal. SIGTERM and SIGINT go on
    to the child's process group; if the client dies (tuneloop's SIGKILL),
    a pipe only it held closes and the child ends its whole group. Where
    no server answers, or the environment differs from the one the server
    imported torch under, it runs the same as a fresh process instead.

KIND says what the run is, as the words after ``python`` would:
``harness`` (the default: managed mode, ``tuneloop_harness.py ARGS``),
``script`` (command mode, ``python SCRIPT ARGS``) or ``module`` (command
mode, ``python -m MODULE ARGS``). In command mode the server is started
without the instrumentation armed (no ``TUNELOOP_RESULT_DIR``); the forked
run sets its environment, then arms it as ``sitecustomize`` would have. The ``TUNELOOP_*``
variables are read only by the harness and the instrumentation, which
import after the fork, so they may differ from the server's; any other
difference sends the run fresh.

Only a peer of the server's own user is served.
"""

import json
import os
import signal
import socket
import struct
import sys
import time

READY = "TUNELOOP_ZYGOTE_READY"
# Set in a forked run's environment: the harness reports how it started.
FORKED_ENV = "TUNELOOP_FORKED"
# Set beside it: the seconds the server's imports took.
PRELOAD_ENV = "TUNELOOP_FORK_PRELOAD_S"
HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "tuneloop_harness.py")
# What a run imports before its first timed step. torch is required; the
# rest is what the first optimizer step and the harness import lazily.
PRELOAD = ("torch", "torch.optim", "torch.utils.data", "torch.profiler", "torch._dynamo", "numpy")
HEADER = struct.Struct("!I")


def address(name):
    return "\0" + name


# ---------------------------------------------------------------- the client


KINDS = ("harness", "script", "module")


def fresh_argv(kind, args):
    """The command line a fresh process of this run has."""
    if kind == "script":
        return [sys.executable] + args
    if kind == "module":
        return [sys.executable, "-m"] + args
    return [sys.executable, HARNESS] + args


def client(name, kind, args):
    def run_fresh():
        os.execv(sys.executable, fresh_argv(kind, args))

    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address(name))
    except OSError:
        run_fresh()
    # The lifeline: the child watches the read end; only this process holds
    # the write end, so it reads end-of-file when this process is gone.
    life_r, life_w = os.pipe()
    payload = json.dumps(
        {"kind": kind, "args": args, "env": dict(os.environ), "cwd": os.getcwd()}
    ).encode()
    try:
        socket.send_fds(s, [HEADER.pack(len(payload)) + payload], [0, 1, 2, life_r])
    except OSError:
        run_fresh()
    os.close(life_r)
    replies = s.makefile("r")
    first = replies.readline().split()
    if len(first) != 2 or first[0] != "pid":
        # "fallback <why>", or a server that ended before forking.
        s.close()
        run_fresh()
    pid = int(first[1])

    def forward(sig, _frame):
        try:
            os.killpg(pid, sig)
        except OSError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    end = replies.readline().split()
    if len(end) != 2:
        # The server went away with the run under way: end the run too.
        forward(signal.SIGKILL, None)
        sys.stderr.write("tuneloop: the fork server ended during the run\n")
        os._exit(1)
    how, value = end[0], int(end[1])
    if how == "signal":
        signal.signal(value, signal.SIG_DFL)
        os.kill(os.getpid(), value)
    os._exit(value)


# ---------------------------------------------------------------- the server


def receive(conn):
    """The request (args, env, cwd) and the four descriptors sent with it."""
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 4)
    if len(data) < HEADER.size or len(fds) != 4:
        for fd in fds:
            os.close(fd)
        raise ValueError("malformed request")
    (length,) = HEADER.unpack(data[: HEADER.size])
    body = data[HEADER.size :]
    while len(body) < length:
        more = conn.recv(length - len(body))
        if not more:
            for fd in fds:
                os.close(fd)
            raise ValueError("short request")
        body += more
    try:
        return json.loads(body), fds
    except ValueError:
        for fd in fds:
            os.close(fd)
        raise


def same_user(conn):
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def same_environment(env, start_env):
    """Whether a run's environment is the server's, but for ``_`` (the
    shell's last command, which says nothing to torch) and the TUNELOOP_*
    variables (read only by what the run imports after the fork)."""
    if not isinstance(env, dict):
        return False

    def relevant(e):
        return {k: v for k, v in e.items() if k != "_" and not k.startswith("TUNELOOP_")}

    return relevant(env) == relevant(start_env)


def script_imports(path):
    """(module, names) for each ``import`` / ``from … import`` a script makes
    at its top level (its body, and the ``if`` / ``try`` blocks there; not
    inside functions, classes or ``except`` handlers): what every run of it
    imports before its first step. Relative imports are left out."""
    import ast

    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return []
    found = []

    def visit(body):
        for node in body:
            if isinstance(node, ast.Import):
                found.extend((a.name, ()) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.module, tuple(a.name for a in node.names if a.name != "*")))
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    return found


def installed(module, roots):
    """Whether ``module``'s top package is found outside ``roots`` (the
    project's folders): an installed package, not a file of the project,
    which a turn may change and each run must import afresh."""
    import importlib.util

    top = module.partition(".")[0]
    # A fresh run finds the script's own folder first: a project file of
    # that name is what it imports, whatever is installed.
    def in_project(r):
        # A folder without __init__.py (wandb's run folder) is no package an
        # installed one of that name gives way to.
        return os.path.exists(os.path.join(r, top + ".py")) or os.path.isfile(
            os.path.join(r, top, "__init__.py"))

    if any(in_project(r) for r in roots):
        return False
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    places = list(spec.submodule_search_locations or [])
    if spec.origin and os.path.isabs(spec.origin):
        places.append(spec.origin)
    for place in places:
        real = os.path.realpath(place)
        if any(real == r or real.startswith(r + os.sep) for r in roots):
            return False
    return True


def preload_script(path):
    """Imports the installed packages ``path`` imports at its top level, and
    the names it takes from them (a lazy module such as ``transformers``
    imports its parts on first access). Returns what it imported."""
    import importlib

    here = os.path.dirname(os.path.abspath(path))
    roots = {os.path.realpath(os.getcwd()), os.path.realpath(here)}
    done = []
    for module, names in script_imports(path):
        if module in sys.modules and not names:
            continue
        if not installed(module, roots):
            continue
        new = module not in sys.modules
        try:
            mod = importlib.import_module(module)
            for n in names:
                try:
                    getattr(mod, n)
                except AttributeError:
                    importlib.import_module(f"{module}.{n}")
            if new:
                done.append(module)
        except Exception:  # the run meets the same error, where the user sees it
            pass
    return done


def fork_hazard():
    """Why forking now would not give a fresh process's state, or None: a
    preloaded package started a thread (its locks would be copied held) or
    initialised CUDA (a forked child cannot use it)."""
    import threading

    if threading.active_count() > 1:
        return f"{threading.active_count() - 1} thread(s) started"
    try:
        import torch

        if torch.cuda.is_initialized():
            return "CUDA initialised"
    except Exception:
        pass
    return None


def serve(name, script=None):
    """Returns only in a forked child, with what it needs to become the run."""
    import importlib
    import select

    start_env = dict(os.environ)
    t0 = time.perf_counter()
    import torch  # noqa: F401  (a server without torch is no server: tuneloop runs fresh)

    for module in PRELOAD[1:]:
        try:
            importlib.import_module(module)
        except Exception:  # an older torch, no numpy: the run imports what it has
            pass
    if script:
        done = preload_script(script)
        unsafe = fork_hazard()
        if unsafe:
            # Start over without them: torch alone is safe to fork. In the
            # environment the server started with (imports set variables).
            print(f"tuneloop: not preloading {', '.join(done)}: {unsafe}",
                  file=sys.stderr, flush=True)
            argv = [sys.executable, os.path.abspath(__file__), "serve", "--socket", name]
            os.execve(sys.executable, argv, start_env)
        if done:
            print(f"tuneloop: preloaded {', '.join(done)}", file=sys.stderr, flush=True)
    preload_s = time.perf_counter() - t0
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address(name))
    listener.listen(16)
    # A child's end wakes the loop at once (its client waits on the reply).
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    print(READY, flush=True)
    children = {}  # pid -> the client's connection
    ended = set()  # runs whose client hung up: killed, not yet reaped
    while True:
        # A hung-up client's connection reads as closed until its run is
        # reaped: not watched then, or the loop would spin meanwhile.
        watched = [listener, sys.stdin, wake_r] + [
            c for p, c in children.items() if p not in ended
        ]
        readable, _, _ = select.select(watched, [], [], 1.0)
        for r in readable:
            if r == wake_r:
                os.read(wake_r, 4096)
            elif r is sys.stdin:
                if not os.read(sys.stdin.fileno(), 4096):
                    # tuneloop is gone: so are the clients, and with their
                    # lifelines the children.
                    os._exit(0)
            elif r is listener:
                conn, _ = listener.accept()
                try:
                    if not same_user(conn):
                        raise ValueError("another user")
                    req, fds = receive(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                kind, args = req.get("kind", "harness"), req.get("args")
                if (
                    kind not in KINDS
                    or not isinstance(args, list)
                    or (kind != "harness" and not args)
                ):
                    for fd in fds:
                        os.close(fd)
                    conn.sendall(b"fallback request\n")
                    conn.close()
                    continue
                if not same_environment(req.get("env"), start_env):
                    # torch was imported under another environment (threads,
                    # devices, allocators read it at import): a fresh process.
                    for fd in fds:
                        os.close(fd)
                    conn.sendall(b"fallback environment\n")
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    for fd in (wake_r, wake_w):
                        os.close(fd)
                    listener.close()
                    for other in children.values():
                        other.close()
                    return conn, req, fds, preload_s
                for fd in fds:
                    os.close(fd)
                try:
                    conn.sendall(b"pid %d\n" % pid)
                except OSError:
                    os.kill(pid, signal.SIGKILL)
                children[pid] = conn
            else:
                # A client that hangs up before its run ended: end the run.
                if not r.recv(1):
                    pid = next(p for p, c in children.items() if c is r)
                    ended.add(pid)
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
        reap(children)
        ended.intersection_update(children)


def reap(children):
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        # The run is gone; its group may not be (workers it left, as an
        # os._exit leaves persistent ones): end it, as tuneloop ends the group
        # of a fresh run, before the client hears the end.
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        if os.WIFSIGNALED(status):
            reply = b"signal %d\n" % os.WTERMSIG(status)
        else:
            reply = b"exit %d\n" % os.waitstatus_to_exitcode(status)
        try:
            conn.sendall(reply)
        except OSError:
            pass
        conn.close()


def become_the_run(conn, req, fds, preload_s):
    """In the forked child: make this process what a fresh start would be."""
    import importlib
    import random
    import runpy
    import threading

    conn.close()
    os.setsid()
    for target, fd in zip((0, 1, 2), fds[:3]):
        os.dup2(fd, target)
    for fd in fds[:3]:
        if fd > 2:
            os.close(fd)
    lifeline = fds[3]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(req["env"])
    os.environ[FORKED_ENV] = "1"
    # What this run did not pay for its imports: the instrumentation counts
    # it into the command's start-up, as a fresh start would have paid it.
    os.environ[PRELOAD_ENV] = f"{preload_s:.3f}"
    os.chdir(req["cwd"])
    kind, args = req.get("kind", "harness"), list(req["args"])
    # A fresh process seeds these from the OS; forked, they would repeat.
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    importlib.invalidate_caches()

    def watch():
        os.read(lifeline, 1)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="tuneloop-lifeline", daemon=True).start()
    if kind == "harness":
        sys.argv = [HARNESS] + args
        sys.path[0] = HERE
        runpy.run_path(HARNESS, run_name="__main__")
        return
    # Command mode: sys.argv and sys.path[0] as `python SCRIPT` / `python -m
    # MODULE` set them, the instrumentation armed as sitecustomize arms it.
    sys.argv = args
    sys.path[0] = os.path.dirname(os.path.abspath(args[0])) if kind == "script" else os.getcwd()
    arm_instrumentation()
    if kind == "script":
        runpy.run_path(args[0], run_name="__main__")
    else:
        runpy.run_module(args[0], run_name="__main__", alter_sys=True)


def arm_instrumentation():
    """What ``sitecustomize`` does in a fresh command-mode process. The
    loader module is imported already, so ``arm`` patches it at once, and
    seeds torch as it does when the module is imported after it."""
    if not os.environ.get("TUNELOOP_RESULT_DIR"):
        return
    try:
        import tuneloop_instrument

        tuneloop_instrument.arm()
    except Exception as e:  # as sitecustomize: never break the user's command
        print(f"tuneloop: instrumentation not armed: {type(e).__name__}: {e}", file=sys.stderr)


def main():
    argv = sys.argv[1:]
    if len(argv) >= 3 and argv[0] in ("serve", "run") and argv[1] == "--socket":
        name = argv[2]
        if argv[0] == "run":
            rest = argv[3:]
            kind = "harness"
            if rest[:1] == ["--kind"] and len(rest) >= 2 and rest[1] in KINDS:
                kind, rest = rest[1], rest[2:]
            return client(name, kind, rest[1:] if rest[:1] == ["--"] else rest)
        rest = argv[3:]
        script = rest[1] if rest[:1] == ["--preload-script"] and len(rest) >= 2 else None
        child = serve(name, script)
        return become_the_run(*child)
    sys.exit(
        "usage: tuneloop_zygote.py serve --socket NAME [--preload-script SCRIPT] | "
        "run --socket NAME [--kind harness|script|module] -- ARGS..."
    )


if __name__ == "__main__":
    main()
