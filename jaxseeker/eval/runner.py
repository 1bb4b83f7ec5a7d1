"""The evaluation runner: k rollouts per question through the rollout loop, judged, resumable.

Results are appended to `results.jsonl` after each chunk of questions (all k rounds of each), so a restarted
run skips every question already finished; the unfinished line a killed run may leave at the end is cut first.
Records have the keys `eval.metrics` reads.

A multi-submit episode (an `answer_submit` tool, `agent.submit.episode_tools`) is judged as RL scores it: its
answer is its final turn's `<answer>`, else its last submission (`Episode.prediction`), and its format is that of
its turns with the last submission as their answer turn when the final turn has none (`agent.submit.format_ok`);
its record lists the submissions with their feedback.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jaxseeker.agent import Episode, RolloutConfig, as_question, rollout
from jaxseeker.agent.submit import format_ok
from jaxseeker.eval.metrics import TOOL_TYPES
from jaxseeker.eval.report import read_results, write_report
from jaxseeker.jsonl import drop_torn_tail
from jaxseeker.rewards import evidence_recall, exact_match, llm_judge, token_f1
from jaxseeker.tools.config import TOOL_NAMES

Judge = Callable[
    [str, str | None, Any], tuple[bool | None, bool]
]  # (question, prediction, answer) → (correct, parse_error)
_THINK = re.compile(r"<think>(.*?)</think>", re.S)


def exact_match_judge(question: str, prediction: str | None, answer: Any) -> tuple[bool | None, bool]:
    """Normalised exact match against the reference (a string or a list of accepted strings)."""
    return (prediction is not None and exact_match(prediction, answer)), False


def f1_judge(threshold: float = 0.8) -> Judge:
    """Correct when token F1 with the reference reaches `threshold`."""

    def judge(question: str, prediction: str | None, answer: Any) -> tuple[bool | None, bool]:
        return (prediction is not None and token_f1(prediction, answer) >= threshold), False

    return judge


def llm_judge_fn(complete: Callable[[list[dict]], str], style: str = "browsecomp") -> Judge:
    """LLM-as-judge through an OpenAI-compatible `complete(messages) -> str`; parse failures are reported."""

    def judge(question: str, prediction: str | None, answer: Any) -> tuple[bool | None, bool]:
        if prediction is None:
            return False, False
        gold = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        result = llm_judge(question, prediction, gold, complete, style=style)
        return result.correct, result.parse_error is not None

    return judge


def judged_record(episode: Episode, question: dict, round_: int, judge: Judge) -> dict:
    """One metrics record (`eval.metrics.REQUIRED_KEYS` and more, with the transcript) for a finished episode; a
    multi-submit one is judged on its final answer or else its last submission (see the module doc)."""
    correct, parse_error = judge(episode.question, episode.prediction, question["answer"])
    turns = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    counts = dict.fromkeys(TOOL_TYPES, 0)
    for call in episode.tool_calls:
        if call.name in TOOL_NAMES:  # a call to a tool that does not exist is a format slip, not a tool call
            counts[call.name] = counts.get(call.name, 0) + 1
    thinks = [t for turn in turns for t in _THINK.findall(turn)]
    return {
        "question_id": str(question["id"]),
        "round": round_,
        "correct": correct,
        "judge_parse_error": parse_error,
        "termination": episode.termination,
        "tool_calls": counts,
        "format_ok": format_ok(episode),
        "answer_len": len((episode.prediction or "").split()),
        "think_len": sum(len(t.split()) for t in thinks),
        "level": question.get("level", "all"),
        "tag": question.get("tag", question.get("topic", "all")),
        "prediction": episode.prediction,
        "answer": question["answer"],
        "question": episode.question,
        "turns": episode.turns,
        "tokens": len(episode.token_ids),
        "evidence": evidence_recall(episode.tool_calls, question.get("meta", {}).get("urls", ())),
        "submissions": [dataclasses.asdict(s) for s in episode.submissions],
        "messages": episode.messages,
    }


def run_eval(
    engine: Any,
    tokenizer: Any,
    registry: Any,
    questions: Sequence[dict],
    out_dir: str | Path,
    *,
    k: int = 4,
    config: RolloutConfig = RolloutConfig(),
    judge: Judge = exact_match_judge,
    progress: bool = True,
    warm_up: bool = True,
) -> dict:
    """Evaluate `questions` (records with id, question, answer; see `eval.load_questions`) with k rollouts each;
    skip questions whose k rounds are already in `out_dir/results.jsonl`; write the report; return the summary.
    `registry`: a ToolRegistry, or a function Question → ToolRegistry (`agent.submit.episode_tools`).

    Every question runs in one rollout, so the engine's slots stay full until the last episodes; each episode is
    judged and appended to `results.jsonl` as it ends. Question n's request ids are `n:round` (its place in
    `questions`), so a resumed run samples each question it rolls out again as the whole run would have.
    `warm_up`: compile the engine's programs before the first episode (`Engine.warm_up`) and log, on stderr, the
    programs compiled during the eval and the engine's host time."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.jsonl"
    if path.exists() and (cut := drop_torn_tail(path)):
        print(f"{path}: cut the unfinished last line ({cut} bytes) an interrupted run left", file=sys.stderr)
    done = _keep_whole_questions(path, k)
    places = [n for n, q in enumerate(questions) if str(q["id"]) not in done]
    if places:
        items = [
            as_question(
                {"question": questions[n]["question"], "answer": questions[n]["answer"], "id": questions[n]["id"]}
            )
            for n in places
        ]  # the answer: for `answer_submit`
        engine_log = _EngineLog(engine, len(items) * k) if warm_up and hasattr(engine, "warm_up") else None
        with path.open("a", encoding="utf-8") as f:

            def write(episode: Episode) -> None:
                record = judged_record(episode, questions[episode.group], episode.sample, judge)
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
                f.flush()

            rollout(
                engine,
                tokenizer,
                registry,
                items,
                config,
                n_per_question=k,
                progress=progress,
                groups=places,
                on_episode=write,
            )
        if engine_log is not None:
            print(engine_log.line(), file=sys.stderr)
    wanted = {str(q["id"]) for q in questions}
    records = [r for (qid, round_), r in _records_by_round(path).items() if qid in wanted and round_ < k]
    return write_report(records, k, out / "report")


