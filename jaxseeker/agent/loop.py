"""The host-side ReAct rollout loop: many episodes in flight on one engine, tools on a thread pool.

One thread drives the engine: between `engine.step()` calls it admits queued episodes into free slots, hands
finished tool results back as observations (`engine.extend`) and releases finished episodes. Tool calls run on a
thread pool and are polled, never awaited, while some slot decodes; only when no slot decodes does the driver block
on the first tool to finish (the engine's idle time, `RolloutStats.idle_fraction`). With `lockstep_tools` it waits
for every call before each engine step, so which rows share a step never depends on a tool's latency.

Per assistant turn:
- an `<answer>` ends the episode (termination "answer"; tool calls in the same turn are not run);
- else every `<tool_call>` block is run (several per turn allowed); a malformed block becomes an
  error observation, and the results of the turn form ONE observation message;
- a turn with neither a valid call nor an answer is a format error: the policy reads an error
  observation and tries again; `max_format_errors` (default 3) such turns IN A ROW end the episode
  with "format_error" (a valid call resets the count);
- a turn whose calls would take the episode past `max_tool_calls` ends it ("max_tool_calls"; none
  of those calls run);
- when the next observation would leave less than `answer_reserve_tokens` of context
  (`max_context_tokens` or the engine's cache), the loop asks ONCE for a final answer instead (the
  observation is dropped, as WebSailor does); the episode then ends with "max_context", its
  prediction being the answer of that last turn if it gave one;
- `timeout_s` is checked between turns and while waiting for tools (a turn itself is bounded by
  `max_tokens_per_turn`); calls still running at a timeout are abandoned and not recorded;
- multi-submit (SRRL): when the episode's registry has `answer_submit`, every successful submission
  is recorded with its feedback; the episode ends ("answer") when the feedback starts with
  `correct_marker` or after `max_submissions` submissions.
A turn that stops on a stop string or a length limit is closed by the loop with `<|im_end|>` (mask 0).
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from tqdm.auto import tqdm

from jaxseeker.agent import prompts
from jaxseeker.agent.episode import Episode, Question, Submission, ToolCallRecord, as_question
from jaxseeker.agent.parser import ToolCall, ToolCallError, parse_answer, parse_tool_calls
from jaxseeker.agent.prompts import Renderer
from jaxseeker.agent.rollout_types import RolloutConfig, RolloutResult, RolloutStats
from jaxseeker.generation.keys import episode_key
from jaxseeker.tools.base import ToolRegistry, ToolResult

RegistrySource = ToolRegistry | Callable[[Question], ToolRegistry]


@dataclasses.dataclass
class _Run:
    """Mutable state of one episode in flight."""

    rid: str
    question: Question
    group: int
    sample: int
    registry: ToolRegistry
    messages: list[dict[str, str]]
    start: float
    ids: list[int] = dataclasses.field(default_factory=list)
    mask: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)
    sent: int = 0  # tokens of `ids` the engine holds
    records: list[ToolCallRecord] = dataclasses.field(default_factory=list)
    submissions: list[Submission] = dataclasses.field(default_factory=list)
    pending: list[tuple[ToolCall | ToolCallError, Future | None]] = dataclasses.field(default_factory=list)
    tools_started: float = 0.0
    tool_wait_s: float = 0.0
    turns: int = 0
    format_errors: int = 0
    errors_in_row: int = 0
    asked_final: bool = False
    prediction: str | None = None

    def append(self, tokens: Sequence[int], sampled: bool, logprobs: Sequence[float] | None = None) -> None:
        """Add context tokens: sampled by the policy (mask 1, their log-probs) or written by the loop."""
        self.ids.extend(int(t) for t in tokens)
        self.mask.extend([1 if sampled else 0] * len(tokens))
        if sampled:
            self.logprobs.extend(float(p) for p in logprobs)
        else:
            self.logprobs.extend([0.0] * len(tokens))


class _Loop:
    """The driver's state; `run` is the whole rollout."""

    def __init__(
        self,
        engine: Any,
        tokenizer: Any,
        registry: RegistrySource,
        config: RolloutConfig,
        progress: bool,
        on_episode: Callable[[Episode], None] | None = None,
    ):
        self.engine, self.config = engine, config
        self.on_episode = on_episode
        self.render = Renderer(tokenizer)
        self.registry = registry
        self.progress = progress
        self.runs: dict[str, _Run] = {}
        self.decoding: set[str] = set()
        self.waiting: set[str] = set()
        self.done: list[Episode] = []
        self.stats = RolloutStats()
        self.pool = ThreadPoolExecutor(max_workers=config.tool_workers, thread_name_prefix="tool")

    # ---- episode life ---------------------------------------------------------------------------------------

    def admit(self, question: Question, group: int, sample: int) -> None:
        """Start an episode: system prompt + question, submitted to a free slot."""
        registry = self.registry(question) if callable(self.registry) else self.registry
        messages = prompts.initial_messages(
            question.question, registry.schemas(), date=self.config.date, compact=self.config.prompt == "compact"
        )
        run = _Run(f"{group}:{sample}", question, group, sample, registry, messages, time.perf_counter())
        prompt = self.render.prompt_ids(messages)
        run.append(prompt, sampled=False)
        room = min(self.config.max_context_tokens, self.engine.max_len) - len(prompt)
        if room < 1:
            self.finish(run, "max_context")
            return
        budget = min(self.config.max_tokens_per_turn, room - self.config.answer_reserve_tokens)
        self.runs[run.rid] = run
        key = episode_key(question.meta.get("id", question.question), sample)
        self.engine.submit(run.rid, prompt, max_new_tokens=budget if budget >= 1 else room, key=key)
        run.sent = len(run.ids)
        self.decoding.add(run.rid)

    def finish(self, run: _Run, termination: str) -> None:
        """Close the token record like the SFT rendering, release the slot, store the Episode."""
        if run.rid in self.runs:
            self.engine.release(run.rid)
            del self.runs[run.rid]
        self.decoding.discard(run.rid)
        self.waiting.discard(run.rid)
        for future in [f for _, f in run.pending if f is not None]:
            future.cancel()
        if run.turns == 0:
            run.ids, run.mask, run.logprobs = [], [], []
            run.append(self.render.conversation_ids(run.messages), sampled=False)
        else:
            run.append(self.render.tail_ids(run.messages), sampled=False)
        tool_s = sum(r.latency_s for r in run.records)
        self.done.append(
            Episode(
                question=run.question.question,
                messages=run.messages,
                token_ids=run.ids,
                loss_mask=run.mask,
                logprobs=run.logprobs,
                termination=termination,
                prediction=run.prediction,
                answer=run.question.answer,
                tool_calls=run.records,
                submissions=run.submissions,
                format_errors=run.format_errors,
                turns=run.turns,
                group=run.group,
                sample=run.sample,
                meta=dict(run.question.meta),
                timings={"wall_s": time.perf_counter() - run.start, "tool_s": tool_s, "tool_wait_s": run.tool_wait_s},
            )
        )

    def timed_out(self, run: _Run) -> bool:
        """True once the episode has run longer than `timeout_s`."""
        return time.perf_counter() - run.start > self.config.timeout_s

    # ---- turns ----------------------------------------------------------------------------------------------

    def on_turn(self, run: _Run, tokens: list[int], logprobs: list[float], reason: str) -> None:
        """An assistant turn ended: record it, then answer / run tools / report a format error / stop."""
        self.decoding.discard(run.rid)
        run.turns += 1
        run.append(tokens, sampled=True, logprobs=logprobs)
        run.sent = len(run.ids)  # the engine holds what it sampled
        self.stats.sampled_tokens += len(tokens)
        content, closed = self.render.turn_content(tokens)
        if not closed:
            run.append(self.render.end_of_turn_ids, sampled=False)
        run.messages.append({"role": "assistant", "content": content})
        answer = parse_answer(content)
        if answer is not None:
            run.prediction = answer
        if answer is not None or run.asked_final or reason == "context":
            self.finish(run, "max_context" if run.asked_final or reason == "context" else "answer")
            return
        if self.timed_out(run):
            self.finish(run, "timeout")
            return
        items = parse_tool_calls(content)
        calls = [c for c in items if isinstance(c, ToolCall)]
        if not calls:
            run.format_errors += 1
            run.errors_in_row += 1
            if run.errors_in_row >= self.config.max_format_errors:
                self.finish(run, "format_error")
                return
            texts = [prompts.format_error_text(e.message) for e in items] or [prompts.NO_ACTION_ERROR]
            if reason == "length":
                texts.append(
                    prompts.format_error_text(
                        f"your turn was cut after {len(tokens)} tokens (the per-turn limit): write shorter turns"
                    )
                )
            self.observe(run, texts)
            return
        run.errors_in_row = 0
        if len(run.records) + len(calls) > self.config.max_tool_calls:
            self.finish(run, "max_tool_calls")
            return
        run.tools_started = time.perf_counter()  # before submitting: the wait then covers every tool's latency
        run.pending = [
            (c, self.pool.submit(run.registry.call, c.name, c.arguments) if isinstance(c, ToolCall) else None)
            for c in items
        ]
        self.waiting.add(run.rid)

    def on_results(self, run: _Run) -> None:
        """All tool calls of the turn returned: record them, check submissions, send the observation."""
        self.waiting.discard(run.rid)
        run.tool_wait_s += time.perf_counter() - run.tools_started
        texts, submitted = [], False
        for item, future in run.pending:
            if future is None:
                texts.append(prompts.format_error_text(item.message))
                continue
            result: ToolResult = future.result()
            run.records.append(
                ToolCallRecord(run.turns, result.name, dict(result.arguments), result.error, result.latency_s)
            )
            self.stats.tool_calls += 1
            texts.append(result.text)
            if result.name == "answer_submit" and result.error is None:
                run.submissions.append(Submission(str(item.arguments.get("answer", "")).strip(), result.text))
                run.prediction, submitted = run.submissions[-1].answer, True
        run.pending = []
        if submitted and (
            run.submissions[-1].feedback.startswith(self.config.correct_marker)
            or len(run.submissions) >= self.config.max_submissions
        ):
            self.finish(run, "answer")
        elif self.timed_out(run):
            self.finish(run, "timeout")
        else:
            self.observe(run, texts)

    def observe(self, run: _Run, texts: list[str]) -> None:
        """Send the observation and resume decoding, or ask for the final answer when context runs short."""
        message = {"role": "user", "content": prompts.format_observation(texts)}
        extension = self.render.extension_ids(run.messages, message)
        room = self.room(run, len(extension))
        budget = min(self.config.max_tokens_per_turn, room - self.config.answer_reserve_tokens)
        if budget < 1:
            self.ask_final(run)
            return
        self.resume(run, message, extension, budget)

    def ask_final(self, run: _Run) -> None:
        """The one final-answer request at the context limit (or the end, if even that does not fit)."""
        message = {"role": "user", "content": prompts.FINAL_ANSWER_REQUEST}
        extension = self.render.extension_ids(run.messages, message)
        budget = min(self.config.max_tokens_per_turn, self.room(run, len(extension)))
        if budget < 1:
            self.finish(run, "max_context")
            return
        run.asked_final = True
        self.resume(run, message, extension, budget)

    def room(self, run: _Run, n_new: int) -> int:
        """Tokens the episode could still sample after `n_new` more context tokens."""
        by_config = self.config.max_context_tokens - len(run.ids) - n_new
        by_engine = self.engine.context_left(run.rid) - (len(run.ids) - run.sent) - n_new
        return min(by_config, by_engine)

    def resume(self, run: _Run, message: dict[str, str], extension: list[int], budget: int) -> None:
        """Append `message` and hand its tokens (and any unsent end-of-turn token) to the engine."""
        run.messages.append(message)
        run.append(extension, sampled=False)
        self.engine.extend(run.rid, run.ids[run.sent :], max_new_tokens=budget)
        run.sent = len(run.ids)
        self.decoding.add(run.rid)

    # ---- the driver -----------------------------------------------------------------------------------------

    def run(self, queue: collections.deque[tuple[Question, int, int]]) -> RolloutResult:
        """Drive the engine until every queued episode is done."""
        start = time.perf_counter()
        bar = tqdm(total=len(queue), unit="episode", desc="rollout", disable=not self.progress)
        reported = 0  # episodes handed to `on_episode` (a disabled bar does not count)
        try:
            while queue or self.runs:
                tick = time.perf_counter()
                while queue and self.engine.free_slots() > 0:
                    self.admit(*queue.popleft())
                if self.config.lockstep_tools and self.waiting:
                    self.wait_for_tools(every=True)
                for rid in [r for r in self.waiting if all(f is None or f.done() for _, f in self.runs[r].pending)]:
                    self.on_results(self.runs[rid])
                if self.decoding:
                    events = self.engine.step()
                    self.stats.step_s += time.perf_counter() - tick
                    self.stats.steps += 1
                    for event in events:
                        self.on_turn(
                            self.runs[event.request_id], list(event.tokens), list(event.logprobs), event.reason
                        )
                elif self.waiting:
                    self.wait_for_tools()
                for episode in self.done[reported:] if self.on_episode is not None else ():
                    self.on_episode(episode)
                reported = len(self.done)
                finished = len(self.done) - bar.n
                if finished:
                    bar.update(finished)
                    bar.set_postfix(collections.Counter(e.termination for e in self.done), refresh=False)
        finally:
            self.pool.shutdown(wait=False, cancel_futures=True)
            bar.close()
        self.stats.wall_s = time.perf_counter() - start
        self.stats.episodes = len(self.done)
        self.stats.terminations = dict(collections.Counter(e.termination for e in self.done))
        return RolloutResult(sorted(self.done, key=lambda e: (e.group, e.sample)), self.stats)

    def wait_for_tools(self, every: bool = False) -> None:
        """Wait (idle) for a tool call (`every`: for each) or the next deadline to pass; time out late episodes."""
        now = time.perf_counter()
        runs = [self.runs[r] for r in self.waiting]
        deadline = min(r.start + self.config.timeout_s for r in runs)
        futures = [f for r in runs for _, f in r.pending if f is not None]
        wait(futures, timeout=max(0.0, deadline - now) + 1e-3, return_when=ALL_COMPLETED if every else FIRST_COMPLETED)
        self.stats.idle_s += time.perf_counter() - now
        for run in runs:
            if self.timed_out(run) and not all(f is None or f.done() for _, f in run.pending):
                self.finish(run, "timeout")


