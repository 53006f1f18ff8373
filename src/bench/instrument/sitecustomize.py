"""tuneloop's entry into a user's own training command (command mode).

tuneloop puts the folder holding this file first on PYTHONPATH of the command
it measures, so every Python process of that command -- `python train.py`,
`python -m pkg.train`, the ranks `torchrun` / `accelerate launch` start --
imports it at start-up. It first runs the sitecustomize the user's
environment would have run without tuneloop, then arms the instrumentation
(``tuneloop_instrument``), which waits for torch's DataLoader module to be
imported and does nothing before. No file of the user's is changed.
"""

import os
import sys


def _run_the_users_own():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import importlib.util
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        # Whatever the user's sitecustomize defined stays reachable under its name.
        sys.modules["sitecustomize"].__dict__.update(
            {k: v for k, v in mod.__dict__.items() if not k.startswith("__")})
    except Exception as e:  # the user's own start-up code failed: say so, go on as Python would
        print(f"tuneloop: your sitecustomize raised {type(e).__name__}: {e}", file=sys.stderr)


_run_the_users_own()

if os.environ.get("TUNELOOP_RESULT_DIR"):
    try:
        import tuneloop_instrument

        tuneloop_instrument.arm()
    except Exception as e:  # never break the user's command because of tuneloop
        print(f"tuneloop: instrumentation not armed: {type(e).__name__}: {e}", file=sys.stderr)
