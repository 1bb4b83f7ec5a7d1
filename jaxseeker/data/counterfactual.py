"""Counterfactual numbers: one trajectory's digits seen through a random permutation.

A small policy trained from scratch memorises the facts of its training trajectories ("X has a
population of 8,427") instead of reading them from the observation in front of it, and then answers
a held-out question with a remembered number. Relabelling the digits 1–9 with a fresh permutation,
the same one throughout a trajectory (question, observations, thoughts, tool calls, answer), keeps
every trajectory self-consistent whenever its numbers are read, not computed (the answer is the
observation's number under the same relabelling), while making each remembered number wrong the next
time the trajectory is drawn: the number must be copied. 0 keeps its place, so no number gains a
leading zero. The system message (the current date), URLs (percent-escapes, page addresses the
policy copies from observations) and result markers such as `[1]` are left as they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from jaxseeker.data.records import Message

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
    return [m if m["role"] == "system" else {**m, "content": translate_outside_kept(m["content"], table)}
            for m in messages]
