"""WebExplorer with an LLM (`synth webexplorer --explorer openai`): it explores, writes a question, then evolves it.

Exploration: seeds are drawn from the world with `random.Random(seed)` (each at most once). For each seed the LLM
runs one episode of the real rollout loop (`agent.rollout`, a `TurnEngine` over `OpenAITeacher`) with the world's
local `search` and `visit` tools: `EXPLORE_PROMPT` asks it to gather connected facts across pages and to end with
`<answer>{"question": …, "answer": …}</answer>`, one question needing several of those facts. Seeds are rolled out
together (the engine's slots, `workers` chat requests at once; with `progress`, the loop's bar shows them).
Evolution, long-to-short: up to `rounds` chat calls, each asked by `EVOLVE_PROMPT` for one edit (remove the most
salient clue, blur a date / place / number, describe a named entity) with the same, still unique answer; it stops
at the first reply that does not parse, repeats an earlier version of the question or leaks the answer, and the
last good question is kept.

Grounding: the answer must appear (both sides `checks.normalize`d) in the title or text of a world page the explorer
opened with a successful `visit`; search snippets do not count, so the answer is a value the explorer read on a page.

Level: 3 when at least 2 evolution rounds succeeded and the explorer opened pages of at least 3 entities; else 1
when the answer is on the seed's own page and at most 2 entity pages were opened (a fact of the seed); else 2.

Drop reasons (`SynthResult.dropped`): llm_error (a chat request failed after the client's retries: the seed is
dropped, the run goes on), unparsable_answer (no final `<answer>` with a JSON question and answer), bad_answer
(empty, or longer than `max_answer_words` words), few_pages (fewer than `min_pages` pages opened), ungrounded,
leak (the explorer's question gives the answer away, `checks.LeakCheck`), no_evolution (no round succeeded: as
the rule recipe, only evolved questions are kept), duplicate (the same normalised question, or the same answer
from the same opened entities, as a kept one). The records carry no structured query (`meta.query`).
"""

from __future__ import annotations

import collections
import dataclasses
import random
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import json_repair

from jaxseeker.agent import Episode, Question, RolloutConfig, rollout, split_think
from jaxseeker.synthesis.qa.checks import Dedup, LeakCheck, normalize
from jaxseeker.synthesis.qa.driver import SynthResult
from jaxseeker.synthesis.qa.record import QARecord
from jaxseeker.synthesis.teachers import OpenAITeacher
from jaxseeker.synthesis.turn_engine import TurnWriter
from jaxseeker.tools import LLMClient, LLMError, ToolError, ToolsConfig, build_registry
from jaxseeker.tools.base import check_arguments
from jaxseeker.tools.visit import VISIT_PARAMETERS
from jaxseeker.world import World

EXPLORE_PROMPT = (
    "Your task is to write one hard question for a deep-search benchmark by exploring the web from a seed "
    "entity.\n\n"
    "Seed entity: {name}\n\n"
    "1. Explore: search for the seed, open its page with the visit tool, then follow links and further searches "
    "to entities connected to it. Gather connected facts from several pages (at least {min_pages}).\n"
    "2. Write ONE question that can only be answered by combining several of the facts you read, across pages. Its "
    "answer must be a short entity name or value (a name, a date, a number) that you read on one of the pages, it "
    "must be the only correct answer, and the question must not contain it.\n"
    "3. Then give your final answer as a JSON object with the question and its answer, and nothing else:\n"
    '<answer>{{"question": "…", "answer": "…"}}</answer>'
)

EVOLVE_PROMPT = (
    "You make search questions harder without changing their answer. You are given a question and its answer. "
    "Rewrite the question with exactly one of these edits:\n"
    "- remove: drop the most salient clue, the one that gives the answer away most easily;\n"
    "- blur: make one date, place or number vague (a year into a decade, a city into its region, a figure into a "
    "range);\n"
    "- describe: replace the name of an entity by a description of it.\n"
    "The answer must stay exactly the same and remain the only correct answer, so keep enough clues. Never write "
    "the answer in the question.\n"
    'Reply with one JSON object and nothing else: {"question": "the new question", "edit": "remove", "blur" or '
    '"describe"}'
)

EDITS = ("remove", "blur", "describe")


@dataclasses.dataclass(frozen=True)
class ExplorerConfig:
    """Evolution rounds, the explorer's tool budget, the checks' thresholds, concurrency and the seeds tried."""

    rounds: int = 5
    max_tool_calls: int = 30
    max_context_tokens: int = 32768
    min_pages: int = 2
    max_answer_words: int = 8
    workers: int = 8  # chat requests at once (explorer turns) and evolutions at once
    slots: int = 64  # episodes in the engine at once
    max_attempts: int | None = None  # seeds explored at most; None: 3 n + 10
    date: str | None = None  # date in the explorer's system prompt; None: today


