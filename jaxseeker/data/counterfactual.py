"""Counterfactual numbers and names: a trajectory's digits, or the names it searches for, relabelled per draw.

A small policy trained from scratch memorises the facts of its training trajectories ("X has a
population of 8,427") instead of reading them from the observation in front of it, and then answers
a held-out question with a remembered number. Relabelling the digits 1–9 with a fresh permutation,
the same one throughout a trajectory (question, observations, thoughts, tool calls, answer), keeps
every trajectory self-consistent whenever its numbers are read, not computed (the answer is the
observation's number under the same relabelling), while making each remembered number wrong the next
time the trajectory is drawn: the number must be copied. 0 keeps its place, so no number gains a
leading zero. The system message (the current date), URLs (percent-escapes, page addresses the
policy copies from observations) and result markers such as `[1]` are left as they are.

Names likewise: the small policy searches for a name it remembers from training that looks like the
question's (`Lewisville (Illinois, US)` for `Lawrenceville (Illinois, US)`). `permute_names` gives each
name the trajectory searches for, when it is in a pool of names, another name of the pool's same group,
fresh at every draw and the same everywhere in the trajectory (its page url too), so the policy sees each
name about as often as any other and only copying the question's name pays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from jaxseeker.data.records import Message
from jaxseeker.world.pages import wiki_slug

_KEPT = re.compile(r"(https?://\S+|\[\d+\])")  # URLs and result markers; the group keeps them in split()
_DIGITS = "0123456789"


def digit_table(rng: np.random.Generator) -> dict[int, str]:
    """A `str.translate` table sending 0 to 0 and 1–9 to a random permutation of 1–9."""
    return str.maketrans(_DIGITS, "0" + "".join(str(d) for d in rng.permutation(np.arange(1, 10))))


def translate_outside_kept(text: str, table: dict[int, str]) -> str:
    """`text` with `table` applied everywhere except inside URLs and result markers (`[1]`)."""
    return "".join(part if i % 2 else part.translate(table) for i, part in enumerate(_KEPT.split(text)))


def permute_digits(messages: Sequence[Message], rng: np.random.Generator) -> list[Message]:
    """The messages with one random digit permutation applied to every non-system message (URLs, markers kept)."""
    table = digit_table(rng)
    return [
        m if m["role"] == "system" else {**m, "content": translate_outside_kept(m["content"], table)} for m in messages
    ]


class NamePool:
    """Names to rename with, in groups (entity kinds): a name is replaced by another of its own group."""

    def __init__(self, groups: Mapping[str, Sequence[str]]):
        self.groups = {g: list(names) for g, names in groups.items() if names}
        self.group_of = {name: g for g, names in self.groups.items() for name in names}

    @classmethod
    def read(cls, path: str | Path) -> NamePool:
        """A pool from a text file: `group<TAB>name` or a bare `name` (one group) per line; blank lines skipped."""
        groups: dict[str, list[str]] = {}
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            group, _, name = line.rpartition("\t")
            if not name.strip():
                raise ValueError(f"{path}:{n}: no name after the tab")
            groups.setdefault(group, []).append(name.strip())
        if not groups:
            raise ValueError(f"{path}: no names")
        return cls(groups)


_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def searched_names(messages: Sequence[Message]) -> list[str]:
    """The queries of the search calls in the assistant turns, in order, each once (unparseable calls skipped).

    A strict JSON read of well-formed expert data, not agent.parser's repairing one (agent imports data)."""
    names: list[str] = []
    for m in messages:
        if m["role"] != "assistant":
            continue
        for body in _TOOL_CALL.findall(m["content"]):
            try:
                call = json.loads(body)
                query = call["arguments"]["query"] if call.get("name") == "search" else []
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            for q in [query] if isinstance(query, str) else query:
                if isinstance(q, str) and q not in names:
                    names.append(q)
    return names


def rename(messages: Sequence[Message], mapping: Mapping[str, str]) -> list[Message]:
    """The messages with every whole-word occurrence of each name, and of its page url's slug, replaced."""
    table = dict(mapping) | {wiki_slug(old): wiki_slug(new) for old, new in mapping.items()}
    if not table:
        return list(messages)
    pattern = re.compile(
        r"(?<!\w)(" + "|".join(re.escape(k) for k in sorted(table, key=len, reverse=True)) + r")(?!\w)"
    )
    return [
        m if m["role"] == "system" else {**m, "content": pattern.sub(lambda x: table[x.group(1)], m["content"])}
        for m in messages
    ]


def permute_names(messages: Sequence[Message], rng: np.random.Generator, pool: NamePool) -> list[Message]:
    """The messages with each searched name that is in `pool` renamed to a random other name of its group."""
    mapping: dict[str, str] = {}
    for name in searched_names(messages):
        group = pool.group_of.get(name)
        if group is None:
            continue
        choices = pool.groups[group]
        for _ in range(8):  # a name already taken by this trajectory is drawn again
            new = choices[int(rng.integers(len(choices)))]
            if new != name and new not in mapping.values():
                mapping[name] = new
                break
    return rename(messages, mapping)
