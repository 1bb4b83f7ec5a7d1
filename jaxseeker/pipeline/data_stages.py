"""The pipeline's data stages: questions (`qa`, `qa_fresh`), expert trajectories (`expert`) and, for a policy
trained from scratch, its tokenizer (`tokenizer`). Each is `stage(run, out) -> metrics` (`StageRunner.run`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from jaxseeker.data import train_tokenizer
from jaxseeker.pipeline.context import PipelineRun, questions_of, rollout_config
from jaxseeker.pipeline.questions import SPLITS, draft, fresh_questions, read_jsonl, read_splits
from jaxseeker.pipeline.split import split_questions
from jaxseeker.synthesis import filters
from jaxseeker.synthesis.teachers import ExpertTeacher
from jaxseeker.synthesis.trajectories import synthesize, write_records


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """One JSON object per line."""
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def page_texts(run: PipelineRun) -> list[str]:
    """Every page of the world as `title\\ntext` (what the tokenizers of a from-scratch policy are trained on)."""
    return [f"{p.title}\n{p.text}" for p in run.world.corpus.pages]


def qa_stage(run: PipelineRun, out: Path) -> dict:
    """The QA recipes' questions, split into train / RL / test with no non-hub entity shared between splits."""
    qa = run.cfg.qa
    records = []
    for i, (name, n) in enumerate(qa.recipes):
        records += [r.to_json() for r in draft(run.world, qa, name, n, qa.seed + i, run.progress).records]
    for i, r in enumerate(records):
        r["id"] = f"{r['tag']}-{i}"
    hubs = set(run.world.ids_of_type("country"))
    parts = split_questions(records, n_test=qa.n_test, n_rl=qa.n_rl, hub_ids=hubs, seed=qa.seed)
    for split in SPLITS:
        write_jsonl(out / f"{split}.jsonl", parts[split])
    return {split: len(parts[split]) for split in SPLITS} | {"dropped_for_leakage": parts["dropped"]}


def qa_fresh_stage(run: PipelineRun, out: Path) -> dict:
    """A second held-out set, apart from every split and from the RL stage's fresh pool: that pool is drawn again
    here from the same seeds (the RL stage draws it only later), so the RL never meets these entities."""
    cfg = run.cfg
    splits = read_splits(run.qa_dir)
    pool = (
        fresh_questions(run.world, cfg.qa, cfg.rl.fresh_questions, splits, run.progress)
        if cfg.rl.fresh_questions
        else []
    )
    held_out = fresh_questions(
        run.world, cfg.qa, cfg.eval.fresh_questions, splits + pool, run.progress, draw=2, prefix="heldout"
    )
    write_jsonl(out / "test.jsonl", held_out)
    return {"test": len(held_out), "kept_apart_from": {"splits": len(splits), "rl_fresh_pool": len(pool)}}


def expert_stage(run: PipelineRun, out: Path) -> dict:
    """Trajectories of the embedded expert on the training questions, through the real tools, filtered by the
    WebDancer funnel. The rollout loop counts context in tokens: with the policy's own tokenizer when it is
    pretrained; from scratch, with a first tokenizer trained on the pages and questions (the policy's is trained
    next, on these trajectories), which counts about twice the policy's tokens, so the expert gets twice the
    context and turn length and SFT's over-length policy applies the policy's own."""
    cfg, e = run.cfg, run.cfg.expert
    train = read_jsonl(run.qa_dir / "train.jsonl")
    limits = rollout_config(cfg)
    tokenizer = run.tokenizer
    if tokenizer is None:
        tokenizer = train_tokenizer(
            page_texts(run) + [r["question"] + " " + r["answer"] for r in train], cfg.policy.vocab_size
        )
        limits = dataclasses.replace(
            limits, max_context_tokens=2 * cfg.eval.max_context, max_tokens_per_turn=2 * cfg.eval.max_tokens_per_turn
        )
    teacher = ExpertTeacher(
        run.world,
        e.config(),
        title_first=cfg.tools.title_first,
    )
    records, stats = synthesize(
        teacher,
        tokenizer,
        run.registry,
        questions_of(train),
        filters.webdancer_funnel(),
        tries=e.tries,
        config=limits,
        seed=e.seed,
        transform=teacher.weigh,
        progress=run.progress,
    )
    write_records(out / "trajectories.jsonl", records)
    return {
        "trajectories": len(records),
        "questions": stats.questions,
        "episodes": stats.episodes,
        "untrained_turns": sum(r["provenance"].get("untrained_turns", 0) for r in records),
    }


def tokenizer_stage(run: PipelineRun, out: Path) -> dict:
    """A from-scratch policy's tokenizer, trained on what it reads and writes (system prompt, tool calls and
    observations included), so the agent's scaffolding costs few tokens and more of each SFT row is its own words."""
    p = run.cfg.policy
    messages = [m["content"] for r in read_jsonl(run.root / "expert" / "trajectories.jsonl") for m in r["messages"]]
    tok = train_tokenizer(
        page_texts(run) + messages,
        p.vocab_size,
        out,
        split=p.tokenizer_split,
        drop_thousands_separators=p.drop_thousands_separators,
    )
    return {"vocab": len(tok)}
