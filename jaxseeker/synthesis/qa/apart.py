"""Questions kept apart from others: no shared evidence entity (`meta.entities`) but hubs such as countries."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any


def evidence_entities(record: Mapping[str, Any], hub_ids: Collection[str]) -> set[str]:
    """The entities a question's evidence runs through (`meta.entities`), hubs left out."""
    return set(record.get("meta", {}).get("entities", ())) - set(hub_ids)


def keep_apart(records: Iterable[dict], others: Iterable[Mapping[str, Any]], hub_ids: Collection[str]) -> list[dict]:
    """The `records` whose evidence shares no non-hub entity with any of `others` (e.g. a model's training
    questions), so they test that model on entities it has not seen."""
    taken = set().union(*(evidence_entities(r, hub_ids) for r in others))
    return [r for r in records if not evidence_entities(r, hub_ids) & taken]
