"""The OpenAI wire format: request bodies parsed into `Params` (400s name the bad field), errors shaped as
`{"error": {message, type, param, code}}`, and the JSON of completions, chat completions and their chunks.

Sampling follows the OpenAI defaults (temperature 1, top_p 1). Extensions that vLLM also reads:
`top_k` (0 or -1 = off) and `ignore_eos`. Unsupported features (tools, tool choice, logit bias, penalties,
echo, alternative top log-probs) are refused with a 400 rather than silently ignored. As in vLLM, a
temperature below `MIN_TEMPERATURE` samples greedily: dividing logits by it would overflow float32.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jaxseeker.data.records import lone_surrogate

MAX_N = 128
MAX_STOPS = 16
MAX_TOP_K = 2**31 - 1  # the engine holds top_k as int32; a larger one keeps the whole vocabulary all the same
MIN_TEMPERATURE = 1e-5  # below it (and above 0): greedy; logits / 1e-30 overflow float32 into infinite log-probs
# any top_p under 1/vocab keeps only the most likely token; one that float32 rounds to 0 would keep none
MIN_TOP_P = 1e-6
SEED_RANGE = (-(2**63), 2**63 - 1)  # OpenAI's seed is an int64
ROLES = ("system", "developer", "user", "assistant", "tool")
_JSON_TYPES = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
    type(None): "null",
}


class APIError(Exception):
    """An error answered as OpenAI shapes it: HTTP `status` and `{"error": {...}}`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        """The JSON body of the error response."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclasses.dataclass(frozen=True)
class Params:
    """What a request asks for, besides its prompt (validated)."""

    model: str
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    n: int = 1
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    stream: bool = False
    include_usage: bool = False
    ignore_eos: bool = False


def _bad(message: str, param: str) -> APIError:
    return APIError(400, message, param=param)


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value, for messages: "a number", "an object", …"""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def show(value: Any, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters, to quote a client's value in an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _get(body: Mapping[str, Any], key: str, kinds: tuple[type, ...], default: Any) -> Any:
    """body[key] when present and not null; a 400 naming the key when it has the wrong JSON type."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = " or ".join(_JSON_TYPES[k] for k in kinds if not (k is int and float in kinds))
        raise _bad(f"'{key}' must be {names}, got {_json_type(value)} {show(value)}", key)
    return value


def _number(
    body: Mapping[str, Any], key: str, default: float, low: float, high: float, *, open_low: bool = False
) -> float:
    value = _get(body, key, (int, float), default)  # compared before float(): 10**400 has no float
    if not (low < value if open_low else low <= value) or value > high:  # NaN fails both
        raise _bad(f"'{key}' must be in {'(' if open_low else '['}{low}, {high}], got {show(value)}", key)
    return float(value)


def _refuse(body: Mapping[str, Any], key: str, allowed: Callable[[Any], bool], why: str) -> None:
    if key in body and body[key] is not None and not allowed(body[key]):
        raise _bad(f"'{key}' is not supported: {why}", key)


def _stops(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = _get(body, "stop", (str, list), [])
    stops = [stop] if isinstance(stop, str) else stop
    if len(stops) > MAX_STOPS or any(not isinstance(s, str) or not s for s in stops):
        raise _bad(
            f"'stop' must be a non-empty string or a list of at most {MAX_STOPS} of them, got {show(stop)}", "stop"
        )
    return tuple(stops)


def parse_params(body: Any, *, chat: bool) -> Params:
    """The sampling, length, stop and streaming fields of a chat or completions body (400 on a bad one)."""
    if not isinstance(body, dict):
        raise APIError(400, f"the request body must be a JSON object, got {type(body).__name__}")
    model = _get(body, "model", (str,), None)
    if not model:
        raise _bad("you must provide a 'model' parameter", "model")
    for key in ("presence_penalty", "frequency_penalty"):
        _refuse(body, key, lambda v: v == 0, "penalties are not implemented")
    _refuse(body, "repetition_penalty", lambda v: v == 1, "penalties are not implemented")
    _refuse(body, "logit_bias", lambda v: not v, "logit bias is not implemented")
    max_key = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = _get(body, max_key, (int,), None)
    if max_tokens is not None and max_tokens < 1:
        raise _bad(f"'{max_key}' must be >= 1, got {max_tokens}", max_key)
    n = _get(body, "n", (int,), 1)
    if not 1 <= n <= MAX_N:
        raise _bad(f"'n' must be in [1, {MAX_N}], got {n}", "n")
    top_k = _get(body, "top_k", (int,), 0)
    if top_k < -1:
        raise _bad(f"'top_k' must be >= 0 (0 or -1: off), got {top_k}", "top_k")
    if chat:
        _refuse(body, "tools", lambda v: not v, "write the tool schemas into the system prompt instead")
        _refuse(body, "functions", lambda v: not v, "write the tool schemas into the system prompt instead")
        for key in ("tool_choice", "function_call"):  # "none" and "auto" mean nothing without tools
            _refuse(body, key, lambda v: v in ("none", "auto"), "no tools are declared: only 'none' or 'auto'")
        _refuse(
            body, "response_format", lambda v: isinstance(v, dict) and v.get("type") == "text", "only {'type': 'text'}"
        )
        _refuse(body, "top_logprobs", lambda v: v == 0, "only the sampled token's log-prob is returned")
        logprobs = _get(body, "logprobs", (bool,), False)
    else:
        _refuse(body, "echo", lambda v: v is False, "the prompt is never echoed")
        _refuse(body, "suffix", lambda v: v == "", "no insertion mode")
        _refuse(body, "best_of", lambda v: v == 1, "best_of must be 1")
        _refuse(
            body,
            "logprobs",
            lambda v: v == 0 and not isinstance(v, bool),
            "only logprobs=0 (the sampled tokens' log-probs, no alternatives)",
        )
        logprobs = body.get("logprobs") is not None
    stream = _get(body, "stream", (bool,), False)
    include_usage = _get(body, "stream_options", (dict,), {}).get("include_usage")
    if include_usage is not None and not isinstance(include_usage, bool):
        raise _bad(
            f"'stream_options.include_usage' must be a boolean, got {_json_type(include_usage)}",
            "stream_options.include_usage",
        )
    seed = _get(body, "seed", (int,), None)
    if seed is not None and not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise _bad(f"'seed' must be a 64-bit integer in [{SEED_RANGE[0]}, {SEED_RANGE[1]}], got {show(seed)}", "seed")
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    return Params(
        model=model,
        max_tokens=max_tokens,
        temperature=0.0 if temperature < MIN_TEMPERATURE else temperature,
        top_p=max(_number(body, "top_p", 1.0, 0.0, 1.0, open_low=True), MIN_TOP_P),
        top_k=min(max(top_k, 0), MAX_TOP_K),
        n=n,
        seed=seed,
        stop=_stops(body),
        logprobs=logprobs,
        stream=stream,
        include_usage=stream and bool(include_usage),
        ignore_eos=_get(body, "ignore_eos", (bool,), False),
    )


def parse_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat messages (role "developer" read as "system"), each with a known role and a string or text-part
    content; a 400 names the bad field (`messages[2].content`). Their order is checked when rendered."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        got = "none" if messages is None else f"{_json_type(messages)} {show(messages)}"
        raise _bad(f"'messages' must be a non-empty array of {{role, content}} objects, got {got}", "messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _bad(f"{where}: expected an object with 'role' and 'content', got {_json_type(message)}", where)
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise _bad(f"{where}.role: expected one of {list(ROLES)}, got {show(role)}", f"{where}.role")
        _check_content(message.get("content"), f"{where}.content")
        out.append({**message, "role": "system" if role == "developer" else role})
    return out


def message_texts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The text of every message checked by `parse_messages`: its string content or its text parts."""
    texts = []
    for message in messages:
        content = message.get("content")
        texts.extend([content] if isinstance(content, str) else [p["text"] for p in content or []])
    return texts


def _check_content(content: Any, where: str) -> None:
    """A 400 naming `where` unless content is a string, a list of {"type": "text", "text": str} parts, or null
    (then rendering says what is missing)."""
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _bad(f"{where}: expected a string or a list of text parts, got {_json_type(content)}", where)
    for j, part in enumerate(content):
        if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
            kind = f"a {show(part.get('type'))} part" if isinstance(part, dict) else _json_type(part)
            raise _bad(
                f'{where}[{j}]: expected a text part {{"type": "text", "text": "..."}} (only text is '
                f"supported), got {kind}",
                f"{where}[{j}]",
            )


def parse_prompts(body: Mapping[str, Any]) -> list[str | list[int]]:
    """The prompts of a completions body: a string, token ids, or a list of either (one batch)."""
    prompt = body.get("prompt")
    if isinstance(prompt, str) or _is_ids(prompt):
        prompts = [prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str) or _is_ids(p) for p in prompt):
        prompts = prompt
    else:
        raise _bad("'prompt' must be a string, an array of token ids, or a non-empty array of either", "prompt")
    if any(not p for p in prompts):
        raise _bad("'prompt' must not be empty", "prompt")
    if any(isinstance(p, str) and lone_surrogate(p) is not None for p in prompts):
        raise _bad("'prompt' holds a lone surrogate (a JSON escape such as \\ud800): not valid Unicode", "prompt")
    return prompts


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(type(t) is int for t in value)


