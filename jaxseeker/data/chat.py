"""Render chat messages and tokenize them with a loss mask on exactly the tokens the policy wrote.

The same rendering serves supervised training (``tokenize_chat``) and inference
(``render_generation_prompt``): the tokenizer's chat template when it has one, else built-in chatml
``<|im_start|>role\\n…<|im_end|>\\n``. A trained span is an assistant turn's content plus its
``<|im_end|>``; the ``<|im_start|>assistant\\n`` header, the newline after ``<|im_end|>`` and every
system, user and observation token have mask 0.

The mask is found from character offsets: for assistant message ``i`` the span starts where the
rendering of ``messages[:i]`` with a generation prompt ends, and stops after the last ``<|im_end|>``
in the rendering of ``messages[:i+1]``. The full text is tokenized once, so the ids are exactly
those of tokenizing the full rendering; a token straddling a span edge is an error (the prompt ids
of the rollout loop would then not be a prefix of the training ids).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxseeker.data.records import normalize_messages
from jaxseeker.jsonl import quote

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"


def _chatml(messages: Sequence[Mapping[str, str]], add_generation_prompt: bool) -> str:
    """Built-in chatml rendering."""
    text = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return text + (f"{IM_START}assistant\n" if add_generation_prompt else "")


def _apply_template(messages: list[dict[str, str]], tokenizer: Any, add_generation_prompt: bool) -> str:
    """Renders messages with the tokenizer's chat template; an error the template raises (its ``raise_exception``,
    an undefined value) is a ``ValueError`` saying the template cannot render them."""
    # transformers renders templates with jinja2 but does not require it: imported only where a template is used
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    except TemplateError as e:
        raise ValueError(f"the chat template cannot render these messages: {e}") from e


def _render(messages: list[dict[str, str]], tokenizer: Any, add_generation_prompt: bool) -> str:
    """Renders already-normalised messages with the tokenizer's template or chatml."""
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return _apply_template(messages, tokenizer, add_generation_prompt)
    return _chatml(messages, add_generation_prompt)


def render_chat(
    messages: Sequence[Mapping[str, Any]], tokenizer: Any = None, *, add_generation_prompt: bool = False
) -> str:
    """Renders messages to text: the tokenizer's chat template if it has one, else chatml."""
    return _render(normalize_messages(messages, require_assistant=False), tokenizer, add_generation_prompt)


