"""The quick pipeline run stopped before RL: the tests of test_pipeline_quick.py and
test_pipeline_quick_variants.py go on from copies of it, on two xdist workers side by side."""

import pytest
from quick_support import RECIPE
from session_support import built_once

from jaxseeker.pipeline import pipeline_config, run_pipeline


@pytest.fixture(scope="session")
def before_rl(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """(directory, report so far) of a quick run stopped before RL (`until`), built once per session."""
    return built_once(
        tmp_path_factory,
        "before_rl",
        lambda root: run_pipeline(pipeline_config(RECIPE, quick=True), root, progress=False, until="eval_sft"),
    )
