"""Questions kept apart from others: no shared evidence entity (`meta.entities`) but hubs such as countries."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from jaxseeker.synthesis.qa.driver import SynthResult
from jaxseeker.synthesis.qa.record import QARecord


def evidence_entities(record: Mapping[str, Any], hub_ids: Collection[str]) -> set[str]:
    """The entities a question's evidence runs through (`meta.entities`), hubs left out."""
    return set(record.get("meta", {}).get("entities", ())) - set(hub_ids)


def keep_apart(records: Iterable[dict], others: Iterable[Mapping[str, Any]], hub_ids: Collection[str]) -> list[dict]:
    """The `records` whose evidence shares no non-hub entity with any of `others` (e.g. a model's training
    questions), so they test that model on entities it has not seen."""
    taken = set().union(*(evidence_entities(r, hub_ids) for r in others))
    return [r for r in records if not evidence_entities(r, hub_ids) & taken]


def synthesize_apart(
    draft: Callable[[int], SynthResult], n: int, others: Iterable[Mapping[str, Any]], hub_ids: Collection[str]
) -> SynthResult:
    """`n` questions from `draft(count)` (a recipe at a fixed seed) kept apart from `others`: drafts n, 2n, 4n, …
    until n are kept (fewer if 32n do not yield them); `dropped` also counts those that shared an entity."""
    others = list(others)
    for factor in (1, 2, 4, 8, 16, 32):
        result = draft(n * factor)
        kept = keep_apart([r.to_json() for r in result.records], others, hub_ids)
        if len(kept) >= n:
            break
    dropped = collections.Counter(result.dropped)
    dropped["shares an evidence entity"] += len(result.records) - len(kept)
    return dataclasses.replace(result, records=[QARecord(**r) for r in kept[:n]], dropped=dropped)
