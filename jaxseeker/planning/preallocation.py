"""How much GPU memory JAX takes when it starts: the share `jaxseeker plan` budgets, not JAX's default.

JAX preallocates 75% of each GPU's memory at start-up unless `XLA_PYTHON_CLIENT_MEM_FRACTION` says otherwise, while
a plan fills up to `chips.USABLE_HBM` (90%) of it: a plan that fits would still run out of memory. The command line
(`jaxseeker.cli.main`) and `tpu_scripts/gpu_check.sh` therefore set the variable to the plan's budget before JAX
starts, unless the user set it. TPUs and CPUs ignore it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from jaxseeker.planning.chips import USABLE_HBM

MEM_FRACTION_ENV = "XLA_PYTHON_CLIENT_MEM_FRACTION"  # read by every jax this project supports (>= 0.7)
# the newer name for it: a user's setting of either one stands (jaxlib refuses the two together).
USER_SETTINGS = (MEM_FRACTION_ENV, "XLA_CLIENT_MEM_FRACTION")


def preallocation_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`{XLA_PYTHON_CLIENT_MEM_FRACTION: the plan's budget}` for a process about to start JAX, so a GPU
    preallocates what the plan counts on; {} where `env` (default: this process's) sets a fraction already."""
    env = os.environ if env is None else env
    return {} if any(env.get(name) for name in USER_SETTINGS) else {MEM_FRACTION_ENV: f"{USABLE_HBM:g}"}
