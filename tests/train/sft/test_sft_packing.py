"""The SFT loss of a packed row equals the loss of the same examples each in its own padded row."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker import model
from jaxseeker.data import pack_examples
from jaxseeker.train import sft_loss


def test_packed_loss_equals_unpacked_loss():
    cfg = model.ModelConfig.tiny("qwen3")
    params = model.init_params(cfg, jax.random.key(0))
    rng = np.random.default_rng(0)
    examples = []
    for n in (23, 17, 9):
        ids = rng.integers(0, cfg.vocab_size, n).astype(np.int32)
        mask = (rng.random(n) < 0.6).astype(np.int32)
        examples.append((ids, mask))
    keys = ("tokens", "targets", "loss_mask", "segment_ids", "positions")
    packed = pack_examples(examples, seq_len=64, over_length="drop", num_bins=1)
    assert len(packed["tokens"]) == 1  # all three in one row
    alone = [pack_examples([e], seq_len=64, over_length="drop") for e in examples]
    unpacked = {k: np.concatenate([a[k] for a in alone]) for k in keys}
    loss = jax.jit(lambda p, batch: sft_loss(p, batch, cfg, chunk_size=16))
    loss_packed, aux_packed = loss(params, {k: jnp.asarray(packed[k]) for k in keys})
    loss_alone, aux_alone = loss(params, {k: jnp.asarray(unpacked[k]) for k in keys})
    assert int(aux_packed["n_tokens"]) == int(aux_alone["n_tokens"]) == sum(int(m[1:].sum()) for _, m in examples)
    assert float(loss_packed) == pytest.approx(float(loss_alone), abs=1e-5)