@dataclasses.dataclass(frozen=True)
class Exploration:
    """One explorer episode's seed, question and answer, the pages it opened and those holding the answer."""

    seed: str
    question: str
    answer: str
    urls: tuple[str, ...]
    answer_urls: tuple[str, ...]


def parse_object(text: str | None) -> dict[str, Any] | None:
    """The JSON object in a model's text (after its thinking; near-JSON repaired), or None."""
    if not text:
        return None
    try:
        found = json_repair.loads(split_think(text)[1])
    except Exception:  # noqa: BLE001 - whatever json_repair cannot read is no object
        return None
    return found if isinstance(found, dict) else None


def read_final(text: str | None) -> tuple[str, str] | None:
    """(question, answer) of the explorer's final answer JSON, both stripped, or None when it has no question."""
    found = parse_object(text)
    if found is None or not isinstance(found.get("question"), str) or not found["question"].strip():
        return None
    answer = found.get("answer")
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        answer = str(answer)
    return (found["question"].strip(), answer.strip()) if isinstance(answer, str) else None


def opened_urls(episode: Episode, world: World) -> list[str]:
    """The world pages the explorer opened with successful `visit` calls, in order, once each."""
    urls: list[str] = []
    for call in episode.tool_calls:
        if call.name != "visit" or call.error is not None:
            continue
        try:
            asked = check_arguments(VISIT_PARAMETERS, call.arguments)["url"]
        except ToolError:
            continue
        urls += [u.strip() for u in asked if world.page(u.strip()) is not None]
    return list(dict.fromkeys(urls))


def on_page(world: World, url: str, answer: str) -> bool:
    """True when the page at `url` holds `answer` in its title or text (both normalised)."""
    page = world.page(url)
    wanted = normalize(answer)
    return page is not None and bool(wanted) and f" {wanted} " in f" {normalize(page.title)} {normalize(page.text)} "


def entities_of(world: World, urls: Sequence[str]) -> list[str]:
    """Ids of the world entities whose pages these are (pages of no entity left out), once each."""
    return list(dict.fromkeys(e.id for u in urls if (e := world.entity_at(u)) is not None))


def explored(episode: Episode, world: World, seed: str, cfg: ExplorerConfig) -> tuple[Exploration | None, str]:
    """The checks before evolution: (the exploration, "kept") or (None, why it is dropped)."""
    final = read_final(episode.prediction)
    if final is None:
        return None, "unparsable_answer"
    question, answer = final
    if not answer or len(answer.split()) > cfg.max_answer_words:
        return None, "bad_answer"
    urls = opened_urls(episode, world)
    if len(urls) < cfg.min_pages:
        return None, "few_pages"
    holding = tuple(u for u in urls if on_page(world, u, answer))
    if not holding:
        return None, "ungrounded"
    return Exploration(seed, question, answer, tuple(urls), holding), "kept"


def evolve_messages(question: str, answer: str) -> list[dict[str, str]]:
    """The chat of one evolution round."""
    return [
        {"role": "system", "content": EVOLVE_PROMPT},
        {"role": "user", "content": f"Question: {question}\nAnswer: {answer}"},
    ]


def evolve(
    client: LLMClient, question: str, answer: str, rounds: int, leaks: Callable[[str], bool]
) -> tuple[list[str], list[str]]:
    """(the question's versions, first to last; the edit of each round): up to `rounds` rounds, stopping at a reply
    that does not parse, repeats a version or leaks the answer. LLMError when a request fails."""
    history, edits = [question], []
    for _ in range(rounds):
        found = parse_object(client.chat(evolve_messages(history[-1], answer)).text)
        new = found.get("question") if found is not None else None
        if not isinstance(new, str) or not new.strip():
            break
        new = new.strip()
        if normalize(new) in {normalize(q) for q in history} or leaks(new):
            break
        history.append(new)
        edits.append(found.get("edit") if found.get("edit") in EDITS else "other")
    return history, edits


def explorer_level(world: World, seed: str, answer: str, entities: Sequence[str], rounds: int) -> int:
    """3: evolved twice or more over 3+ entity pages; 1: the answer is on the seed's page, 2 pages at most; else 2."""
    if rounds >= 2 and len(entities) >= 3:
        return 3
    return 1 if len(entities) <= 2 and on_page(world, world.url(seed), answer) else 2


def record_of(
    world: World, found: Exploration, history: Sequence[str], edits: Sequence[str], model: str, tool_calls: int
) -> QARecord:
    """The QA record of an evolved exploration (its evidence and evolution in `meta`)."""
    entities = entities_of(world, found.urls)
    meta = {
        "entities": entities,
        "urls": list(found.urls),
        "answer_urls": list(found.answer_urls),
        "seed": found.seed,
        "explorer": "openai",
        "model": model,
        "evolution": list(history),
        "rounds": len(history) - 1,
        "obfuscations": list(edits),
        "tool_calls": tool_calls,
    }
    level = explorer_level(world, found.seed, found.answer, entities, len(history) - 1)
    return QARecord(history[-1], found.answer, "webexplorer", level, meta)