# ---- responses ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Usage:
    """Token counts of a response."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def json(self) -> dict[str, int]:
        """The `usage` object."""
        total = self.prompt_tokens + self.completion_tokens
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens, "total_tokens": total}


def logprobs_json(
    tokens: Sequence[int], logprobs: Sequence[float], token_text: Callable[[int], str], *, chat: bool, offset: int = 0
) -> dict[str, Any]:
    """The `logprobs` object of a choice or chunk: chat `{"content": [...]}`, completions `{"tokens", …}`.

    offset: characters of this choice's text before these tokens (completions' `text_offset`).
    """
    texts = [token_text(t) for t in tokens]
    if chat:
        return {
            "content": [
                {"token": s, "logprob": lp, "bytes": list(s.encode("utf-8")), "top_logprobs": []}
                for s, lp in zip(texts, logprobs, strict=True)
            ]
        }
    offsets = []
    for s in texts:
        offsets.append(offset)
        offset += len(s)
    return {"tokens": texts, "token_logprobs": list(logprobs), "top_logprobs": None, "text_offset": offsets}


def response_json(
    kind: str,
    response_id: str,
    model: str,
    choices: list[dict[str, Any]],
    usage: Usage | None,
    created: int | None = None,
) -> dict[str, Any]:
    """A whole response or one streamed chunk; kind: "chat.completion", "chat.completion.chunk" or
    "text_completion"."""
    out = {
        "id": response_id,
        "object": kind,
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": choices,
    }
    if kind != "chat.completion.chunk" or usage is not None:
        out["usage"] = None if usage is None else usage.json()
    if kind.startswith("chat"):
        out["system_fingerprint"] = None
    return out


def choice_json(
    index: int,
    text: str,
    finish_reason: str | None,
    logprobs: dict[str, Any] | None,
    *,
    chat: bool,
    delta: bool = False,
    first: bool = False,
) -> dict[str, Any]:
    """One entry of `choices`: a chat message, a chat delta (`first` carries the role) or a completion text."""
    if not chat:
        return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}
    if delta:
        message = {"role": "assistant", "content": text} if first else ({"content": text} if text else {})
        return {"index": index, "delta": message, "logprobs": logprobs, "finish_reason": finish_reason}
    return {
        "index": index,
        "message": {"role": "assistant", "content": text},
        "logprobs": logprobs,
        "finish_reason": finish_reason,
    }
