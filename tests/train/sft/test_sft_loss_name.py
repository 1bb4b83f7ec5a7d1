"""`train.loss` names any pure `(params, batch, cfg) -> (loss, aux)` function; `train.chunk_size` reaches those that
take a `chunk_size` keyword, as `sft_loss` does."""

import textwrap

import jax
import numpy as np
import pytest

from jaxseeker import model
from jaxseeker.train.recipe import RecipeError
from jaxseeker.train.sft.loop import resolve_loss

MY_LOSSES = '''
from jaxseeker.train.sft.step import sft_loss


def doubled(params, batch, cfg):
    """Twice the mean NLL: a loss with the plain three-argument signature."""
    loss, aux = sft_loss(params, batch, cfg, chunk_size=8)
    return 2 * loss, aux


def chunked(params, batch, cfg, **options):
    """The mean NLL, with whatever keywords the trainer gives."""
    return sft_loss(params, batch, cfg, **options)
'''


def test_a_recipe_names_its_own_loss_function(tmp_path, monkeypatch):
    (tmp_path / "my_losses.py").write_text(textwrap.dedent(MY_LOSSES))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = model.ModelConfig.tiny()
    params = model.init_params(cfg, jax.random.key(0))
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, cfg.vocab_size, (2, 17))
    batch = {
        "tokens": tokens[:, :-1],
        "targets": tokens[:, 1:],
        "loss_mask": np.ones((2, 16), np.int32),
        "segment_ids": np.ones((2, 16), np.int32),
        "positions": np.tile(np.arange(16), (2, 1)),
    }
    base = float(resolve_loss("sft_loss", 8)(params, batch, cfg)[0])
    assert float(resolve_loss("my_losses:doubled", 8)(params, batch, cfg)[0]) == pytest.approx(2 * base, rel=1e-6)
    chunked = resolve_loss("my_losses:chunked", 4)
    assert chunked.keywords == {"chunk_size": 4}
    assert float(chunked(params, batch, cfg)[0]) == pytest.approx(base, rel=1e-6)
    with pytest.raises(RecipeError, match="train.loss=.my_losses:tripled.: .*has no callable .tripled."):
        resolve_loss("my_losses:tripled", 8)
    with pytest.raises(RecipeError, match="unknown loss 'doubled'; known names: sft_loss, or a path 'package"):
        resolve_loss("doubled", 8)
