"""WebSeer self-reflection trajectories: a reasoner proposes, a verifier with tools judges, Ψ keeps only the truth.

The reasoner submits each proposal with `answer_submit`; the tool's feedback is a verifier's verdict
(`CORRECT` / `INCORRECT` plus its verification path). Ψ keeps a verdict only when it agrees with the
ground truth, re-sampling the verifier up to K times; a proposal no verifier sample judged rightly
makes the episode fail the `psi` stage. The reasoner goes on until its answer is right and judged
CORRECT (at most `n_max` submissions) and then gives it as `<answer>`, so a kept multi-round
trajectory holds the wrong answers, the verdicts, the reflections and the fix. The share of
multi-round episodes follows the single : multi ratio (WebSeer's best: 1.5).

Offline, the embedded expert plays both roles: as reasoner it proposes a wrong candidate on purpose
(`ExpertTeacher(submit=True, wrong_first_rate=…)`); as verifier (`ExpertVerifier`) it re-derives the
answer through the real tools and explains a rejection from the proposal's own page, never giving
the right answer away.
"""

from __future__ import annotations

import collections
import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any

from jaxseeker.agent.episode import Episode, Question
from jaxseeker.agent.loop import run_episodes
from jaxseeker.agent.parser import ToolCall, parse_answer, parse_tool_calls
from jaxseeker.agent.prompts import format_observation
from jaxseeker.agent.rollout_types import RolloutConfig
from jaxseeker.synthesis import reader
from jaxseeker.synthesis.expert import ExpertConfig, ExpertRun, judge_page
from jaxseeker.synthesis.filters import (
    KEEP,
    Judge,
    LLMCheck,
    Stage,
    Verdict,
    exact_judge,
    webdancer_funnel,
)
from jaxseeker.synthesis.plan import clues, make_plan
from jaxseeker.synthesis.teachers import ExpertTeacher
from jaxseeker.tools import ToolRegistry, answer_submit_tool

NEVER_ENDS = "\x00"  # a correct_marker no feedback starts with: the reasoner writes the final <answer> itself


@dataclasses.dataclass(frozen=True)
class ReflectionConfig:
    """Rounds, verifier re-samples and the single : multi-round mix."""

    n_max: int = 3  # submissions per episode
    k_verify: int = 3  # verifier samples per proposal (Ψ)
    mix_ratio: float = 1.5  # single-shot : multi-round episodes
    verifier_error_rate: float = 0.0  # offline verifier's chance to flip a verdict (Ψ must catch it)

    def __post_init__(self) -> None:
        if self.n_max < 1 or self.k_verify < 1 or self.mix_ratio < 0 or not 0 <= self.verifier_error_rate <= 1:
            raise ValueError(f"ReflectionConfig: bad values {self}")

    @property
    def multi_share(self) -> float:
        """The chance an episode is meant to be multi-round: 1 / (1 + mix_ratio)."""
        return 1.0 / (1.0 + self.mix_ratio)


@dataclasses.dataclass(frozen=True)
class Assessment:
    """A verifier's verdict on one proposal and the path that led to it."""

    correct: bool
    path: str


Verifier = Callable[[Question, str, int], Assessment]  # (question, proposal, sample index) -> assessment


def feedback_text(a: Assessment) -> str:
    """What the reasoner reads: `CORRECT. Verification: …` / `INCORRECT. Verification: …`."""
    return f"{'CORRECT' if a.correct else 'INCORRECT'}. Verification: {a.path}"


def drive(run: ExpertRun, registry: ToolRegistry) -> tuple[str | None, list[str]]:
    """Run an expert program directly on the tools (no loop): its final answer and the tools it called."""
    program, calls = run.program(), []
    turn = next(program)
    while True:
        made = [c for c in parse_tool_calls(turn) if isinstance(c, ToolCall)]
        if not made:
            return parse_answer(turn), calls
        calls += [c.name for c in made]
        texts = [registry.call(c.name, c.arguments).text for c in made]
        try:
            turn = program.send(format_observation(texts))
        except StopIteration:
            return None, calls


