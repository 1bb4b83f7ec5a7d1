"""The command line and `gpu_check.sh` start JAX with the GPU memory fraction the planner budgets
(`chips.USABLE_HBM`) instead of JAX's default 75%, unless the user chose a fraction."""

import os
import subprocess
from pathlib import Path

import pytest

from jaxseeker.cli import main
from jaxseeker.planning.chips import USABLE_HBM
from jaxseeker.planning.preallocation import MEM_FRACTION_ENV, preallocation_env

GPU_CHECK = Path(__file__).parents[2] / "tpu_scripts" / "gpu_check.sh"


def test_the_fraction_is_the_plans_budget_unless_the_user_set_one():
    assert preallocation_env({}) == {MEM_FRACTION_ENV: str(USABLE_HBM)}
    assert float(preallocation_env({})[MEM_FRACTION_ENV]) == USABLE_HBM != 0.75
    assert preallocation_env({MEM_FRACTION_ENV: "0.5"}) == {}
    assert preallocation_env({"XLA_CLIENT_MEM_FRACTION": "0.5"}) == {}  # jaxlib refuses both names together


@pytest.mark.parametrize("user", [None, "0.6"])
def test_the_command_line_sets_it_before_jax_starts(monkeypatch, user):
    monkeypatch.setenv(MEM_FRACTION_ENV, "unset")  # recorded, so the test leaves the environment as it found it
    monkeypatch.delenv(MEM_FRACTION_ENV)
    if user is not None:
        monkeypatch.setenv(MEM_FRACTION_ENV, user)
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--help"])
    assert exit_info.value.code == 0
    assert os.environ[MEM_FRACTION_ENV] == (user or str(USABLE_HBM))


@pytest.mark.parametrize("user", [None, "0.6"])
def test_gpu_check_exports_it(user):
    env = {k: v for k, v in os.environ.items() if k not in (MEM_FRACTION_ENV, "XLA_CLIENT_MEM_FRACTION")}
    if user is not None:
        env[MEM_FRACTION_ENV] = user
    out = subprocess.run(
        ["bash", str(GPU_CHECK), "--dry-run"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert f"export {MEM_FRACTION_ENV}={user or USABLE_HBM}" in out.splitlines()
