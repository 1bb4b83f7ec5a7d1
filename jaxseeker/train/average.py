"""Weight averaging of fine-tunes of one start: a "model soup" (Wortsman et al., arXiv 2203.05482).

Fine-tunes that start from the same weights and differ only in their data order stay in one basin of the
loss, so their parameter mean is a model too; it keeps what the runs share and averages away what one run's
draw of the data put in. The RFT stage's `rl.rft_seeds` trains such runs and serves their mean (measured in
docs/results.md); `jaxseeker average` does it for any HF checkpoints of one architecture. `wise_ft` averages a
fine-tune with its own start (the pipeline's `rl.average`).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker import model

_WEIGHT_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json")


def average_params(trees: Sequence[Any], weights: Sequence[float] | None = None) -> Any:
    """The weighted mean of parameter pytrees of one structure and shape (`weights` default equal, normalised to
    sum 1), each leaf accumulated in float64 on the host and rounded once to its dtype (float32 accumulation rounds
    every product and sum: a 0.3 / 0.7 mean of random weights then missed the exact one by an ulp in 42% of them)."""
    shares = _shares(len(trees), weights)
    first = jax.tree.structure(trees[0])
    for i, tree in enumerate(trees[1:], start=1):
        if jax.tree.structure(tree) != first:
            raise ValueError(f"params {i} differ in structure from params 0")
    for column in zip(*[jax.tree_util.tree_flatten_with_path(t)[0] for t in trees]):
        shapes = [x.shape for _, x in column]
        if len(set(shapes)) > 1:
            raise ValueError(f"{jax.tree_util.keystr(column[0][0])}: shapes differ between the params: {shapes}")

    def mean(*xs: Any) -> jax.Array:
        total = sum(s * np.asarray(x, np.float64) for s, x in zip(shares, xs))  # one leaf in float64 at a time
        return jnp.asarray(total.astype(xs[0].dtype))

    return jax.tree.map(mean, *trees)


def average_hf(models: Sequence[str | Path], out_dir: str | Path, weights: Sequence[float] | None = None) -> Path:
    """Write the weighted mean (`average_params`) of the HF checkpoints `models` to `out_dir`, with the first one's
    tokenizer and chat template; the checkpoints must share one config. Holds two models in memory at a time."""
    if len(models) < 2:
        raise ValueError(f"give two or more checkpoints to average, got {len(models)}")
    shares = _shares(len(models), weights)
    models = [Path(m) for m in models]
    first_cfg = model.load_config(models[0])
    total, summed = None, 0.0
    for path, share in zip(models, shares):  # a running mean: two models in memory at a time
        _check_same(first_cfg, model.load_config(path), models[0], path)
        _, params = model.load_hf(path, dtype="float32")
        total = params if total is None else average_params([total, params], [summed, share])
        summed += share
    out = model.save_hf(total, first_cfg.replace(param_dtype="float32"), out_dir, dtype=first_cfg.hf_dtype)
    if out.resolve() != models[0].resolve():
        for f in models[0].iterdir():  # tokenizer files, chat template
            if f.is_file() and f.suffix != ".safetensors" and f.name not in _WEIGHT_FILES:
                shutil.copy2(f, out / f.name)
    return out


def wise_ft(start: str | Path, tuned: str | Path, out_dir: str | Path, ratio: float) -> Path:
    """WiSE-FT (Wortsman et al., arXiv 2109.01903): (1 - ratio)·start + ratio·tuned, the weight mean of a fine-tune
    with the checkpoint it started from, written to `out_dir` (`average_hf`). Between the two, the mean keeps much
    of what the fine-tune gained and undoes much of what it churned; ratio is the fine-tune's share, in (0, 1)."""
    if not 0 < ratio < 1:
        raise ValueError(f"ratio must lie in (0, 1) (the fine-tune's share of the mean), got {ratio}")
    return average_hf([start, tuned], out_dir, weights=[1.0 - ratio, ratio])


def _shares(n: int, weights: Sequence[float] | None) -> list[float]:
    """`weights` (default equal) normalised to sum 1; checked for count and sign."""
    if n < 1:
        raise ValueError("no params to average")
    weights = [1.0] * n if weights is None else [float(w) for w in weights]
    if len(weights) != n:
        raise ValueError(f"{len(weights)} weights for {n} checkpoints")
    if any(w <= 0 for w in weights):
        raise ValueError(f"weights must be > 0, got {weights}")
    return [w / sum(weights) for w in weights]


def _check_same(a: model.ModelConfig, b: model.ModelConfig, path_a: Path, path_b: Path) -> None:
    """Raise naming the first config field in which the checkpoint at `path_b` differs from the one at `path_a`."""
    left, right = dataclasses.asdict(a), dataclasses.asdict(b)
    for key in left:
        if key not in ("hf_dtype", "param_dtype") and left[key] != right[key]:
            raise ValueError(
                f"{path_b}/config.json differs from {path_a}/config.json in {key!r} "
                f"({right[key]!r} vs {left[key]!r}): only fine-tunes of one architecture average"
            )
