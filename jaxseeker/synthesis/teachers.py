"""Teachers: whoever writes the trajectories, always through the real tools and the real rollout loop.

A teacher gives the rollout loop an Engine-contract object for one round of questions
(`teacher.engine(tokenizer, questions, seed=…, max_len=…)`). Three kinds:

- `ExpertTeacher`: the embedded expert (`expert.ExpertRun`), offline and cheap (no model calls);
- `OpenAITeacher`: any OpenAI-compatible chat server (the QwQ / GPT-4o / Claude role of the papers),
  given the loop's own messages (system prompt with the tool schemas, question, observations);
- `PolicyTeacher`: the jaxseeker policy on the generation Engine (self-distillation, RFT).

The first two are text teachers: a `writer(questions, seed)` returns `write_turn(messages, request_id)`,
which `TurnEngine` turns into tokens; `denoise.DenoisedTeacher` wraps any text teacher.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol

from jaxseeker.agent.engine import make_engine
from jaxseeker.agent.episode import Episode, Question
from jaxseeker.data.chat import IM_END
from jaxseeker.generation import SamplingConfig
from jaxseeker.synthesis.expert import ExpertConfig, ExpertRun, Knowledge
from jaxseeker.synthesis.plan import make_plan
from jaxseeker.synthesis.reasoned import ReasonedRun
from jaxseeker.synthesis.turn_engine import TurnEngine, TurnWriter
from jaxseeker.tools import ChatResult, LLMClient
from jaxseeker.world import World


class Teacher(Protocol):
    """Anything that can play one round of episodes: an Engine-contract object for the rollout loop."""

    name: str

    def engine(self, tokenizer: Any, questions: Sequence[Question], *, seed: int, max_len: int) -> Any:
        """The engine for these questions (a fresh one per round)."""
        ...


class TextTeacher:
    """A teacher that writes turns as text: `writer(questions, seed)` and a thread count for `TurnEngine`."""

    name = "text"
    workers = 0
    slots = 256

    def writer(self, questions: Sequence[Question], seed: int) -> TurnWriter:
        """`write_turn(messages, request_id) -> text` for one round."""
        raise NotImplementedError

    def engine(
        self,
        tokenizer: Any,
        questions: Sequence[Question],
        *,
        seed: int = 0,
        max_len: int = 32768,
        wrap: Callable[[TurnWriter], TurnWriter] | None = None,
    ) -> TurnEngine:
        """A TurnEngine over this teacher's writer (optionally wrapped, e.g. by the denoising context)."""
        write = self.writer(questions, seed)
        release = getattr(write, "release", None)
        return TurnEngine(
            tokenizer,
            wrap(write) if wrap else write,
            slots=self.slots,
            max_len=max_len,
            workers=self.workers,
            on_release=release,
        )


def world_knowledge(world: World, top_k: int = 5, *, title_first: bool = False) -> Knowledge:
    """What the expert may consult to plan: names by id, page texts and types by name, the titles a search lists
    (`title_first`: the tools' search lists the pages titled with the query first)."""
    by_name: dict[str, str] = {}
    for i, e in world.entities.items():
        by_name.setdefault(e.name, i)

    def peek(name: str) -> str | None:
        i = by_name.get(name)
        page = world.page(world.url(i)) if i is not None else None
        return page.text if page is not None else None

    @functools.lru_cache(maxsize=65536)
    def titles(query: str) -> tuple[str, ...]:
        return tuple(h.title for h in world.corpus.search(query, top_k, title_first=title_first))

    def kind(name: str) -> str | None:
        i = by_name.get(name)
        return world.entity(i).type if i is not None else None

    def look(name: str) -> tuple[str | None, str, str, int]:
        """What a miscopy of `name` keeps: its type, first letter, parenthesised qualifier and word count."""
        head, _, qualifier = name.partition(" (")
        return kind(name), name[:1], qualifier, len(head.split())

    @functools.cache
    def lookalikes() -> dict[tuple, list[str]]:
        alike: dict[tuple, list[str]] = {}
        for name in by_name:
            alike.setdefault(look(name), []).append(name)
        return alike

    @functools.lru_cache(maxsize=65536)
    def slips(name: str) -> tuple[str, ...]:
        # The policy's miscopies are other names it has seen, of the same kind and look (`Lewisville (Illinois,
        # US)` for `Lawrenceville (Illinois, US)`); kept only when their search does not list `name`.
        others = [n for n in lookalikes().get(look(name), ()) if n != name]
        picked = random.Random(name).sample(others, min(8, len(others)))
        return tuple(n for n in picked if name not in titles(n))

    return Knowledge(name=lambda i: world.entity(i).name, peek=peek, titles=titles, kind=kind, slips=slips)


class _ExpertWriter:
    """One expert run per request; each turn continues it with the last observation of the conversation."""

    def __init__(self, teacher: ExpertTeacher, questions: Sequence[Question], seed: int):
        self.teacher, self.seed = teacher, seed
        self.by_text = {q.question: q for q in reversed(questions)}
        self.runs: dict[str, Generator[str, str, Any]] = {}

    def __call__(self, messages: list[dict[str, str]], request_id: str) -> str:
        if not any(m["role"] == "assistant" for m in messages):
            self.runs[request_id] = self.start(messages, request_id)
            return next(self.runs[request_id])
        try:
            return self.runs[request_id].send(messages[-1]["content"])
        except StopIteration:
            return ""

    def start(self, messages: list[dict[str, str]], request_id: str) -> Generator[str, str, Any]:
        """A new run for the conversation's question."""
        text = next(m["content"] for m in messages if m["role"] == "user")
        question = self.by_text.get(text)
        if question is None:
            raise ValueError(f"expert: the question {text[:80]!r} is not among this round's questions")
        t = self.teacher
        rng = random.Random(f"{self.seed}:{request_id}:{text}")
        wrong_first = t.submit and rng.random() < t.wrong_first_rate
        kind = ReasonedRun if t.config.reasoning else ExpertRun
        run = kind(make_plan(question.meta), t.knowledge, t.config, rng, text, submit=t.submit, wrong_first=wrong_first)
        t.untrained[text] = run.untrained
        t.latest[text] = run
        return run.program()

    def release(self, request_id: str) -> None:
        """Forget a finished episode."""
        self.runs.pop(request_id, None)