class ExpertVerifier:
    """The embedded expert as verifier: re-derives the answer through the tools and compares the proposal.

    A rejected entity proposal is explained by a clue its own page contradicts; the right answer is never
    named. `error_rate` flips verdicts at random (a fallible verifier, for Ψ to catch).
    """

    def __init__(
        self,
        teacher: ExpertTeacher,
        registry: ToolRegistry,
        *,
        judge: Judge = exact_judge,
        error_rate: float = 0.0,
        seed: int = 0,
    ):
        self.teacher, self.registry, self.judge = teacher, registry, judge
        self.error_rate, self.seed = error_rate, seed
        self.config = ExpertConfig(detour_rate=0.0, batch_rate=0.0, link_rate=1.0)

    def __call__(self, question: Question, proposal: str, attempt: int) -> Assessment:
        """Verify `proposal` for `question` (sample `attempt`)."""
        rng = random.Random(f"verify:{self.seed}:{attempt}:{question.question}:{proposal}")
        plan = make_plan(question.meta)
        run = ExpertRun(plan, self.teacher.knowledge, self.config, rng, question.question)
        derived, calls = drive(run, self.registry)
        correct = derived is not None and self.judge(question.question, proposal, derived)
        note = self.explain(plan, proposal, run.named) if not correct else "The evidence agrees with it."
        if rng.random() < self.error_rate:
            correct = not correct
        made = collections.Counter(calls)
        checked = ", ".join(
            f"{n} {name}{'es' if name == 'search' and n > 1 else 's' if n > 1 else ''}" for name, n in made.items()
        )
        return Assessment(correct, f"{note} (checked: {checked or 'no tool calls'})")

    def explain(self, plan: Any, proposal: str, named: dict[int, str]) -> str:
        """Why a proposal fails, from its own page when it is an entity the tools can show."""
        q = plan.query
        if q.count or q.answer_attr is not None:
            return f"The pages on the path do not support {proposal}."
        found = reader.parse_search(self.registry.call("search", {"query": [proposal]}).text)
        hit = next((h for r in found for h in r.hits if h.title == proposal), None)
        if hit is None:
            return f"No page for {proposal} was found."
        pages = reader.parse_visit(self.registry.call("visit", {"url": [hit.url], "goal": "facts"}).text)
        page = next((p for p in pages if p.title == proposal), None)
        if page is None:
            return f"The page of {proposal} could not be read."
        ok, evidence, phrase = judge_page(page.text, proposal, clues(plan, q.target, named))
        if ok is False:
            return (
                f"“{evidence}” But the answer must be one that {phrase}."
                if evidence
                else (f"{proposal}'s page does not show that it {phrase}.")
            )
        return f"{proposal} does not meet all the clues of the question."


class PsiFeedback:
    """The `answer_submit` feedback of one question: the first verifier sample agreeing with the truth (Ψ)."""

    def __init__(self, question: Question, verifier: Verifier, judge: Judge, k: int):
        self.question, self.verifier, self.judge, self.k = question, verifier, judge, k

    def __call__(self, answer: str) -> str:
        truth = self.question.answer is not None and self.judge(self.question.question, answer, self.question.answer)
        assessment = Assessment(False, "")
        for attempt in range(self.k):
            assessment = self.verifier(self.question, answer, attempt)
            if assessment.correct == truth:
                break
        return feedback_text(assessment)


def reflection_registry(
    base: ToolRegistry, verifier: Verifier, *, judge: Judge = exact_judge, k: int = 3
) -> Callable[[Question], ToolRegistry]:
    """The rollout loop's registry source: `base` plus an `answer_submit` whose feedback is Ψ-filtered."""
    return lambda question: base.extended(answer_submit_tool(PsiFeedback(question, verifier, judge, k)))