def _keep_whole_questions(path: Path, k: int) -> set[str]:
    """The ids of the questions whose k rounds `path` holds; the records of any other question (one a stopped run
    left part-way, rolled out again whole on resume) are dropped from the file, so it never holds a round twice."""
    records = _records_by_round(path)
    rounds = Counter(qid for qid, round_ in records if round_ < k)
    whole = {qid for qid, n in rounds.items() if n >= k}
    kept = [r for (qid, _), r in records.items() if qid in whole]
    if path.exists() and len(kept) < sum(1 for line in path.open(encoding="utf-8") if line.strip()):
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), encoding="utf-8")
        tmp.replace(path)
    return whole


class _EngineLog:
    """Warms the engine up for `requests` requests (logged on stderr), then counts what XLA compiles and the
    engine's work from then on."""

    def __init__(self, engine: Any, requests: int) -> None:
        from jaxseeker.generation import roofline
        from jaxseeker.generation.warmup import counts

        self._engine, self._counts = engine, counts  # imported here: the runner loads no jax until an eval runs
        print(engine.warm_up(requests).line(), file=sys.stderr)
        self._ceilings = roofline.measure(n=1024)
        self._start, self._host, self._calls = counts(), engine.host_s, engine.decode_calls
        self._work, self._wall = engine.tally.workload(), time.perf_counter()

    def line(self) -> str:
        """The programs compiled since the warm-up, the engine's host time per decode call, and the eval's wall against
        the roofline of the engine's work (`generation.roofline`, the machine's ceilings: the best of their
        measures before and after the eval)."""
        from jaxseeker.generation import roofline

        wall = time.perf_counter() - self._wall
        made = self._counts() - self._start
        calls = max(self._engine.decode_calls - self._calls, 1)
        host = self._engine.host_s - self._host
        work = self._engine.tally.workload() - self._work
        return (
            f"engine: {made.compiled} programs compiled during the eval ({made.loaded} loaded from the persistent "
            f"compilation cache); host time {host:.1f} s, {1000 * host / calls:.1f} ms a decode call\n"
            f"engine: {roofline.report(work, wall, roofline.best(self._ceilings, roofline.measure(n=1024)))}"
        )


def _records_by_round(path: Path) -> dict[tuple[str, int], dict]:
    """The results file's records by (question id, round); a question rolled out again (after a run that stopped
    part-way through writing it, or an earlier run with a smaller k) replaces its earlier records round by round."""
    return {(str(r["question_id"]), r["round"]): r for r in read_results(path)} if path.exists() else {}