def draft(
    episode: Episode, world: World, seed: str, client: LLMClient, leak: LeakCheck, cfg: ExplorerConfig
) -> tuple[QARecord | None, str]:
    """One seed's record (before de-duplication) or None, and "kept" or the reason it is dropped."""
    found, why = explored(episode, world, seed, cfg)
    if found is None:
        return None, why
    if leak(found.answer, found.question):
        return None, "leak"
    try:
        history, edits = evolve(client, found.question, found.answer, cfg.rounds, lambda q: leak(found.answer, q))
    except LLMError as exc:
        return None, f"llm_error: {exc}"
    if len(history) == 1:
        return None, "no_evolution"
    return record_of(world, found, history, edits, client.config.model, len(episode.tool_calls)), "kept"


def fail_fast(write: TurnWriter, failed: set[str]) -> TurnWriter:
    """`write`, remembering the requests whose turn failed and failing their later turns at once (no new request):
    the loop then ends such an episode after its few format errors."""

    def guarded(messages: list[dict[str, str]], request_id: str) -> str:
        if request_id in failed:
            raise LLMError("an earlier turn of this episode failed", url="")
        try:
            return write(messages, request_id)
        except Exception:
            failed.add(request_id)
            raise

    return guarded


def explore_batch(
    seeds: Sequence[str],
    world: World,
    client: LLMClient,
    tokenizer: Any,
    leak: LeakCheck,
    cfg: ExplorerConfig,
    pool: ThreadPoolExecutor,
    progress: bool,
) -> list[tuple[QARecord | None, str]]:
    """(record or None, "kept" or why not) per seed, in seed order: the episodes roll out together, each evolved
    as soon as it ends."""
    teacher = OpenAITeacher(client, workers=cfg.workers, slots=cfg.slots)
    registry = build_registry(ToolsConfig(enabled=("search", "visit")), corpus=world.corpus)
    questions = [Question(EXPLORE_PROMPT.format(name=world.entity(s).name, min_pages=cfg.min_pages)) for s in seeds]
    failed: set[str] = set()
    engine = teacher.engine(
        tokenizer, questions, max_len=cfg.max_context_tokens, wrap=lambda write: fail_fast(write, failed)
    )
    futures: dict[int, Future] = {}

    def finished(episode: Episode) -> None:
        errors = [exc for rid, exc in engine.errors if rid == f"{episode.group}:0"]
        if errors:
            futures[episode.group] = pool.submit(lambda: (None, f"llm_error: {errors[0]}"))
        else:
            futures[episode.group] = pool.submit(draft, episode, world, seeds[episode.group], client, leak, cfg)

    config = RolloutConfig(max_tool_calls=cfg.max_tool_calls, max_context_tokens=cfg.max_context_tokens, date=cfg.date)
    try:
        rollout(engine, tokenizer, registry, questions, config, progress=progress, on_episode=finished)
    finally:
        engine.close()
    return [futures[g].result() for g in range(len(seeds))]


def duplicate_key(record: QARecord) -> tuple:
    """What makes two records the same question besides their text: the answer and the entity pages opened."""
    return normalize(record.answer), tuple(sorted(record.meta["entities"]))


def synthesize(
    world: World,
    n: int,
    *,
    client: LLMClient,
    tokenizer: Any,
    seed: int = 0,
    progress: bool = False,
    config: ExplorerConfig = ExplorerConfig(),
) -> SynthResult:
    """`n` WebExplorer questions written by the LLM behind `client` (`tokenizer` counts the explorer's context)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    order = list(world.entities)
    random.Random(seed).shuffle(order)
    limit = min(len(order), config.max_attempts if config.max_attempts is not None else 3 * n + 10)
    leak, dedup = LeakCheck(world), Dedup()
    records: list[QARecord] = []
    dropped: collections.Counter = collections.Counter()
    first_error = None
    attempts = 0
    with ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="evolve") as pool:
        while len(records) < n and attempts < limit:
            seeds = order[attempts : min(limit, attempts + n - len(records))]
            attempts += len(seeds)
            for record, why in explore_batch(seeds, world, client, tokenizer, leak, config, pool, progress):
                if record is not None and not dedup.add(record.question, duplicate_key(record)):
                    record, why = None, "duplicate"
                if record is None:
                    reason, _, detail = why.partition(": ")
                    first_error = first_error or (detail or None)
                    dropped[reason] += 1
                else:
                    records.append(record)
    if first_error is not None:
        print(
            f"webexplorer: {dropped['llm_error']} seed(s) dropped on LLM errors; the first: {first_error}",
            file=sys.stderr,
        )
    return SynthResult(records, attempts, dropped)
