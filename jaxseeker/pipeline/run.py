"""`jaxseeker pipeline`: world → QA (→ a fresh held-out set) → expert trajectories → tokenizer → (copy warm-up) → SFT
→ (context extension) → eval → RL → eval → export → report.

Everything goes under `runs/<name>/`; each stage's output is reused while its inputs are unchanged, so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

from jaxseeker import model
from jaxseeker.agent import Question, RolloutConfig
from jaxseeker.agent.command import make_engine
from jaxseeker.data import load_tokenizer, train_tokenizer
from jaxseeker.data.copies import digit_ids, ordinary_ids
from jaxseeker.eval import load_questions
from jaxseeker.eval.report import compare_question_sets, compare_results
from jaxseeker.eval.runner import run_eval
from jaxseeker.generation import SamplingConfig
from jaxseeker.pipeline.config import PipelineConfig
from jaxseeker.pipeline.questions import (SPLITS, draft, fresh_questions, read_jsonl, read_splits,
                                         write_name_pool)
from jaxseeker.pipeline.report import write_pipeline_report
from jaxseeker.pipeline.split import split_questions
from jaxseeker.pipeline.stages import StageRunner, StopAfter, fingerprint
from jaxseeker.synthesis import filters
from jaxseeker.synthesis.expert import ExpertConfig
from jaxseeker.synthesis.teachers import ExpertTeacher
from jaxseeker.synthesis.trajectories import synthesize, write_records
from jaxseeker.tools import build_registry
from jaxseeker.train.average import average_hf
from jaxseeker.train.copy_warmup import run_copy_warmup
from jaxseeker.train.export import export_hf
from jaxseeker.train.rejection import kept_trajectories, rejected_trajectories, rft_counts
from jaxseeker.train.rl import run_rl
from jaxseeker.train.sft import run_sft
from jaxseeker.world import build_world


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _questions(records: list[dict]) -> list[Question]:
    return [Question(r["question"], r["answer"], {k: v for k, v in r.items() if k not in ("question", "answer")}) for r in records]


def rollout_config(cfg: PipelineConfig) -> RolloutConfig:
    """The limits every rollout of the pipeline shares (expert, eval, RL)."""
    e = cfg.eval
    return RolloutConfig(max_tool_calls=e.max_tool_calls, max_context_tokens=e.max_context,
                         max_tokens_per_turn=e.max_tokens_per_turn, answer_reserve_tokens=64, date="2026-01-01",
                         prompt=e.prompt)


def run_pipeline(cfg: PipelineConfig, root: str | Path | None = None, *, progress: bool = True,
                 until: str | None = None) -> dict:
    """Run (or resume) every stage, or those up to `until`; returns the report dict (also `report.json` and
    `report.md`)."""
    if until is not None and until not in cfg.stages():
        raise ValueError(f"until: {until!r} is not a stage of this config; one of {list(cfg.stages())}")
    root = Path(root or f"runs/{cfg.name}")
    runner = StageRunner(root, until=None if until == cfg.stages()[-1] else until)  # the last: the whole run
    report: dict[str, Any] = {"name": cfg.name, "config": dataclasses.asdict(cfg)}
    try:
        _run_stages(cfg, root, runner, report, progress)
    except StopAfter as stop:
        report[stop.stage] = stop.metrics
    report["stage_wall_s"] = runner.timings
    report["reused_stages"] = runner.reused
    return write_pipeline_report(root, report)


def _run_stages(cfg: PipelineConfig, root: Path, runner: StageRunner, report: dict[str, Any], progress: bool) -> None:
    """The stages in order, each reused when its fingerprint is done; their metrics go into `report`."""
    world_key = fingerprint(dataclasses.asdict(cfg.world))
    world = build_world(cfg.world.source, size=cfg.world.size, seed=cfg.world.seed, countries=cfg.world.countries or None)
    report["world"] = {"entities": len(world), "pages": len(world.corpus), "relation_types": len(world.relation_types())}

    qa_key = fingerprint(world_key, dataclasses.asdict(cfg.qa))

    def qa_stage(out: Path) -> dict:
        records = []
        for i, (name, n) in enumerate(cfg.qa.recipes):
            records += [r.to_json() for r in draft(world, cfg.qa, name, n, cfg.qa.seed + i, progress).records]
        for i, r in enumerate(records):
            r["id"] = f"{r['tag']}-{i}"
        hubs = set(world.ids_of_type("country"))
        parts = split_questions(records, n_test=cfg.qa.n_test, n_rl=cfg.qa.n_rl, hub_ids=hubs, seed=cfg.qa.seed)
        for split in SPLITS:
            _write_jsonl(out / f"{split}.jsonl", parts[split])
        return {split: len(parts[split]) for split in SPLITS} | {"dropped_for_leakage": parts["dropped"]}

    report["qa"] = runner.run("qa", qa_key, qa_stage)
    qa_dir = root / "qa"
    fresh_key = fingerprint(qa_key, cfg.eval.fresh_questions, cfg.rl.fresh_questions)

    def qa_fresh_stage(out: Path) -> dict:
        # A second held-out set, apart from every split and from the RL stage's fresh pool: that pool is drawn
        # again here from the same seeds (the RL stage draws it only later), so the RL never meets these entities.
        splits = read_splits(qa_dir)
        pool = fresh_questions(world, cfg.qa, cfg.rl.fresh_questions, splits, progress) if cfg.rl.fresh_questions else []
        held_out = fresh_questions(world, cfg.qa, cfg.eval.fresh_questions, splits + pool, progress, draw=2,
                                    prefix="heldout")
        _write_jsonl(out / "test.jsonl", held_out)
        return {"test": len(held_out), "kept_apart_from": {"splits": len(splits), "rl_fresh_pool": len(pool)}}

    if cfg.eval.fresh_questions:
        report["qa_fresh"] = runner.run("qa_fresh", fresh_key, qa_fresh_stage)

    tools = cfg.tools.config()
    registry = build_registry(tools, corpus=world.corpus)
    page_texts = [f"{p.title}\n{p.text}" for p in world.corpus.pages]
    expert_key = fingerprint(qa_key, dataclasses.asdict(cfg.expert), cfg.tools.key(),
                             cfg.eval.limits(), cfg.policy.vocab_size)

    def expert_stage(out: Path) -> dict:
        # The rollout loop counts context in tokens, so the expert runs with a first tokenizer trained on the
        # pages and questions; the policy's own tokenizer is trained next, on the pages and these trajectories.
        first = train_tokenizer(page_texts + [r["question"] + " " + r["answer"] for r in read_jsonl(qa_dir / "train.jsonl")],
                                cfg.policy.vocab_size)
        e = cfg.expert
        teacher = ExpertTeacher(world, ExpertConfig(detour_rate=e.detour_rate, snippet_rate=e.snippet_rate,
                                                    slip_rate=e.slip_rate), title_first=tools.title_first)
        # That first tokenizer has not seen the prompt, urls or tool calls and counts about 2x the policy's tokens:
        # the expert gets twice the context and turn length, and SFT's over-length policy applies the policy's own.
        limits = dataclasses.replace(rollout_config(cfg), max_context_tokens=2 * cfg.eval.max_context,
                                     max_tokens_per_turn=2 * cfg.eval.max_tokens_per_turn)
        records, stats = synthesize(teacher, first, registry, _questions(read_jsonl(qa_dir / "train.jsonl")),
                                    filters.webdancer_funnel(), tries=cfg.expert.tries, config=limits,
                                    seed=e.seed, transform=teacher.weigh, progress=progress)
        write_records(out / "trajectories.jsonl", records)
        return {"trajectories": len(records), "questions": stats.questions, "episodes": stats.episodes,
                "untrained_turns": sum(r["provenance"].get("untrained_turns", 0) for r in records)}

    report["expert"] = runner.run("expert", expert_key, expert_stage)
    p = cfg.policy
    # The separators flag joins the key only when set, so tokenizers trained before it existed keep theirs.
    separators = ["drop_thousands_separators"] if p.drop_thousands_separators else []
    tok_key = fingerprint(expert_key, p.vocab_size, p.tokenizer_split, *separators)

    def tokenizer_stage(out: Path) -> dict:
        # Trained on what the policy reads and writes (system prompt, tool calls, observations included), so the
        # agent's scaffolding costs few tokens and more of each SFT row is the agent's own words.
        messages = [m["content"] for r in read_jsonl(root / "expert" / "trajectories.jsonl") for m in r["messages"]]
        tok = train_tokenizer(page_texts + messages, p.vocab_size, out, split=p.tokenizer_split,
                              drop_thousands_separators=p.drop_thousands_separators)
        return {"vocab": len(tok)}

    report["tokenizer"] = runner.run("tokenizer", tok_key, tokenizer_stage)
    tokenizer = load_tokenizer(root / "tokenizer")

    shape = {"model_type": "qwen3", "vocab_size": p.vocab_size, "hidden_size": p.hidden_size, "num_layers": p.num_layers,
             "num_heads": p.num_heads, "num_kv_heads": p.num_kv_heads, "head_dim": p.head_dim,
             "intermediate_size": p.intermediate_size, "rope_theta": p.rope_theta, "initializer_range": 0.02,
             "max_position_embeddings": 4096, "attention_impl": "blocked"}
    warmup_rows = p.copy_warmup_rows or p.batch_size
    warmup_key = fingerprint(tok_key, shape, p.copy_warmup_steps, p.copy_warmup_target_loss, p.copy_warmup_layers,
                             p.lr, warmup_rows, p.copy_warmup_digit_rate, p.copy_warmup_gap)

    def warmup_stage(out: Path) -> dict:
        # Copies of random token runs from random init (train.copy_warmup): forms the copying heads SFT then uses;
        # with copy_warmup_layers, in a shallower model that is then grown to the policy's depth.
        policy = model.ModelConfig(**shape)
        shallow = dataclasses.replace(policy, num_layers=p.copy_warmup_layers or p.num_layers)
        return run_copy_warmup(shallow, ordinary_ids(tokenizer), out / "hf", steps=p.copy_warmup_steps, lr=p.lr,
                               rows=warmup_rows, target_loss=p.copy_warmup_target_loss,
                               grow_to=policy if shallow != policy else None, progress=progress,
                               digits=digit_ids(tokenizer) if p.copy_warmup_digit_rate else None,
                               digit_rate=p.copy_warmup_digit_rate, max_gap=p.copy_warmup_gap,
                               checkpoint_dir=out / "checkpoints", save_every=max(1, p.copy_warmup_steps // 8))

    if p.copy_warmup_steps:
        report["warmup"] = runner.run("warmup", warmup_key, warmup_stage, resumable=True)
    # copy_warmup_rows reaches the SFT through warmup_key, the extend_* keys only the extension's own key: left out
    # here, so runs from before these keys keep their SFT.
    later = ("copy_warmup_rows", "extend_steps", "extend_seq_len")
    sft_key = fingerprint(warmup_key, {k: v for k, v in dataclasses.asdict(p).items() if k not in later})

    def sft_recipe(out: Path, start: dict, *, seq_len: int, batch_size: int, steps: int, lr: float, min_lr: float,
                   warmup_steps: int, seed: int, pool: str, train_files: tuple[Path, ...] = (),
                   unlikelihood: float = 0.0) -> dict:
        """A `jaxseeker sft` recipe over `train_files` (default the expert trajectories) with the policy section's
        data choices (`unlikelihood`: `data.unlikelihood_weight`, for rejected turns)."""
        return {
            "name": "-".join((cfg.name, *out.relative_to(root).parts)),  # e.g. demo-sft, demo-rl-seeds-2
            "model": start,
            "data": {"seq_len": seq_len, "batch_size": batch_size, "seed": seed, "num_threads": 0, "packing_bins": 64,
                     "context_weight": p.context_weight, "permute_digits": p.permute_digits, "name_pool": pool,
                     "copy_rate": p.copy_replay, "copy_digit_rate": p.copy_warmup_digit_rate,
                     "copy_gap": p.copy_warmup_gap} | ({"unlikelihood_weight": unlikelihood} if unlikelihood else {}),
            "optimizer": {"lr": lr, "min_lr": min_lr, "warmup_steps": warmup_steps, "weight_decay": 0.01},
            "train": {"train_files": [str(f) for f in train_files or (root / "expert" / "trajectories.jsonl",)],
                      "tokenizer": str(root / "tokenizer"),
                      "steps": steps, "log_every": max(1, steps // 50), "checkpoint_every": max(1, steps // 4),
                      "eval_fraction": 0.05, "out_dir": str(out), "chunk_size": 256},
        }

    def sft_summary(out: Path, recipe: dict, key: str, hf: Path | None = None) -> dict:
        """Train `recipe` (resuming), export it under `hf` (default `out/hf`), and say how many trajectory draws its
        rows (the config's `key`) cut."""
        seq_len = recipe["data"]["seq_len"]
        summary = run_sft(recipe, resume=True, progress=progress)
        export_hf(out, hf or out / "hf")
        if summary["truncated"]:
            runner.log(f"[{out.relative_to(root)}] {summary['truncated']} trajectory draws were cut at {key}={seq_len} "
                       f"tokens: their ends were never trained, while rollouts run to eval.max_context="
                       f"{cfg.eval.max_context}")
        return {k: summary.get(k) for k in ("final_loss", "eval_loss", "trained_tokens", "parameters", "truncated")} | {
            "seq_len": seq_len}

    def sft_stage(out: Path) -> dict:
        start = {"hf_path": str(root / "warmup" / "hf"), "attention_impl": "blocked"} if p.copy_warmup_steps else shape
        held_out = [qa_dir / "test.jsonl", qa_dir / "rl.jsonl"]
        pool = write_name_pool(world, held_out, out / "name_pool.tsv") if p.permute_names else ""
        recipe = sft_recipe(out, start, seq_len=p.seq_len, batch_size=p.batch_size, steps=p.steps, lr=p.lr,
                            min_lr=p.lr / 10, warmup_steps=max(1, p.steps // 20), seed=0, pool=pool)
        return sft_summary(out, recipe, "policy.seq_len")

    report["sft"] = runner.run("sft", sft_key, sft_stage, resumable=True)
    policy_dir, policy_key = root / "sft", sft_key
    if p.extend_steps:
        # Context extension: SFT rows of policy.seq_len cut the longest trajectories, so the policy never trains the
        # positions its rollouts reach and never the ends of those episodes (docs/learning_log.md, session 17). More
        # steps from the SFT policy, on rows as long as the rollouts' context (as many tokens a step), at the SFT's
        # final learning rate and on a new draw order, train them whole.
        extend_len = p.extend_seq_len or cfg.eval.max_context
        extend_key = fingerprint(sft_key, p.extend_steps, extend_len)

        def extend_stage(out: Path) -> dict:
            start = {"hf_path": str(root / "sft" / "hf"), "attention_impl": "blocked"}
            pool = str(root / "sft" / "name_pool.tsv") if p.permute_names else ""
            rows = max(1, p.batch_size * p.seq_len // extend_len)
            recipe = sft_recipe(out, start, seq_len=extend_len, batch_size=rows, steps=p.extend_steps, lr=p.lr / 10,
                                min_lr=p.lr / 10, warmup_steps=max(1, p.extend_steps // 30), seed=1, pool=pool)
            return sft_summary(out, recipe, "policy.extend_seq_len")

        report["extend"] = runner.run("extend", extend_key, extend_stage, resumable=True)
        policy_dir, policy_key = root / "extend", extend_key
    test = read_jsonl(qa_dir / "test.jsonl")
    fresh_test = read_jsonl(root / "qa_fresh" / "test.jsonl") if cfg.eval.fresh_questions else []

    def eval_stage(model_dir: Path, questions: list[dict]):
        """The stage that evaluates the policy under `model_dir` on `questions` (k rollouts each, judged)."""
        def fn(out: Path) -> dict:
            cfg_m, params = model.load_hf(model_dir)
            engine = make_engine(params, cfg_m, tokenizer, slots=cfg.eval.slots, max_len=cfg.eval.max_context,
                                 sampling=SamplingConfig(temperature=cfg.eval.temperature, top_p=cfg.eval.top_p))
            summary = run_eval(engine, tokenizer, registry, questions, out, k=cfg.eval.k, config=rollout_config(cfg),
                               progress=progress)
            return {key: summary[key] for key in ("pass_at_1", "pass_at_k", "invalid_rate", "termination", "tool_calls")} | {
                "by_level": {lvl: {"pass_at_1": s["pass_at_1"], "pass_at_k": s["pass_at_k"], "questions": s["questions"]}
                             for lvl, s in summary["by_level"].items()}}
        return fn

    eval_key = fingerprint(policy_key, cfg.eval.rollouts())
    report["eval_sft"] = runner.run("eval_sft", eval_key, eval_stage(policy_dir / "hf", test), resumable=True)
    if fresh_test:
        report["eval_sft_fresh"] = runner.run("eval_sft_fresh", fingerprint(eval_key, fresh_key),
                                              eval_stage(policy_dir / "hf", fresh_test), resumable=True)

    r = cfg.rl
    # the rft keys are left out of a policy-gradient run's key, so runs from before them keep their RL stage,
    # rft_rounds out of every first round's key, so adding rounds reuses it, and rft_unlikelihood and rft_seeds while
    # they are off, and the advantage while it is the default
    rft_only = (("rft_rounds",) + (() if r.method == "rft" else ("method", "rft_per_question"))
                + (() if r.advantage != "grpo" else ("advantage",))
                + (() if r.rft_unlikelihood else ("rft_unlikelihood",)) + (() if r.rft_seeds > 1 else ("rft_seeds",)))
    rl_fields = {k: v for k, v in dataclasses.asdict(r).items() if k not in rft_only}
    rl_key = fingerprint(policy_key, rl_fields, cfg.eval.limits())

    def rl_pool_files(out: Path) -> list[Path]:
        """The RL question files: the RL split, and the `rl.train_questions` / `rl.fresh_questions` ones under `out`."""
        files = [qa_dir / "rl.jsonl"]
        if r.train_questions:
            files.append(out / "train_questions.jsonl")
        if r.fresh_questions:
            files.append(out / "fresh_questions.jsonl")
        return files

    def rl_pool(out: Path) -> list[Path]:
        """Write the RL pool's sampled and fresh questions under `out`; returns its files (`rl_pool_files`)."""
        if r.train_questions:  # the RL split is small; training questions add groups (their names SFT saw renamed)
            train = read_jsonl(qa_dir / "train.jsonl")
            sample = random.Random(0).sample(train, min(r.train_questions, len(train)))
            _write_jsonl(out / "train_questions.jsonl", sample)
        if r.fresh_questions:  # questions on entities no split holds: RL on what SFT never saw, as the test is
            _write_jsonl(out / "fresh_questions.jsonl",
                         fresh_questions(world, cfg.qa, r.fresh_questions, read_splits(qa_dir), progress))
        return rl_pool_files(out)

    def rft_stage(out: Path, start: Path, round_: int, pool: list[Path]) -> dict:
        """RL by rejection-sampling fine-tuning, round `round_` from the policy under `start`: roll out the pool,
        keep the right episodes, fine-tune that policy on them (and, with `rft_unlikelihood`, away from the loops
        of the malformed turns)."""
        questions = [q for path in pool for q in load_questions(path)]  # ids for rows without one
        cfg_m, params = model.load_hf(start / "hf")
        engine = make_engine(params, cfg_m, tokenizer, slots=cfg.eval.slots, max_len=cfg.eval.max_context,
                             sampling=SamplingConfig(temperature=r.temperature, top_p=cfg.eval.top_p,
                                                     seed=r.seed + round_ - 1))
        run_eval(engine, tokenizer, registry, questions, out / "rollouts", k=r.group_size, config=rollout_config(cfg),
                 progress=progress)
        records = read_jsonl(out / "rollouts" / "results.jsonl")
        kept = kept_trajectories(records, r.rft_per_question)
        if not kept:
            raise RuntimeError(f"rl.method rft (round {round_}): none of the {len(records)} rollouts of "
                               f"{len(questions)} questions was right, well formed and ended by its answer; nothing "
                               "to fine-tune on")
        _write_jsonl(out / "trajectories.jsonl", kept)
        runner.log(f"[{out.name}] rft keeps {len(kept)} right episodes of {len(records)}")
        rejected = rejected_trajectories(records) if r.rft_unlikelihood else []
        if rejected:
            _write_jsonl(out / "rejected.jsonl", rejected)
            runner.log(f"[{out.name}] rft makes the loops of {len(rejected)} episodes' malformed turns unlikely")
        seq_len = cfg.eval.max_context  # rows hold every episode whole
        names = str(root / "sft" / "name_pool.tsv") if p.permute_names else ""

        def recipe(run: Path, seed: int) -> dict:
            return sft_recipe(run, {"hf_path": str(start / "hf"), "attention_impl": "blocked"}, seq_len=seq_len,
                              batch_size=max(1, p.batch_size * p.seq_len // seq_len), steps=r.steps, lr=r.lr,
                              min_lr=r.lr, warmup_steps=max(1, r.steps // 30), seed=seed, pool=names,
                              train_files=(out / "trajectories.jsonl",) + ((out / "rejected.jsonl",) if rejected else ()),
                              unlikelihood=r.rft_unlikelihood if rejected else 0.0)

        counts = {"rft": rft_counts(records, kept, rejected)}
        if r.rft_seeds == 1:
            return sft_summary(out, recipe(out, 1 + round_), "eval.max_context") | counts
        # A model soup: fine-tune 1 runs in `out` itself, fine-tune k >= 2 under seeds/k, each on its own data order;
        # fine-tune k's export is seeds/k/hf and the policy, out/hf, is their weight mean.
        seeds = [out / "seeds" / str(k) for k in range(1, r.rft_seeds + 1)]
        summaries = [sft_summary(run, recipe(run, 1 + round_ + 10 * k), "eval.max_context", hf=seed / "hf")
                     for k, (run, seed) in enumerate(zip([out] + seeds[1:], seeds))]
        average_hf([seed / "hf" for seed in seeds], out / "hf")
        runner.log(f"[{out.name}] the policy is the weight mean of {len(seeds)} fine-tunes (seeds/*/hf)")
        return summaries[0] | counts | {"seeds": len(seeds), "seed_final_losses": [s["final_loss"] for s in summaries]}

    def rft_round(start: Path, round_: int):
        """The stage of a later rft round: the first round's pool, from the policy under `start`."""
        return lambda out: rft_stage(out, start, round_, rl_pool_files(root / "rl"))

    def rl_stage(out: Path) -> dict:
        if r.method == "rft":
            return rft_stage(out, policy_dir, 1, rl_pool(out))
        rc = rollout_config(cfg)
        pool = [str(path) for path in rl_pool(out)]
        recipe = {
            "name": f"{cfg.name}-rl",
            "model": {"hf_path": str(policy_dir / "hf"), "attention_impl": "blocked"},
            "optimizer": {"lr": r.lr, "min_lr": r.lr, "warmup_steps": 0, "weight_decay": 0.0, "clip_norm": 1.0,
                          "eps": r.adam_eps},
            "rl": {"questions": pool, "steps": r.steps, "batch_questions": r.questions_per_step,
                   "group_size": r.group_size, "selection": r.selection, "dupo_filter_rollouts": r.group_size,
                   "chunk_size": 256, "pack": True, "seed": r.seed, "epochs": r.epochs,
                   "checkpoint_every": max(1, r.steps // 2), "out_dir": str(out), "kl_coef": r.kl_coef,
                   "advantage": r.advantage, "objective_kwargs": {"negative_weight": r.negative_weight}},
            "rollout": {"max_context_tokens": rc.max_context_tokens, "max_tokens_per_turn": rc.max_tokens_per_turn,
                        "answer_reserve_tokens": rc.answer_reserve_tokens, "max_tool_calls": rc.max_tool_calls,
                        "date": rc.date, "prompt": rc.prompt},
            "engine": {"min_window": 512},
            "sampling": {"temperature": r.temperature},
            "tools": {"enabled": list(tools.enabled), "top_k": tools.top_k, "visit": dataclasses.asdict(tools.visit),
                      "title_first": tools.title_first},
            "world": cfg.world.spec(),
            "reward": {"fn": r.reward, "judge": "em"},
        }
        summary = run_rl(recipe, resume=True, progress=progress)
        export_hf(out, out / "hf")
        return {k: summary.get(k) for k in ("first_reward", "final_reward", "final_accuracy", "mean_step_s", "questions")}

    report["rl"] = runner.run("rl", rl_key, rl_stage, resumable=True)
    rl_dir = root / "rl"
    for round_, name in enumerate(r.stages()[1:], start=2):  # later rft rounds, each from the last one's policy
        rl_key = fingerprint(rl_key, round_)
        report[name] = runner.run(name, rl_key, rft_round(rl_dir, round_), resumable=True)
        rl_dir = root / name
    report["eval_rl"] = runner.run("eval_rl", fingerprint(rl_key, eval_key), eval_stage(rl_dir / "hf", test),
                                   resumable=True)
    pairs = [(root / "eval_sft" / "results.jsonl", root / "eval_rl" / "results.jsonl")]
    report["rl_change"] = compare_results(*pairs[0], cfg.eval.k)
    if fresh_test:
        report["eval_rl_fresh"] = runner.run("eval_rl_fresh", fingerprint(rl_key, eval_key, fresh_key),
                                             eval_stage(rl_dir / "hf", fresh_test), resumable=True)
        pairs.append((root / "eval_sft_fresh" / "results.jsonl", root / "eval_rl_fresh" / "results.jsonl"))
        report["rl_change_fresh"] = compare_results(*pairs[1], cfg.eval.k)
        report["rl_change_held_out"] = compare_question_sets(pairs, cfg.eval.k)
