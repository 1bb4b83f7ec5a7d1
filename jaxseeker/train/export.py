"""Export a training checkpoint as a Hugging Face checkpoint (weights, config, tokenizer)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax

from jaxseeker import model
from jaxseeker.train.checkpoint import restore_params


def run_dir_of(path: str | Path) -> Path:
    """The run directory of `path` (the run directory itself or its `checkpoints/` folder)."""
    path = Path(path)
    if (path / "model_config.json").exists():
        return path
    if (path.parent / "model_config.json").exists():
        return path.parent
    raise FileNotFoundError(f"{path}: not a jaxseeker run directory (no model_config.json here or one level up)")


def restore_run(path: str | Path, *, step: int | None = None, dtype: str | None = None) -> tuple[Path, model.ModelConfig, dict]:
    """(run directory, config, params) of the run at `path` (the run or its `checkpoints/`): the latest step
    unless `step`, on the first device, restored as `dtype` (the run's parameter dtype if None)."""
    run = run_dir_of(path)
    cfg = model.from_hf_dict(json.loads((run / "model_config.json").read_text()), source=str(run / "model_config.json"))
    if dtype is not None:
        cfg = cfg.replace(param_dtype=dtype)
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    target = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device),
        jax.eval_shape(lambda: model.init_params(cfg, jax.random.key(0))),
    )
    return run, cfg, restore_params(run / "checkpoints", target, step=step)


def export_hf(checkpoint: str | Path, out_dir: str | Path, *, step: int | None = None, dtype: str | None = None) -> Path:
    """Write the params of `checkpoint` (latest step unless `step`) with the run's config and tokenizer to
    `out_dir`, loadable by `transformers.AutoModelForCausalLM` / `AutoTokenizer`."""
    run, cfg, params = restore_run(checkpoint, step=step)
    out = model.save_hf(params, cfg, out_dir, dtype=dtype)
    tokenizer = run / "tokenizer"
    if tokenizer.exists():
        for f in tokenizer.iterdir():
            shutil.copy2(f, out / f.name)
    return out
