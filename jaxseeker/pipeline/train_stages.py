"""The pipeline's supervised stages: a from-scratch policy's copy warm-up (`warmup`), then SFT on the expert
trajectories (`sft`) and the optional context extension (`extend`), two `jaxseeker sft` recipes
(`pipeline.recipes`), each written to its directory as `recipe.yaml`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jaxseeker import model
from jaxseeker.data import DataConfig
from jaxseeker.data.copies import digit_ids, ordinary_ids
from jaxseeker.pipeline.config import PipelineConfig
from jaxseeker.pipeline.context import PipelineRun
from jaxseeker.pipeline.questions import write_name_pool
from jaxseeker.pipeline.recipes import sft_config, sft_recipe, stage_seed, write_recipe
from jaxseeker.train.average import average_hf
from jaxseeker.train.export import export_hf
from jaxseeker.train.sft.copy_warmup import run_copy_warmup
from jaxseeker.train.sft.loop import run_sft


def scratch_shape(cfg: PipelineConfig) -> dict[str, Any]:
    """The ModelConfig fields of a from-scratch policy (Qwen3 architecture, the policy section's shape)."""
    p = cfg.policy
    return {
        "model_type": "qwen3",
        "vocab_size": p.vocab_size,
        "hidden_size": p.hidden_size,
        "num_layers": p.num_layers,
        "num_heads": p.num_heads,
        "num_kv_heads": p.num_kv_heads,
        "head_dim": p.head_dim,
        "intermediate_size": p.intermediate_size,
        "rope_theta": p.rope_theta,
        "initializer_range": 0.02,
        "max_position_embeddings": 4096,
        "attention_impl": "blocked",
    }


def model_section(cfg: PipelineConfig, hf_path: str | Path | None) -> dict[str, Any]:
    """A stage recipe's `model` section: the checkpoint `hf_path` (an HF directory, a GGUF file or a registered name;
    the policy's LoRA adapters on it when the policy section asks for them), or the from-scratch shape when None;
    blocked attention either way."""
    if hf_path is None:
        return scratch_shape(cfg)
    lora = dict(cfg.policy.lora)
    return {"hf_path": str(hf_path), "attention_impl": "blocked"} | ({"lora": lora} if lora.get("rank") else {})


def names_file(run: PipelineRun) -> str:
    """The name pool SFT renames searched entities from (`policy.permute_names`), else ""."""
    return str(run.root / "sft" / "name_pool.tsv") if run.cfg.policy.permute_names else ""


def stage_recipe(
    run: PipelineRun,
    stage: str,
    out: Path,
    start: dict,
    *,
    seed: int | None = None,
    train_files: tuple[Path, ...] = (),
) -> dict:
    """The `jaxseeker sft` recipe of `stage` (sft | extend | rft) training `start` into `out` on `train_files`
    (default the expert trajectories) with the policy's tokenizer; written as `out/recipe.yaml`."""
    tokenizer = run.init_dir if run.init_dir is not None else run.root / "tokenizer"
    recipe = sft_recipe(
        run.cfg,
        stage,
        name="-".join((run.cfg.name, *out.relative_to(run.root).parts)),  # e.g. demo-sft, demo-rl-seeds-2
        model=start,
        train_files=train_files or (run.root / "expert" / "trajectories.jsonl",),
        tokenizer=tokenizer,
        out_dir=out,
        name_pool=names_file(run),
        seed=seed,
    )
    write_recipe(out, recipe)
    return recipe


def sft_summary(run: PipelineRun, out: Path, recipe: dict, key: str, hf: Path | None = None) -> dict:
    """Train `recipe` (resuming), export it under `hf` (default `out/hf`), and say how many trajectory draws its
    rows (the config's `key`) cut."""
    seq_len = recipe.get("data", {}).get("seq_len", DataConfig.seq_len)
    summary = run_sft(recipe, resume=True, progress=run.progress)
    export_hf(out, hf or out / "hf")
    if summary["truncated"]:
        run.runner.log(
            f"[{out.relative_to(run.root)}] {summary['truncated']} trajectory draws were cut at {key}="
            f"{seq_len} tokens: their ends were never trained, while rollouts run to eval.max_context="
            f"{run.cfg.eval.max_context}"
        )
    return {
        k: summary.get(k) for k in ("final_loss", "eval_loss", "trained_tokens", "parameters", "truncated", "wall_s")
    } | {"seq_len": seq_len}


def warmup_stage(run: PipelineRun, out: Path) -> dict:
    """Copies of random token runs from random init (`train.sft.copy_warmup`): forms the copying heads a small
    from-scratch policy then uses in SFT; with `copy_warmup_layers`, in a shallower model grown to full depth. Its
    learning rate is the SFT's, its rows `copy_warmup_rows` or the SFT's."""
    p = run.cfg.policy
    data, optimizer, _ = sft_config(run.cfg, "sft")
    policy = model.ModelConfig(**scratch_shape(run.cfg))
    shallow = dataclasses.replace(policy, num_layers=p.copy_warmup_layers or p.num_layers)
    return run_copy_warmup(
        shallow,
        ordinary_ids(run.tokenizer),
        out / "hf",
        steps=p.copy_warmup_steps,
        lr=optimizer.lr,
        rows=p.copy_warmup_rows or data.batch_size,
        target_loss=p.copy_warmup_target_loss,
        grow_to=policy if shallow != policy else None,
        progress=run.progress,
        digits=digit_ids(run.tokenizer) if p.copy_warmup_digit_rate else None,
        digit_rate=p.copy_warmup_digit_rate,
        max_gap=p.copy_warmup_gap,
        checkpoint_dir=out / "checkpoints",
        save_every=max(1, p.copy_warmup_steps // 8),
    )


def sft_stage(run: PipelineRun, out: Path) -> dict:
    """SFT on the expert trajectories, from the pretrained policy, the warm-up's model or random weights; with
    `policy.sft_seeds` > 1, the policy is the weight mean of that many fine-tunes on their own data orders."""
    p, qa_dir = run.cfg.policy, run.qa_dir
    start = run.init_dir if run.init_dir is not None else (run.root / "warmup" / "hf" if p.copy_warmup_steps else None)
    if p.permute_names:
        write_name_pool(run.world, [qa_dir / "test.jsonl", qa_dir / "rl.jsonl"], out / "name_pool.tsv")
    base = sft_config(run.cfg, "sft")[0].seed

    def recipe(fine_tune: Path, member: int) -> dict:  # member k >= 1 on data seed the SFT's + k
        seed = None if member == 0 else base + member
        return stage_recipe(run, "sft", fine_tune, model_section(run.cfg, start), seed=seed)

    return soup_summary(run, out, recipe, p.sft_seeds, "sft.data.seq_len")


def soup_summary(run: PipelineRun, out: Path, recipe: Callable[[Path, int], dict], n: int, key: str) -> dict:
    """Train `n` fine-tunes, `recipe(directory, member)` each, and make `out/hf` their weight mean (a model soup;
    `train.average`): fine-tune 1 runs in `out` itself, fine-tune k >= 2 under seeds/k, and fine-tune k's export is
    seeds/k/hf. One fine-tune exports to `out/hf` itself."""
    if n == 1:
        return sft_summary(run, out, recipe(out, 0), key)
    seeds = [out / "seeds" / str(k) for k in range(1, n + 1)]
    summaries = [
        sft_summary(run, fine_tune, recipe(fine_tune, k), key, hf=seed / "hf")
        for k, (fine_tune, seed) in enumerate(zip([out] + seeds[1:], seeds))
    ]
    average_hf([seed / "hf" for seed in seeds], out / "hf")
    run.runner.log(f"[{out.name}] the policy is the weight mean of {n} fine-tunes (seeds/*/hf)")
    return summaries[0] | {"seeds": n, "seed_final_losses": [s["final_loss"] for s in summaries]}


def extend_stage(run: PipelineRun, out: Path) -> dict:
    """Context extension: SFT rows of sft.data.seq_len cut the longest trajectories, so the policy never trains the
    positions its rollouts reach nor the ends of those episodes. More steps from the SFT policy with the extend
    section's keys laid on the sft's (longer rows, their own learning rate), on a new draw order."""
    recipe = stage_recipe(
        run, "extend", out, model_section(run.cfg, run.root / "sft" / "hf"), seed=stage_seed(run.cfg, "extend")
    )
    return sft_summary(run, out, recipe, "extend.data.seq_len")
