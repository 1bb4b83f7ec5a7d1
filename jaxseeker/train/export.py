"""Export a training checkpoint as a Hugging Face checkpoint (weights, config, tokenizer)."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

import jax
from jax.sharding import NamedSharding, PartitionSpec

from jaxseeker import model
from jaxseeker.errors import InputError
from jaxseeker.train.checkpoint import checkpoint_path, restore_params
from jaxseeker.train.lora import LORA_FILE, merge_fn, read_lora_file, write_lora_file, write_peft_adapter

# Where a run's checkpoints are, when `train.checkpoint_dir` / `rl.checkpoint_dir` put them outside the run directory
# (e.g. a gs:// bucket on a pod).
CHECKPOINTS_FILE = "checkpoints.json"


def write_run_files(
    out_dir: Path,
    cfg: model.ModelConfig,
    tokenizer: Any,
    checkpoint_dir: str | Path,
    *,
    lora: model.LoraConfig | None = None,
    base: str | Path | None = None,
) -> None:
    """Write what `export-hf` and `serve` read from a run directory besides the checkpoints: the model's config,
    its tokenizer, where the checkpoints are when not in `out_dir/checkpoints`, and for a LoRA run (`lora`) the
    adapters' shape and the base checkpoint `base` (made absolute)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "model_config.json").write_text(json.dumps(model.to_hf_dict(cfg), indent=2))
    tokenizer.save_pretrained(out_dir / "tokenizer")
    write_lora_file(out_dir, lora, base)
    where = checkpoint_path(checkpoint_dir)
    if where != checkpoint_path(out_dir / "checkpoints"):
        (out_dir / CHECKPOINTS_FILE).write_text(json.dumps({"directory": str(where)}, indent=2))
    else:
        (out_dir / CHECKPOINTS_FILE).unlink(missing_ok=True)


def run_dir_of(path: str | Path) -> Path:
    """The run directory of `path` (the run directory itself or its `checkpoints/` folder)."""
    if str(path).startswith("gs://"):
        raise FileNotFoundError(
            f"{path}: give the run's directory (runs/NAME on the host that ran it, or the copy "
            f"`tpu.py launch` makes of it); it records where its checkpoints are"
        )
    path = Path(path)
    if (path / "model_config.json").exists():
        return path
    if (path.parent / "model_config.json").exists():
        return path.parent
    raise FileNotFoundError(f"{path}: not a jaxseeker run directory (no model_config.json here or one level up)")


def checkpoints_of(run: Path) -> str | Path:
    """Where the checkpoints of the run directory `run` are: `run/checkpoints` unless its checkpoints.json names
    another directory (local or gs://)."""
    marker = run / CHECKPOINTS_FILE
    if not marker.exists():
        return run / "checkpoints"
    try:
        return json.loads(marker.read_text(encoding="utf-8"))["directory"]
    except (ValueError, KeyError, TypeError) as err:
        raise FileNotFoundError(
            f'{marker}: expected {{"directory": "…"}} naming the run\'s checkpoints ({type(err).__name__}: {err})'
        ) from None


def restore_run(
    path: str | Path, *, step: int | None = None, dtype: str | None = None, shardings: Any = None
) -> tuple[Path, model.ModelConfig, dict]:
    """(run directory, config, params) of the run at `path` (the run or its `checkpoints/`): the latest step
    unless `step`, restored as `dtype` (the run's parameter dtype if None) where `shardings` say (a pytree of
    shardings or a function of the run's config, as in `model.load_hf`). Default: host memory (the CPU device,
    also where accelerators are attached, so a model trained over many chips needs not fit on one). A LoRA run's
    params are its base checkpoint with the step's adapters merged in (`model.merge_lora`)."""
    run = run_dir_of(path)
    cfg = model.from_hf_dict(json.loads((run / "model_config.json").read_text()), source=str(run / "model_config.json"))
    if dtype is not None:
        cfg = cfg.replace(param_dtype=dtype)
    abstract = model.abstract_params(cfg)
    if shardings is None:
        host = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
        shardings = jax.tree.map(lambda _: host, abstract)
    elif callable(shardings):
        shardings = shardings(cfg)
    lora, base_path = read_lora_file(run)
    if lora is None:
        target = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings)
        return run, cfg, restore_params(checkpoints_of(run), target, step=step)
    try:
        base_cfg, base = model.load_hf(base_path, dtype=cfg.param_dtype, shardings=shardings)
    except (FileNotFoundError, model.ConfigError) as err:  # no config.json there any more
        raise FileNotFoundError(f"{run / LORA_FILE}: cannot read the base checkpoint of this LoRA run: {err}") from None
    if model.param_shapes(base_cfg) != model.param_shapes(cfg):
        raise ValueError(f"{run / LORA_FILE}: the base checkpoint {base_path} does not have the run's model shape")
    first = jax.tree.leaves(shardings)[0]  # the adapters, small, go whole beside the base
    whole = NamedSharding(first.mesh, PartitionSpec()) if isinstance(first, NamedSharding) else first
    adapters = restore_adapters(run, cfg, lora, step=step, sharding=whole)
    return run, cfg, merge_fn(cfg, lora, shardings)(base, adapters)


def restore_adapters(
    run: Path, cfg: model.ModelConfig, lora: model.LoraConfig, *, step: int | None = None, sharding: Any = None
) -> dict:
    """The LoRA adapters of the run directory `run` at `step` (the latest if None), float32, each whole where
    `sharding` says (default: the host CPU device)."""
    sharding = sharding or jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    adapters = jax.eval_shape(functools.partial(model.init_lora, cfg, lora), jax.random.PRNGKey(0))
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), adapters)
    return restore_params(checkpoints_of(run), target, step=step)


def export_hf(
    checkpoint: str | Path,
    out_dir: str | Path,
    *,
    step: int | None = None,
    dtype: str | None = None,
    peft_dir: str | Path | None = None,
) -> Path:
    """Write the params of `checkpoint` (latest step unless `step`) with the run's config and tokenizer to
    `out_dir`, loadable by `transformers.AutoModelForCausalLM` / `AutoTokenizer`. The params are restored as
    `dtype` (the run's if None) in host memory and written one tensor at a time; a LoRA run's are its base with the
    adapters merged in. `peft_dir`: also write a LoRA run's adapters there as a PEFT adapter of its base
    (`peft.PeftModel.from_pretrained(base, peft_dir)`)."""
    if peft_dir is not None:
        run = run_dir_of(checkpoint)
        lora, base = read_lora_file(run)
        if lora is None:
            raise InputError(f"{run}: not a LoRA run (no {LORA_FILE}), so it has no adapters to write as PEFT's")
        cfg = model.from_hf_dict(json.loads((run / "model_config.json").read_text()))
        write_peft_adapter(restore_adapters(run, cfg, lora, step=step), cfg, lora, peft_dir, base=base)
    run, cfg, params = restore_run(checkpoint, step=step, dtype=dtype)
    out = model.save_hf(params, cfg, out_dir, dtype=dtype)
    tokenizer = run / "tokenizer"
    if tokenizer.exists():
        for f in tokenizer.iterdir():
            shutil.copy2(f, out / f.name)
    return out
