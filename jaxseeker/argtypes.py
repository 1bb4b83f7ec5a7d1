"""Range-checked argparse `type=` callables, so a bad number is a one-line usage error at parse time, and checks of
flags that only make sense together.

`parser.add_argument("--seq-len", type=at_least(1))` turns `--seq-len 0` into
`error: argument --seq-len: must be an integer >= 1, got 0` (exit status 2) before any command runs.
Jax-free and cheap to import: every command's parser uses it.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import TypeVar

Number = TypeVar("Number", int, float)


def _show(bound: float) -> str:
    return f"{bound:g}" if isinstance(bound, float) else str(bound)


def at_least(
    low: Number, kind: type[Number] = int, *, above: bool = False, high: Number | None = None, below: bool = False
) -> Callable[[str], Number]:
    """A `type=` callable parsing `kind` (int or float) that is >= `low` (> `low` with `above`) and, with `high`,
    <= `high` (< `high` with `below`); anything else raises `argparse.ArgumentTypeError` naming the range."""
    if kind not in (int, float):
        raise TypeError(f"at_least: kind must be int or float, got {kind!r}")
    noun = "an integer" if kind is int else "a number"
    accepted = f"{noun} {'>' if above else '>='} {_show(low)}"
    if high is not None:
        accepted += f" and {'<' if below else '<='} {_show(high)}"

    def parse(text: str) -> Number:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {accepted}, got {text!r}") from None
        in_range = (value > low if above else value >= low) and (
            high is None or (value < high if below else value <= high)
        )
        if not in_range or (kind is float and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be {accepted}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse


def comma_list(item: Callable[[str], Number]) -> Callable[[str], tuple[Number, ...]]:
    """A `type=` callable parsing comma-separated values, each through `item` (e.g. `at_least(1)`), into a tuple."""

    def parse(text: str) -> tuple[Number, ...]:
        parts = [p.strip() for p in text.split(",")]
        if not all(parts):
            raise argparse.ArgumentTypeError(f"must be comma-separated values, got {text!r}")
        try:
            return tuple(item(p) for p in parts)
        except argparse.ArgumentTypeError as err:
            raise argparse.ArgumentTypeError(f"each value {err} (in {text!r})") from None

    parse.__name__ = "list"
    return parse


def comma_names(known: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """A `type=` callable parsing comma-separated names, each one of `known`, into a tuple without repeats ("" is
    none); an unknown name raises `argparse.ArgumentTypeError` listing the known ones."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
        unknown = [n for n in names if n not in known]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(map(repr, unknown))} in {text!r}; known: {', '.join(known)}"
            )
        return names

    parse.__name__ = "list"
    return parse


def head_flags_problem(hidden_size: int, num_heads: int, num_kv_heads: int) -> str | None:
    """Why `--hidden-size`, `--num-heads` and `--num-kv-heads` make no attention layer, or None: the query heads must
    be a multiple of the key/value heads, and the head size even (RoPE rotates it in halves)."""
    if num_heads % num_kv_heads:
        return f"--num-heads ({num_heads}) must be a multiple of --num-kv-heads ({num_kv_heads})"
    head_dim = hidden_size // num_heads
    if head_dim < 2 or head_dim % 2:
        return (
            f"--hidden-size // --num-heads (the head size, rotated in halves by RoPE) must be even and >= 2, "
            f"got {hidden_size} // {num_heads} = {head_dim}"
        )
    return None
