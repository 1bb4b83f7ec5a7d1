"""The group-relative RL loop behind `jaxseeker rl`: rollouts → rewards → selection → old log-probs → updates.

Each RL step: take `batch_questions` questions from the sampler → `group_size` rollouts each on the generation
engine (`collect.py`) with the current params (`engine.set_params`, no copy) and the recipe's tools → score every
episode (format check, judge, recipe reward, overlong punishment) → selection (grpo / dapo / dupo on correctness or
reward, see `selection.py`) → the update (`update.py`: KL-shaped rewards → group advantages → the episodes that
can change the policy → old log-probs (the engine's, or recomputed) → importance weights → `epochs` passes of
`mini_batches` optimizer steps, each in micro-batches of `rl.update_tokens`) → metrics (JSONL, TensorBoard, progress
bar) → checkpoint (train state, question sampler, the adaptive KL coefficient). WebExplorer's progressive context is
a list of stages `{step, max_context, max_turns}`: from RL step `step` on, episodes get `max_context` tokens and at
most `max_turns` tool calls.

The engine has a layout of its own (`generation.Engine`, `parallel.GENERATION_RULES`): replicas of
`engine.tensor` devices, each holding the whole model in `engine.dtype` split over its devices (weights stationary:
decoding gathers none), the slots split over the replicas. Its weights and cache are dropped while the update runs,
and the updated params are handed over on device after it: one jitted cast and reshard of the trainer's fsdp shards
onto the replicas (`generation.handoff`), with no host copy.

Multi-host (`jax.distributed`): every process takes the same questions from its sampler, rolls out and
scores its share of the groups on its own engine (the replicas on its own devices, which run out of step with the
other processes') and receives everyone's (`rollout.py`); selection, advantages, metrics and the update
rows are then the same on every process, and the update runs on the global mesh. The groups and their sampling do
not depend on the process count. Process 0 alone writes metrics, episodes, reports and plots; checkpoints are
collective, with each process's sampler state.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from tqdm import tqdm

from jaxseeker import model
from jaxseeker.agent import (
    Episode,
    Question,
    RolloutConfig,
    read_questions,
    write_episodes,
)
from jaxseeker.generation import SamplingConfig, roofline
from jaxseeker.parallel import is_main_process, maybe_initialize_distributed, process_info
from jaxseeker.rewards import submit_feedback
from jaxseeker.tools import (
    ToolRegistry,
    answer_submit_tool,
    build_registry,
    tools_config,
)
from jaxseeker.train.checkpoint import Checkpointer
from jaxseeker.train.export import write_run_files
from jaxseeker.train.heap import trim_heap
from jaxseeker.train.interrupt import Interrupted, Stopped, stop_requests
from jaxseeker.train.lora import lora_from_recipe, merge_fn
from jaxseeker.train.metrics import MetricsWriter, plot_curves, read_metrics
from jaxseeker.train.optimizer import OptimizerConfig, make_optimizer
from jaxseeker.train.policy import build_policy
from jaxseeker.train.recipe import RecipeError, build, check_sections
from jaxseeker.train.rl.collect import PrefilterStopped, collect, dupo_pool, rollout_engine, stage_rollout_config
from jaxseeker.train.rl.config import (
    SECTIONS,
    ContextStage,
    EngineConfig,
    RLConfig,
    context_stages,
    rl_optimizer_config,
    rl_sampling,
    stage_at,
    step_config,
)
from jaxseeker.train.rl.midstep import finish_step, restore_mid_step, save_mid_step
from jaxseeker.train.rl.scoring import QuestionSampler, RewardConfig, Scorer, score_metrics
from jaxseeker.train.rl.shaping import adaptive_kl_coef
from jaxseeker.train.rl.step import RLStepConfig
from jaxseeker.train.rl.update import UpdateStopped, update


@dataclasses.dataclass(kw_only=True)
class RLRun:
    """Everything a run needs, built from a recipe (see `prepare`); fields by keyword only."""

    recipe: dict
    out_dir: Path
    cfg: model.ModelConfig
    rl: RLConfig
    rollout: RolloutConfig
    stages: list[ContextStage]
    step_cfg: RLStepConfig
    opt_cfg: OptimizerConfig
    mesh: Any
    rules: Any
    tokenizer: Any
    questions: list[Question]
    registry: ToolRegistry
    multi_submit: bool
    scorer: Scorer
    engine: Any
    state: Any
    ref_params: Any
    sampler: QuestionSampler | None
    checkpointer: Checkpointer
    start_step: int
    sampling: SamplingConfig
    kl_reward_coef: float = 0.0  # β of the KL in the reward (adapts with rl.kl_reward_target; checkpointed)
    pending: Any = None  # rl.update.Progress of the step a stop interrupted inside its update (`rl.midstep`)
    lora: Any = None  # model.LoraConfig of a LoRA run (state.params are then the adapters), else None
    base: Any = None  # the frozen base params of a LoRA run
    base_shardings: Any = None
    ceilings: tuple[float, float] | None = None  # (matmul FLOP/s, bytes/s): the rollouts' roofline

    def engine_params(self, params: Any) -> Any:
        """The params to roll out with: the trained `params`, or with LoRA the base with these adapters merged in
        (the engine casts and reshards them into its own copy)."""
        if self.lora is not None:
            params = merge_fn(self.cfg, self.lora, self.base_shardings)(self.base, params)
        return params

    def registry_for(self, question: Question) -> ToolRegistry:
        """The tools of one episode: the recipe's, plus (SRRL) an `answer_submit` that knows this question's answer."""
        if not self.multi_submit:
            return self.registry
        return self.registry.extended(
            answer_submit_tool(submit_feedback(question.answer, self.scorer.config.submit_threshold))
        )


def _tools(recipe: dict) -> tuple[ToolRegistry, bool]:
    """(the recipe's tools without `answer_submit`, whether episodes get one): `tools` over the `world` corpus (both
    sections as every recipe writes them: `tools.tools_config`, `world.world_spec`; null: no world)."""
    from jaxseeker.world import open_world, world_spec

    try:
        config = tools_config(recipe.get("tools") or {"enabled": []})
        multi_submit = "answer_submit" in config.enabled
        config = dataclasses.replace(config, enabled=tuple(n for n in config.enabled if n != "answer_submit"))
        world = world_spec(recipe.get("world"))
        corpus = None if world is None else open_world(world).corpus
        return build_registry(config, corpus=corpus), multi_submit
    except (ValueError, FileNotFoundError) as e:
        raise RecipeError(str(e)) from None


def prepare(recipe: dict, *, resume: bool = False, engine: Any = None) -> RLRun:
    """Build mesh, model, state, engine, tools, judge and sampler; restore on `resume`.

    `engine`: an engine to roll out with instead of the recipe's (e.g. a `ScriptedEngine` in tests). The recipe runs
    as given: the callers above (`jaxseeker rl`, the pipeline's RL stages) plan its update first
    (`planning.fit.planned_recipe`: the remat and micro-batch tokens that fit, refused before anything loads).
    """
    check_sections(recipe, SECTIONS, "recipe")
    maybe_initialize_distributed()
    rl = build(RLConfig, recipe.get("rl"), "rl")
    if not rl.questions:
        raise RecipeError('rl.questions: give at least one JSONL file of {"question", "answer"}')
    rollout_cfg = build(RolloutConfig, recipe.get("rollout"), "rollout")
    stages = context_stages(rl, rollout_cfg)
    sampling = rl_sampling(recipe.get("sampling"))
    engine_cfg = build(EngineConfig, recipe.get("engine"), "engine")
    reward = build(RewardConfig, recipe.get("reward"), "reward")
    lora = lora_from_recipe(recipe.get("model")) is not None
    opt_cfg = rl_optimizer_config(rl, recipe.get("optimizer"), lora=lora)
    try:
        step_cfg = step_config(rl, sampling)
    except ValueError as e:
        raise RecipeError(f"rl: {e}") from None
    questions = [q for path in rl.questions for q in read_questions(path)]
    missing = [i for i, q in enumerate(questions) if q.answer is None]
    if missing:
        raise RecipeError(
            f"rl.questions: question {missing[0]} ({questions[missing[0]].question[:60]!r}) has no "
            "'answer'; RL needs reference answers"
        )
    policy = build_policy(recipe, make_optimizer(opt_cfg), tokenizer=rl.tokenizer, seed=rl.seed, where="rl.tokenizer")
    cfg, tokenizer, mesh, rules, state = policy.cfg, policy.tokenizer, policy.mesh, policy.rules, policy.state
    ref_params = jax.tree.map(lambda x: x.copy(), state.params) if rl.kl_coef > 0 or rl.kl_reward_coef > 0 else None
    out_dir = Path(rl.out_dir or f"runs/{recipe['name']}")
    ckpt = Checkpointer(rl.checkpoint_dir or out_dir / "checkpoints", save_every=rl.checkpoint_every, keep=rl.keep)
    start, sampler, kl_reward_coef = 0, None, rl.kl_reward_coef
    mid = restore_mid_step(ckpt, state) if resume else None  # a step stopped inside its update
    if mid or (resume and ckpt.latest_step() is not None):
        restored = mid[0] if mid else ckpt.restore(state)
        state, start = restored.state, restored.step - (1 if mid else 0)
        sampler = QuestionSampler(restored.data_state["pool"], rl.seed, restored.data_state["sampler"])
        kl_reward_coef = restored.data_state.get("kl_reward_coef", kl_reward_coef)
    registry, multi_submit = _tools(recipe)
    run = RLRun(
        recipe=recipe,
        out_dir=out_dir,
        cfg=cfg,
        rl=rl,
        rollout=rollout_cfg,
        stages=stages,
        step_cfg=step_cfg,
        opt_cfg=opt_cfg,
        mesh=mesh,
        rules=rules,
        tokenizer=tokenizer,
        questions=questions,
        registry=registry,
        multi_submit=multi_submit,
        scorer=Scorer(reward),
        engine=engine,
        state=state,
        ref_params=ref_params,
        sampler=sampler,
        checkpointer=ckpt,
        start_step=start,
        sampling=sampling,
        kl_reward_coef=kl_reward_coef,
        pending=mid[1] if mid else None,
        lora=policy.lora,
        base=policy.base,
        base_shardings=policy.base_shardings,
    )
    params = run.engine_params(state.params)
    if engine is None:
        run.engine = rollout_engine(
            engine_cfg, rl, cfg, tokenizer, params, sampling, engine_cfg.max_len or max(s.max_context for s in stages)
        )
    else:
        run.engine.set_params(params)
    if hasattr(run.engine, "tally"):
        run.ceilings = roofline.measure(n=1024)
    if is_main_process():
        write_run_files(
            out_dir,
            cfg,
            tokenizer,
            rl.checkpoint_dir or out_dir / "checkpoints",
            lora=policy.lora,
            base=(recipe.get("model") or {}).get("hf_path"),
        )
    return run


def after_update(run: RLRun, state: Any, update_metrics: dict[str, float], episodes: int) -> None:
    """Hand the updated weights to the engine (the update's freed memory given back first) and adapt β of the KL in
    the reward to the update's KL."""
    trim_heap()
    run.engine.set_params(run.engine_params(state.params))
    if run.rl.kl_reward_target is not None and "kl_reward" in update_metrics:
        run.kl_reward_coef = adaptive_kl_coef(
            run.kl_reward_coef,
            update_metrics["kl_reward"],
            target=run.rl.kl_reward_target,
            horizon=run.rl.kl_reward_horizon,
            n_steps=episodes,
        )


def run_step(
    run: RLRun, state: Any, step: int, stop: Callable[[], bool] | None = None
) -> tuple[Any, dict[str, float], list[Episode]]:
    """One RL step (module docstring); returns the new state, the step's metrics and all its episodes. A `stop()`
    that turns true during the update stops it between two mini-batches (`rl_update.UpdateStopped`)."""
    t0 = time.perf_counter()
    stage = stage_at(run.stages, step)
    pool_pass = run.sampler.epoch + 1  # the pass over the question pool this step's questions start in
    groups, scores, selection, times = collect(run, step, stage_rollout_config(run, stage))
    episodes = [e for group in groups for e in group]
    metrics = score_metrics(episodes, [s for group in scores for s in group])
    correct = np.array([[s.outcome.correct for s in group] for group in scores], dtype=bool)  # [groups, G]
    metrics.update(
        groups=len(groups),
        informative_groups=selection.n_informative,
        duplicated_groups=selection.n_duplicated,
        solved_groups=int(correct.all(axis=1).sum()),
        unsolved_groups=int((~correct.any(axis=1)).sum()),
        max_context=stage.max_context,
        max_turns=stage.max_turns,
        pool_pass=pool_pass,
    )
    for group, group_scores in zip(groups, scores):
        for e, s in zip(group, group_scores):
            e.meta["rl"] = {
                "step": step + 1,
                "reward": s.reward,
                "correct": float(s.outcome.correct),
                "f1": s.outcome.f1,
                "format_ok": s.outcome.format_ok,
            }
    if is_main_process() and run.rl.episodes_every and (step + 1) % run.rl.episodes_every == 0:
        # before the update, so a stop inside it (resumed by `finish_step`) cannot lose them
        (run.out_dir / "episodes").mkdir(exist_ok=True)
        write_episodes(run.out_dir / "episodes" / f"step_{step + 1:06d}.jsonl", episodes)
    if selection.empty:
        metrics["skipped_update"] = 1.0
    else:
        rewards = np.array([[s.reward for s in scores[i]] for i in selection.groups])  # [B, G]
        chosen = [e for i in selection.groups for e in groups[i]]
        run.engine.unload()  # the update gets the engine's memory; its weights come back updated
        trim_heap()
        try:
            state, update_metrics = update(run, state, chosen, rewards, stage.max_context, step, stop)
        except UpdateStopped as stopped:  # what the step measured so far, for the resumed run to log
            stopped.progress.step_metrics = {**metrics, **times, "update_episodes": float(len(chosen))}
            stopped.progress.step_metrics["step_s"] = time.perf_counter() - t0  # so far: `finish_step` adds the rest
            raise
        after_update(run, state, update_metrics, len(chosen))
        metrics.update(update_metrics, skipped_update=0.0)
    metrics.update(times, step_s=time.perf_counter() - t0)
    return state, metrics, episodes


def _data_state(run: RLRun) -> dict:
    """What a checkpoint keeps besides the train state: the question sampler and β of the KL in the reward."""
    return {"pool": run.sampler.pool, "sampler": run.sampler.state(), "kl_reward_coef": run.kl_reward_coef}


def run_rl(recipe: dict, *, resume: bool = False, progress: bool = True, engine: Any = None) -> dict:
    """Train `rl.steps` RL steps, checkpointing on the way; returns the summary (also `summary.json`). A
    single-process run stopped by Ctrl-C or SIGTERM saves the step it was on and raises `Interrupted`. The recipe
    runs as given: `planning.fit.planned_recipe(recipe)` first sets the remat and micro-batch tokens that fit the
    devices, as `jaxseeker rl` does (unplanned, `rl.update_tokens: 0` takes a whole mini-batch a pass)."""
    run = prepare(recipe, resume=resume, engine=engine)
    main = is_main_process()
    t_start = time.perf_counter()
    writer = MetricsWriter(run.out_dir, enabled=main, resumed_from=run.start_step)
    state, history = run.state, []
    bar = tqdm(
        range(run.start_step, run.rl.steps),
        initial=run.start_step,
        total=run.rl.steps,
        desc="rl",
        disable=not (progress and main),
    )
    with stop_requests(enabled=process_info()["process_count"] == 1) as stop:

        def stopping() -> bool:
            """Whether Ctrl-C or SIGTERM came."""
            return stop.signal_name is not None

        if run.sampler is None:  # DUPO's pre-filter first: saved batch by batch, a stop there goes on at `--resume`
            try:
                run.sampler = QuestionSampler(dupo_pool(run, stopping, resume), run.rl.seed)
            except PrefilterStopped as stopped:
                run.checkpointer.close()
                writer.close()
                raise Stopped(stop.signal_name or "SIGTERM", f" in {stopped}; --resume goes on from there") from None
        for step in bar:
            try:
                if run.pending is not None:  # the step a stop interrupted inside its update: the rest of it
                    state, metrics = finish_step(run, state, run.pending, stopping)
                    after_update(run, state, metrics, int(metrics.pop("update_episodes")))
                    run.pending = None
                else:
                    state, metrics, _ = run_step(run, state, step, stopping)
            except UpdateStopped as stopped:
                save_mid_step(run.checkpointer, stopped, step, _data_state(run), run.recipe)
                run.checkpointer.close()
                writer.close()
                raise Interrupted(stop.signal_name or "SIGTERM", step, run.out_dir) from None
            done = step + 1
            writer.write(done, metrics)
            history.append(metrics)
            bar.set_postfix(
                reward=f"{metrics['reward']:.3f}", acc=f"{metrics['accuracy']:.2f}", step_s=f"{metrics['step_s']:.1f}"
            )
            stopped = stopping() and done < run.rl.steps  # Ctrl-C or SIGTERM came
            run.checkpointer.save(
                done, state, data_state=_data_state(run), config=run.recipe, force=done == run.rl.steps or stopped
            )
            preempted = done < run.rl.steps and run.checkpointer.preempted(done)  # all hosts saved this step
            if stopped or preempted:
                run.checkpointer.close()  # waits for the save
                writer.close()
                raise Interrupted(stop.signal_name or "SIGTERM", done, run.out_dir)
    run.checkpointer.close()
    writer.close()
    rows = read_metrics(run.out_dir / "metrics.jsonl") if main else []
    summary = {
        "name": run.recipe["name"],
        "steps": run.rl.steps,
        "resumed_from": run.start_step,
        "selection": run.rl.selection,
        "questions": len(run.sampler.pool),
        "first_reward": rows[0]["reward"] if rows else None,
        "final_reward": float(np.mean([r["reward"] for r in rows[-3:]])) if rows else None,
        "final_accuracy": float(np.mean([r["accuracy"] for r in rows[-3:]])) if rows else None,
        "mean_step_s": float(np.mean([m["step_s"] for m in history])) if history else None,
        "wall_s": round(time.perf_counter() - t_start, 2),
        "out_dir": str(run.out_dir),
    }
    if main:
        plot_curves(
            rows,
            ["reward", "accuracy", "format_rate", "entropy"],
            run.out_dir / "rl_curves.png",
            title=run.recipe["name"],
        )
        (run.out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