def psi(episode: Episode, *, judge: Judge = exact_judge) -> Verdict:
    """Every verdict the episode read agrees with the truth (CORRECT exactly for right answers)."""
    for s in episode.submissions:
        right = episode.answer is not None and judge(episode.question, s.answer, episode.answer)
        if s.feedback.startswith("CORRECT") != right:
            return Verdict(False, f"verdict on {s.answer!r} disagrees with the truth")
    return KEEP


def resolved(episode: Episode, *, n_max: int = 3) -> Verdict:
    """At least one and at most `n_max` submissions, the last one judged CORRECT."""
    n = len(episode.submissions)
    if not 1 <= n <= n_max:
        return Verdict(False, f"{n} submissions (1 to {n_max} allowed)")
    if not episode.submissions[-1].feedback.startswith("CORRECT"):
        return Verdict(False, "the last submission was not judged CORRECT")
    return KEEP


def reflection_funnel(
    *, judge: Judge = exact_judge, n_max: int = 3, max_actions: int = 30, llm_check: LLMCheck | None = None
) -> list[Stage]:
    """validity → correctness → psi → resolved → quality (with `llm_check`: also an LLM's review)."""
    dancer = webdancer_funnel(judge=judge, max_actions=max_actions, llm_check=llm_check)
    return [
        dancer[0],
        dancer[1],
        Stage("psi", lambda e: psi(e, judge=judge)),
        Stage("resolved", lambda e: resolved(e, n_max=n_max)),
        dancer[2],
    ]


def reflection_rollout_config(config: RolloutConfig, n_max: int) -> RolloutConfig:
    """The loop's limits for reflection episodes: the reasoner ends them with its own `<answer>`."""
    return dataclasses.replace(config, correct_marker=NEVER_ENDS, max_submissions=n_max + 1)


VERIFY_PROMPT = """Verify a proposed answer with the tools.

Question: {question}
Proposed answer: {proposal}

Check the proposal against every clue of the question. End with <answer>CORRECT</answer> or \
<answer>INCORRECT</answer>."""


class RolloutVerifier:
    """Any teacher as verifier: one verification episode through the rollout loop per sample."""

    def __init__(self, teacher: Any, tokenizer: Any, registry: ToolRegistry, config: RolloutConfig = RolloutConfig()):
        self.teacher, self.tokenizer, self.registry, self.config = teacher, tokenizer, registry, config

    def __call__(self, question: Question, proposal: str, attempt: int) -> Assessment:
        """The teacher's verdict on `proposal` (INCORRECT when it gives none); its thoughts as the path."""
        check = Question(VERIFY_PROMPT.format(question=question.question, proposal=proposal))
        engine = self.teacher.engine(self.tokenizer, [check], seed=attempt, max_len=self.config.max_context_tokens)
        try:
            episode = run_episodes(engine, self.tokenizer, self.registry, [check], self.config, progress=False)[0]
        finally:
            getattr(engine, "close", lambda: None)()
        verdict = (episode.prediction or "").strip().upper()
        path = " ".join(c.name for c in episode.tool_calls) or "no tool calls"
        return Assessment(verdict.startswith("CORRECT"), path)


def is_multi_round(record: dict[str, Any]) -> bool:
    """True for a record with more than one submission."""
    return record["provenance"].get("submissions", 1) > 1


def count_rounds(records: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(single-shot, multi-round) kept records, by their number of submissions."""
    multi = sum(map(is_multi_round, records))
    return len(records) - multi, multi


def balance_mix(records: Sequence[dict[str, Any]], ratio: float, seed: int = 0) -> list[dict[str, Any]]:
    """The records with single-shot : multi-round brought to `ratio` by setting aside random ones of the
    larger side (order kept)."""
    single = [i for i, r in enumerate(records) if not is_multi_round(r)]
    multi = [i for i, r in enumerate(records) if is_multi_round(r)]
    rng = random.Random(seed)
    if len(single) > ratio * len(multi):
        single = rng.sample(single, round(ratio * len(multi)))
    elif ratio > 0:
        multi = rng.sample(multi, min(len(multi), round(len(single) / ratio)))
    keep = set(single) | set(multi)
    return [r for i, r in enumerate(records) if i in keep]