def rollout(
    engine: Any,
    tokenizer: Any,
    registry: RegistrySource,
    questions: Sequence[str | dict[str, Any] | Question],
    config: RolloutConfig = RolloutConfig(),
    *,
    n_per_question: int = 1,
    progress: bool = True,
    first_group: int = 0,
    groups: Sequence[int] | None = None,
    on_episode: Callable[[Episode], None] | None = None,
) -> RolloutResult:
    """Roll out `n_per_question` episodes per question on `engine`; episodes and timing statistics.

    `engine` follows the `jaxseeker.generation.Engine` interface (and has `max_len`); `registry` is a
    ToolRegistry shared by all episodes, or a function Question → ToolRegistry (e.g. one with an
    `answer_submit` tool whose feedback knows that question's answer). Question i is group `first_group + i`
    (episodes' `group`, engine request ids "group:sample"); `groups` gives each question its group instead. An
    episode's sampling is keyed by its question (its `id`, else its text) and sample index (`episode_key`), with the
    engine's seed: it draws the same tokens whatever batch, order or slot it runs in. `on_episode` is called with
    each episode as it finishes (e.g. to save it before the others end).
    """
    if n_per_question < 1:
        raise ValueError(f"n_per_question must be >= 1, got {n_per_question}")
    items = [as_question(q, f"questions[{i}]") for i, q in enumerate(questions)]
    if groups is None:
        groups = range(first_group, first_group + len(items))
    elif len(groups) != len(items):
        raise ValueError(f"groups: {len(groups)} group ids for {len(items)} questions")
    queue = collections.deque((q, g, s) for g, q in zip(groups, items, strict=True) for s in range(n_per_question))
    return _Loop(engine, tokenizer, registry, config, progress, on_episode).run(queue)


def run_episodes(
    engine: Any,
    tokenizer: Any,
    registry: RegistrySource,
    questions: Sequence[str | dict[str, Any] | Question],
    config: RolloutConfig = RolloutConfig(),
    *,
    n_per_question: int = 1,
    progress: bool = True,
    groups: Sequence[int] | None = None,
    on_episode: Callable[[Episode], None] | None = None,
) -> list[Episode]:
    """The episodes of `rollout(...)` (ordered by question, then sample)."""
    return rollout(
        engine,
        tokenizer,
        registry,
        questions,
        config,
        n_per_question=n_per_question,
        progress=progress,
        groups=groups,
        on_episode=on_episode,
    ).episodes