def _encode(tokenizer: Any, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and character offsets of ``text`` (no extra special tokens).

    A fast tokenizer's Rust backend is called directly: the same ids as ``tokenizer(text)``, and
    safe from the pipeline's reader threads (the Python wrapper mutates padding state per call).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        enc = backend.encode(text, add_special_tokens=False)
        raw_ids, raw_offsets = enc.ids, enc.offsets
    else:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        raw_ids, raw_offsets = enc["input_ids"], enc["offset_mapping"]
    ids = np.asarray(raw_ids, dtype=np.int32)  # [tokens]
    offsets = np.asarray(raw_offsets, dtype=np.int64).reshape(-1, 2)  # [tokens, 2]
    return ids, offsets


# token roles: context, an assistant turn, an assistant turn with weight 0, a rejected assistant turn (weight -1)
CONTEXT, TRAINED, UNTRAINED, REJECTED = 0, 1, 2, 3
_TURN_ROLES = {1: TRAINED, 0: UNTRAINED, -1: REJECTED}  # an assistant message's weight -> its tokens' role


def _chatml_spans(msgs: list[dict[str, str]], offset: int) -> list[tuple[int, int, int]]:
    """The assistant spans of the built-in chatml rendering of ``msgs`` placed after ``offset`` characters; one pass
    over the messages."""
    spans, at = [], offset
    for message in msgs:
        header = len(IM_START) + len(message["role"]) + 1  # <|im_start|>role\n
        if message["role"] == "assistant":
            start = at + header
            spans.append((start, start + len(message["content"]) + len(IM_END), _TURN_ROLES[message.get("weight", 1)]))
        at += header + len(message["content"]) + len(IM_END) + 1
    return spans


def _checked_span(msgs: list[dict[str, str]], i: int, full: str, tokenizer: Any) -> tuple[int, int]:
    """The ``[start, end)`` span of assistant turn ``i`` by rendering ``msgs[:i]`` and ``msgs[:i+1]``: a
    ``ValueError`` when they are not prefixes of the full rendering ``full`` (so training and inference differ)."""
    prompt = _render(msgs[:i], tokenizer, add_generation_prompt=True)
    upto = full if i + 1 == len(msgs) else _render(msgs[: i + 1], tokenizer, add_generation_prompt=False)
    if not (upto.startswith(prompt) and full.startswith(upto)):
        raise ValueError(
            f"messages[{i}]: the chat template is not prefix-stable (rendering the conversation up to "
            "this turn is not a prefix of the full rendering), so training and inference would differ"
        )
    end = upto.rfind(IM_END, len(prompt))
    if end < 0:
        raise ValueError(f"messages[{i}]: the rendered assistant turn has no {IM_END}")
    return len(prompt), end + len(IM_END)


def assistant_spans(
    messages: Sequence[Mapping[str, Any]], tokenizer: Any = None
) -> tuple[str, list[tuple[int, int, int]]]:
    """The full rendering and, for every assistant turn, its ``[start, end)`` character span (content + end token)
    and role: ``TRAINED``, ``UNTRAINED`` for a turn with ``"weight": 0``, ``REJECTED`` for one with ``"weight": -1``.

    Linear in the number of turns when the rendering is chatml after a fixed preamble (the built-in rendering, the
    Qwen2.5-style templates): the spans are then counted on the chatml text, and the template is checked to render
    the first and the last assistant turn's prefixes the same way. Any other template is checked turn by turn,
    two renderings of a prefix per assistant turn (quadratic; `records.MAX_MESSAGES` bounds it).
    """
    msgs = normalize_messages(messages, require_assistant=False)
    full = _render(msgs, tokenizer, add_generation_prompt=False)
    assistant = [i for i, message in enumerate(msgs) if message["role"] == "assistant"]
    chatml = _chatml(msgs, add_generation_prompt=False)
    if full.endswith(chatml):
        spans = _chatml_spans(msgs, len(full) - len(chatml))
        ends = {assistant[0]: spans[0], assistant[-1]: spans[-1]} if assistant else {}
        if all(_checked_span(msgs, i, full, tokenizer) == span[:2] for i, span in ends.items()):
            return full, spans
    spans = []
    for i in assistant:
        start, end = _checked_span(msgs, i, full, tokenizer)
        spans.append((start, end, _TURN_ROLES[msgs[i].get("weight", 1)]))
    return full, spans


def token_roles(messages: Sequence[Mapping[str, Any]], tokenizer: Any) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and each token's role (np.int32, same length): ``CONTEXT``, ``TRAINED`` (an assistant turn),
    ``UNTRAINED`` (an assistant turn with ``"weight": 0``) or ``REJECTED`` (one with ``"weight": -1``).

    One pass over the characters and one over the tokens: each character gets the count of span edges at or before
    it, odd inside a span; a token whose first and last characters have different counts straddles an edge."""
    full, spans = assistant_spans(messages, tokenizer)
    ids, offsets = _encode(tokenizer, full)  # [tokens], [tokens, 2]
    starts, ends = offsets[:, 0], offsets[:, 1]  # [tokens]
    edges = np.asarray([edge for start, end, _ in spans for edge in (start, end)], dtype=np.int64)  # [2 * spans]
    region = np.cumsum(np.bincount(edges, minlength=len(full) + 1))  # [chars + 1] span edges at or before each
    first, last = region[starts], region[np.maximum(ends - 1, starts)]  # [tokens]
    empty = ends <= starts  # [tokens] a zero-width token is inside a span it touches, its end included
    first = np.where(empty & (first % 2 == 0) & (starts > 0), region[np.maximum(starts - 1, 0)], first)
    straddles = ~empty & (first != last)
    if np.any(straddles):
        bad = int(np.argmax(straddles))
        start, end, _ = spans[int(first[bad]) // 2]  # the span of the first edge inside the token
        raise ValueError(
            f"token {bad} ({quote(full[starts[bad] : ends[bad]])}) straddles the edge of an assistant turn at "
            f"characters [{start}, {end}); strip leading/trailing whitespace from the assistant content"
        )
    role_of_region = np.zeros(2 * len(spans) + 1, dtype=np.int32)  # [2 * spans + 1] CONTEXT between spans
    role_of_region[1::2] = [role for _, _, role in spans]
    roles = role_of_region[first]  # [tokens]
    return ids, roles


def tokenize_chat(messages: Sequence[Mapping[str, Any]], tokenizer: Any) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and loss mask (np.int32, same length) of a conversation; mask 1 on trained assistant turns only."""
    ids, roles = token_roles(messages, tokenizer)
    return ids, (roles == TRAINED).astype(np.int32)


def render_generation_prompt(messages: Sequence[Mapping[str, Any]], tokenizer: Any) -> np.ndarray:
    """Token ids (np.int32) of the inference prompt: the conversation then ``<|im_start|>assistant\\n``."""
    text = _render(normalize_messages(messages, require_assistant=False), tokenizer, add_generation_prompt=True)
    ids, _ = _encode(tokenizer, text)
    return ids
