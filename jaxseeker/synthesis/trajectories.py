"""Rejection sampling of teacher trajectories through the real rollout loop, and the SFT records it writes.

Each round gives the teacher the questions not yet solved (round t uses seed `seed + t`), rolls them
out with `jaxseeker.agent.run_episodes` and runs every episode through the funnel as it finishes; a question
is done once one of its episodes passes, or after `tries` rounds (WebDancer: N = 5). A `synthesis.journal`
records each outcome as it comes, so a stopped run resumes where it was. A kept episode
becomes a record in the SFT format `jaxseeker.data` reads (chatml `messages`) with its provenance:
teacher, tries, the stages passed, recipe tag and level, tokens, tool calls, mode.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from jaxseeker.agent.episode import Episode, Question
from jaxseeker.agent.loop import RegistrySource, run_episodes
from jaxseeker.agent.rollout_types import RolloutConfig
from jaxseeker.errors import InputError
from jaxseeker.jsonl import json_lines
from jaxseeker.synthesis.filters import Stage, run_funnel
from jaxseeker.synthesis.journal import Journal

Transform = Callable[[Episode], tuple[list[dict[str, str]], dict[str, Any]]]  # kept episode -> (messages, extra)


@dataclasses.dataclass
class SynthStats:
    """What rejection sampling did: episodes per round, stage pass counts, drop reasons, tries of kept records."""

    questions: int = 0
    kept: int = 0
    episodes: int = 0
    wall_s: float = 0.0
    rounds: list[int] = dataclasses.field(default_factory=list)  # questions rolled out per round
    entered: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # stage → episodes in
    passed: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # stage → episodes out
    reasons: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # "stage: reason" → n
    tries: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # tries → kept records
    teacher_errors: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (written next to the trajectories as FILE.stats.json)."""
        return {
            "questions": self.questions,
            "kept": self.kept,
            "episodes": self.episodes,
            "wall_s": self.wall_s,
            "rounds": self.rounds,
            "entered": dict(self.entered),
            "passed": dict(self.passed),
            "reasons": dict(self.reasons.most_common(50)),
            "tries": {str(k): v for k, v in sorted(self.tries.items())},
            "teacher_errors": self.teacher_errors[:20],
        }

    def summary(self, stages: Sequence[str]) -> str:
        """A few lines for the terminal."""
        lines = [
            (
                f"kept {self.kept}/{self.questions} questions ({self.kept / max(1, self.questions):.0%}) from "
                f"{self.episodes} episodes in {len(self.rounds)} round(s), {self.wall_s:.1f}s "
                f"({self.episodes / max(self.wall_s, 1e-9):.0f} episodes/s)"
            )
        ]
        for name in stages:
            n_in, n_out = self.entered[name], self.passed[name]
            lines.append(f"  {name:<12} {n_out:>6}/{n_in:<6} pass {n_out / max(1, n_in):.0%}")
        for reason, n in self.reasons.most_common(5):
            lines.append(f"  dropped {n:>5}: {reason[:110]}")
        if self.tries:
            lines.append("  tries of kept: " + ", ".join(f"{k}: {v}" for k, v in sorted(self.tries.items())))
        if self.teacher_errors:
            lines.append(f"  teacher errors: {len(self.teacher_errors)} (first: {self.teacher_errors[0][:150]})")
        return "\n".join(lines)