class ExpertTeacher(TextTeacher):
    """The embedded expert over `world` (the world whose pages the tools serve).

    `submit`: propose answers with `answer_submit` (WebSeer self-reflection); `wrong_first_rate`: the
    chance, per episode, of proposing a wrong answer on purpose before the right one; `title_first`: the search
    tool lists the pages titled with the query first (`tools.title_first`), as the expert then plans for.
    """

    name = "expert"

    def __init__(
        self,
        world: World,
        config: ExpertConfig = ExpertConfig(),
        *,
        submit: bool = False,
        wrong_first_rate: float = 0.0,
        slots: int = 256,
        title_first: bool = False,
    ):
        self.world, self.config, self.submit = world, config, submit
        self.wrong_first_rate, self.slots = wrong_first_rate, slots
        self.knowledge = world_knowledge(world, title_first=title_first)
        self.untrained: dict[str, list[str]] = {}  # question → turns of its latest run written as mistakes
        self.latest: dict[str, ExpertRun] = {}  # question → its latest run (for the provenance of its record)

    def writer(self, questions: Sequence[Question], seed: int) -> TurnWriter:
        """The expert's turns for these questions (each needs the QA record's evidence in its meta)."""
        for i, q in enumerate(questions):
            try:
                make_plan(q.meta)
            except ValueError as exc:
                raise ValueError(f"questions[{i}] ({q.question[:60]!r}): {exc}") from None
        return _ExpertWriter(self, questions, seed)

    def weigh(self, episode: Episode) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """A `synthesize` transform: the episode's messages with `"weight": 0` on the turns its run wrote as
        mistakes (`ExpertConfig.slip_rate`), so SFT shows the recovery without training the mistake; the
        provenance counts the run's oracle jumps and marks a question that names nothing."""
        slips = {turn.strip() for turn in self.untrained.get(episode.question, ())}
        messages = [
            dict(m, weight=0) if m["role"] == "assistant" and m["content"].strip() in slips else dict(m)
            for m in episode.messages
        ]
        n = sum(m.get("weight") == 0 for m in messages)
        extra = {"untrained_turns": n} if n else {}
        run = self.latest.get(episode.question)
        if run is not None and run.jumps:
            extra["oracle_jumps"] = run.jumps
        if run is not None and not run.plan.anchors:
            extra["names_nothing"] = True
        return messages, extra


def clean_turn(text: str) -> str:
    """A chat model's reply as an assistant turn: stripped, cut at its own end-of-turn token."""
    cut = text.find(IM_END)
    return (text[:cut] if cut >= 0 else text).strip()


def reply_turn(reply: ChatResult) -> str:
    """The assistant turn of a chat completion: its text, after its thinking in `<think>` tags when the server
    returned the thinking apart (a reasoning model behind vLLM's `--reasoning-parser`, DeepSeek, OpenRouter) and
    the text holds none, so long-CoT trajectories keep it."""
    thinking = reply.reasoning.strip()
    if thinking and "<think>" not in reply.text:
        return clean_turn(f"<think>\n{thinking}\n</think>\n\n{reply.text.strip()}")
    return clean_turn(reply.text)


class OpenAITeacher(TextTeacher):
    """A chat-completions server as the teacher: it reads the loop's messages and writes the next turn."""

    name = "openai"

    def __init__(
        self,
        client: LLMClient,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        workers: int = 8,
        slots: int = 64,
    ):
        self.client, self.temperature, self.max_tokens = client, temperature, max_tokens
        self.workers, self.slots = workers, slots

    def writer(self, questions: Sequence[Question], seed: int) -> TurnWriter:
        """Each turn is one chat completion over the conversation so far (stopped before an observation)."""
        params: dict[str, Any] = {"stop": ["<tool_response>"]}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens

        def write(messages: list[dict[str, str]], request_id: str) -> str:
            return reply_turn(self.client.chat(messages, **params))

        return write


@dataclasses.dataclass
class PolicyTeacher:
    """The jaxseeker policy on the generation Engine; each round samples with its own seed."""

    params: Any
    cfg: Any
    sampling: SamplingConfig = SamplingConfig(temperature=0.6, top_p=0.95)
    slots: int = 16
    steps_per_call: int = 8
    name: str = "policy"

    def engine(self, tokenizer: Any, questions: Sequence[Question], *, seed: int = 0, max_len: int = 32768) -> Any:
        """A generation Engine over the policy's weights (stops as the rollout loop expects)."""
        sampling = dataclasses.replace(self.sampling, seed=self.sampling.seed + seed)
        return make_engine(
            self.params,
            self.cfg,
            tokenizer,
            slots=self.slots,
            max_len=max_len,
            sampling=sampling,
            steps_per_call=self.steps_per_call,
        )
