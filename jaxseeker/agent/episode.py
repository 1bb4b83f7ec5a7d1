"""The record of one rollout: the SFT trajectory (chatml `messages`) plus the token-level view RL trains on.

`token_ids` is everything the policy's context held, in order; `loss_mask` is 1 exactly on the tokens
the policy sampled (0 on system / question / observation tokens and on the `<|im_end|>` the loop
writes itself after a turn that stopped on a stop string or a length limit); `logprobs` is the
sampling log-probability of each sampled token (0 elsewhere). When the sampled tokens are the
canonical tokenization of their text (always for the scripted engine, almost always for a trained
policy), `token_ids` equals `jaxseeker.data.tokenize_chat(messages)` ids — see `rendering_matches`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from jaxseeker.data.chat import tokenize_chat
from jaxseeker.errors import InputError
from jaxseeker.jsonl import json_lines

TERMINATIONS = ("answer", "max_tool_calls", "max_context", "format_error", "timeout")


@dataclasses.dataclass(frozen=True)
class ToolCallRecord:
    """One tool call of an episode: in which assistant `turn`, what was called, its error (None: ok), its time."""

    turn: int
    name: str
    arguments: dict[str, Any]
    error: str | None
    latency_s: float


@dataclasses.dataclass(frozen=True)
class Submission:
    """One `answer_submit` of a multi-submit (SRRL) episode and the feedback it got."""

    answer: str
    feedback: str


@dataclasses.dataclass
class Episode:
    """One rollout. `answer` is the reference answer (from the questions file); `prediction` the policy's."""

    question: str
    messages: list[dict[str, str]]
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    termination: str
    prediction: str | None = None
    answer: str | None = None
    tool_calls: list[ToolCallRecord] = dataclasses.field(default_factory=list)
    submissions: list[Submission] = dataclasses.field(default_factory=list)
    format_errors: int = 0  # assistant turns with neither a valid tool call nor an answer
    turns: int = 0  # assistant turns
    group: int = 0  # index of the question in the rollout's question list
    sample: int = 0  # index of this episode among the question's n samples
    timings: dict[str, float] = dataclasses.field(default_factory=dict)  # wall_s, tool_s, tool_wait_s
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)  # other keys of the question record

    def __post_init__(self) -> None:
        if self.termination not in TERMINATIONS:
            raise ValueError(f"Episode.termination: {self.termination!r} is not one of {list(TERMINATIONS)}")
        n = len(self.token_ids)
        if len(self.loss_mask) != n or len(self.logprobs) != n:
            raise ValueError(
                f"Episode: token_ids ({n}), loss_mask ({len(self.loss_mask)}) and logprobs "
                f"({len(self.logprobs)}) must have the same length"
            )

    @property
    def num_sampled(self) -> int:
        """How many tokens the policy sampled (the number of ones in `loss_mask`)."""
        return int(sum(self.loss_mask))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the SFT record keys (`messages`, `question`, `answer`) and the rollout fields."""
        return {
            "question": self.question,
            "answer": self.answer,
            "prediction": self.prediction,
            "termination": self.termination,
            "messages": [dict(m) for m in self.messages],
            "token_ids": [int(t) for t in self.token_ids],
            "loss_mask": [int(m) for m in self.loss_mask],
            "logprobs": [float(p) for p in self.logprobs],
            "tool_calls": [dataclasses.asdict(c) for c in self.tool_calls],
            "submissions": [dataclasses.asdict(s) for s in self.submissions],
            "format_errors": self.format_errors,
            "turns": self.turns,
            "group": self.group,
            "sample": self.sample,
            "timings": dict(self.timings),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Episode:
        """The Episode of a `to_json` dict; a missing or unknown key is a ValueError naming it."""
        if not isinstance(obj, Mapping):
            raise TypeError(f"an episode must be a JSON object, got {type(obj).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(obj) - known)
        if unknown:
            raise ValueError(f"episode: unknown key(s) {unknown}; known: {sorted(known)}")
        required = ("question", "messages", "token_ids", "loss_mask", "logprobs", "termination")
        missing = [k for k in required if k not in obj]
        if missing:
            raise ValueError(f"episode: missing key(s) {missing}")
        values = dict(obj)
        values["tool_calls"] = [ToolCallRecord(**c) for c in obj.get("tool_calls", [])]
        values["submissions"] = [Submission(**s) for s in obj.get("submissions", [])]
        values["messages"] = [dict(m) for m in obj["messages"]]
        return cls(**values)


def rendering_matches(episode: Episode, tokenizer: Any) -> bool:
    """True when `token_ids` are `tokenize_chat(messages)` ids and the sampled tokens lie inside its mask."""
    ids, mask = tokenize_chat(episode.messages, tokenizer)  # [tokens], [tokens]
    if len(ids) != len(episode.token_ids) or not np.array_equal(ids, np.asarray(episode.token_ids)):
        return False
    return bool(np.all(mask >= np.asarray(episode.loss_mask, dtype=np.int32)))


def write_episodes(path: str | Path, episodes: Iterable[Episode]) -> int:
    """Write episodes as JSONL (one `to_json` object a line); returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for episode in episodes:
            f.write(json.dumps(episode.to_json(), ensure_ascii=False) + "\n")
            n += 1
    return n


def read_episodes(path: str | Path) -> list[Episode]:
    """Episodes from a JSONL file written by `write_episodes`; a bad line raises ValueError naming FILE:LINE."""
    episodes = []
    for line_no, obj in json_lines(path):
        try:
            episodes.append(Episode.from_json(obj))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{line_no}: {exc}") from exc
    return episodes


@dataclasses.dataclass(frozen=True)
class Question:
    """One question to roll out: its text, the reference answer if known, and the record's other keys."""

    question: str
    answer: str | None = None
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)


def as_question(item: str | Mapping[str, Any] | Question, where: str = "question") -> Question:
    """A Question from a string, a Question, or a mapping with a non-empty 'question' (and maybe 'answer')."""
    if isinstance(item, Question):
        return item
    if isinstance(item, str):
        item = {"question": item}
    if not isinstance(item, Mapping):
        raise TypeError(f"{where}: expected a string or an object with a 'question', got {type(item).__name__}")
    text = item.get("question")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: 'question' must be a non-empty string, got {text!r}")
    answer = item.get("answer")
    if answer is not None and not isinstance(answer, str):
        answer = json.dumps(answer, ensure_ascii=False)  # numbers and lists of aliases as their JSON text
    meta = {k: v for k, v in item.items() if k not in ("question", "answer")}
    return Question(text, answer, meta)


def numbered_questions(path: str | Path) -> list[tuple[int, Question]]:
    """(line number, Question) for every record of a JSONL file of {"question", "answer"?, …}; a bad line or an
    empty file raises InputError naming FILE:LINE (or the file)."""
    numbered = []
    for line_no, obj in json_lines(path):
        try:
            numbered.append((line_no, as_question(obj, f"{path}:{line_no}")))
        except (TypeError, ValueError) as err:  # the message names FILE:LINE
            raise InputError(str(err)) from None
    if not numbered:
        raise InputError(f"{path}: no questions")
    return numbered


def read_questions(path: str | Path) -> list[Question]:
    """Questions from a JSONL file of {"question", "answer"?, …}; a bad line raises InputError naming FILE:LINE."""
    return [question for _, question in numbered_questions(path)]
