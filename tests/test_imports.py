"""Importing jaxseeker must not start the XLA backend: multi-host programs call `jax.distributed.initialize()`
after their imports."""

import subprocess
import sys

STAGES = ["model", "parallel", "losses", "rewards", "generation", "agent", "tools", "world", "synthesis", "data",
          "train", "eval", "pipeline", "serve", "cli"]


def test_no_stage_starts_the_backend_at_import():
    code = (
        "import importlib\n"
        f"for name in {STAGES!r}: importlib.import_module('jaxseeker.' + name)\n"
        "from jax._src import xla_bridge\n"
        "print(bool(xla_bridge._backends))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr[-2000:]