def record_of(
    episode: Episode, question: Question, provenance: dict[str, Any], messages: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The SFT record of a kept episode: `messages` (what jaxseeker.data reads), question, answer, prediction,
    provenance (with the recipe tag / level of the question when it has them)."""
    prov = {"tag": question.meta.get("tag"), "level": question.meta.get("level"), **provenance}
    return {
        "messages": [dict(m) for m in (messages if messages is not None else episode.messages)],
        "question": episode.question,
        "answer": episode.answer,
        "prediction": episode.prediction,
        "provenance": {k: v for k, v in prov.items() if v is not None},
    }


def synthesize(
    teacher: Any,
    tokenizer: Any,
    registry: RegistrySource,
    questions: Sequence[Question],
    stages: Sequence[Stage],
    *,
    tries: int = 5,
    config: RolloutConfig = RolloutConfig(),
    seed: int = 0,
    mode: str = "react",
    transform: Transform | None = None,
    progress: bool = True,
    journal: Journal | None = None,
) -> tuple[list[dict[str, Any]], SynthStats]:
    """Rejection-sample trajectories: up to `tries` rounds per question; the kept records (question order).

    Each episode goes through the funnel as it finishes. With a `journal`, its outcome is recorded there at once,
    and outcomes the journal already holds (a stopped run's) are replayed instead of rolled out: a question keeps
    its engine request id (its place in the round), so a resumed run writes what an uninterrupted one would have.
    """
    if tries < 1:
        raise ValueError(f"tries must be >= 1, got {tries}")
    start = time.perf_counter()
    stats = SynthStats(questions=len(questions))
    kept: dict[int, dict[str, Any]] = {}

    def apply(outcome: dict[str, Any]) -> None:
        passed, failed = outcome["passed"], outcome["failed"]
        stats.entered.update(s.name for s in stages[: len(passed) + (failed is not None)])
        stats.passed.update(passed)
        if failed is not None:
            stats.reasons[f"{failed}: {outcome['reason']}"] += 1
        else:
            kept[outcome["index"]] = outcome["record"]
            stats.tries[outcome["round"] + 1] += 1

    pending = list(range(len(questions)))
    for round_index in range(tries):
        if not pending:
            break
        saved = journal.outcomes if journal is not None else {}
        todo = []  # places in the round of the questions still to roll out
        for g, i in enumerate(pending):
            if (round_index, i) in saved:
                apply(saved[round_index, i])
            else:
                todo.append(g)
        if journal is not None:
            stats.teacher_errors += journal.teacher_errors.get(round_index, [])

        def finished(episode: Episode, round_index: int = round_index, pending: list[int] = pending) -> None:
            outcome = _outcome(
                episode, pending[episode.group], round_index, questions, stages, teacher, mode, transform
            )
            apply(outcome)
            if journal is not None:
                journal.add(outcome)

        if todo:
            batch = [questions[pending[g]] for g in todo]
            engine = teacher.engine(tokenizer, batch, seed=seed + round_index, max_len=config.max_context_tokens)
            try:
                run_episodes(
                    engine, tokenizer, registry, batch, config, progress=progress, groups=todo, on_episode=finished
                )
            finally:
                getattr(engine, "close", lambda: None)()
            errors = [f"{rid}: {exc!r}" for rid, exc in getattr(engine, "errors", [])]
            stats.teacher_errors += errors
            if journal is not None and errors:
                journal.add({"round": round_index, "teacher_errors": errors})
        stats.rounds.append(len(pending))
        stats.episodes += len(pending)
        pending = [i for i in pending if i not in kept]
    stats.kept, stats.wall_s = len(kept), time.perf_counter() - start
    return [kept[i] for i in sorted(kept)], stats


def _outcome(
    episode: Episode,
    index: int,
    round_index: int,
    questions: Sequence[Question],
    stages: Sequence[Stage],
    teacher: Any,
    mode: str,
    transform: Transform | None,
) -> dict[str, Any]:
    """What the funnel made of question `index`'s episode in `round_index`: the stages passed, the one failed (and
    why), or the kept record (a JSON-ready dict, as `Journal` stores it)."""
    passed, failed, reason = run_funnel(stages, episode)
    outcome = {
        "round": round_index,
        "index": index,
        "passed": passed,
        "failed": None if failed is None else failed.name,
        "reason": reason,
        "record": None,
    }
    if failed is None:
        messages, extra = transform(episode) if transform is not None else (None, {})
        provenance = {
            "teacher": getattr(teacher, "name", type(teacher).__name__),
            "tries": round_index + 1,
            "filters": passed,
            "mode": mode,
            "tokens": len(episode.token_ids),
            "tool_calls": len(episode.tool_calls),
            **extra,
        }
        if episode.submissions:
            provenance["submissions"] = len(episode.submissions)
        outcome["record"] = record_of(episode, questions[index], provenance, messages)
    return outcome


def write_records(path: str | Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records as JSONL; returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            n += 1
    return n


def _record_problem(obj: Any) -> str | None:
    """Why a parsed line is not a trajectory record that `synth report` can read, or None."""
    if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
        return "a trajectory record needs a 'messages' list"
    for i, m in enumerate(obj["messages"]):
        if not isinstance(m, dict) or "role" not in m:
            return f"messages[{i}] must be an object with a 'role'"
        if m["role"] == "assistant" and not isinstance(m.get("content"), str):
            return f"messages[{i}]: an assistant message needs a string 'content'"
    provenance = obj.get("provenance", {})
    if not isinstance(provenance, dict):
        return f"'provenance' must be an object, got {type(provenance).__name__}"
    if not isinstance(provenance.get("teacher", ""), str):
        return f"provenance.teacher must be a string, got {provenance['teacher']!r}"
    for key in ("tokens", "tries"):
        try:
            int(provenance.get(key, 0))
        except (TypeError, ValueError, OverflowError):
            return f"provenance.{key} must be an integer, got {provenance[key]!r}"
    return None


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Trajectory records of a JSONL file (each needs `messages`); a bad line raises InputError naming FILE:LINE."""
    records = []
    for line_no, obj in json_lines(path):
        problem = _record_problem(obj)
        if problem is not None:
            raise InputError(f"{path}:{line_no}: {problem}")
        records.append(obj)
    return records
