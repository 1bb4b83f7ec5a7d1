"""The chunked loss reads the unembedding gathered once per step, not once per chunk (`loss_gather_worker.py`, 8
fake CPU devices, fsdp = 8: the `[embed, vocab]` weight is split by `embed`). Left to XLA, the SFT step gathered
the whole weight inside the chunk loop three times (forward, recompute, backward), re-run on every chunk;
`train.sft.step.loss_unembed` lays it out whole before the loop."""

from pathlib import Path

import pytest
from worker_support import run_worker


@pytest.fixture(scope="module")
def report() -> dict:
    return run_worker(Path(__file__).with_name("loss_gather_worker.py"), 8)[0]


@pytest.mark.parametrize("case", ["sft_tied", "sft_untied", "rl_untied", "rl_logprobs_untied"])
def test_the_unembedding_is_gathered_once_outside_the_chunk_loop(report, case):
    assert report[case] == {"in_loop": 0, "outside": 1}
