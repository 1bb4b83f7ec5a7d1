"""API keys from environment variables, and redaction of every key read, in every form it may be written in.

A key with a control or non-ASCII character is refused when it is read (at start-up, by the back-end that needs it):
such a key cannot travel in an HTTP header, and the HTTP library's error would echo it in an escaped form.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

from jaxseeker.errors import InputError

_SEEN: set[str] = set()
_LOCK = threading.Lock()
REDACTED = "[redacted]"
# A text cut just inside a key ends with the key's first characters: from this many on they are redacted too. Fewer
# say next to nothing of a key, and redacting them would eat the last letters of ordinary text.
MIN_FRAGMENT = 4


class BadKey(InputError):
    """An API key in the environment that cannot be sent; the message names the variable, never the key."""


def _forms(key: str) -> set[str]:
    """The spellings of `key` that text may carry: as is, escaped by repr or JSON, percent-encoded."""
    return {key, repr(key)[1:-1], json.dumps(key)[1:-1], urllib.parse.quote(key, safe=""), urllib.parse.quote(key)}


def read_key(env_name: str) -> str | None:
    """The value of the environment variable `env_name`, surrounding whitespace removed (None when unset or empty);
    remembered for `redact`. BadKey when it holds a control or non-ASCII character."""
    if not env_name:
        return None
    value = os.environ.get(env_name, "").strip()
    if not value:
        return None
    bad = next((i for i, c in enumerate(value) if not " " <= c <= "~"), None)
    if bad is not None:
        raise BadKey(
            f"${env_name}: the key has a control or non-ASCII character at position {bad + 1} of "
            f"{len(value)}; set the variable to the key alone"
        )
    with _LOCK:
        _SEEN.update(_forms(value))
    return value


def redact(text: str) -> str:
    """`text` with every key ever returned by `read_key`, in any of its spellings, replaced by "[redacted]"."""
    with _LOCK:
        secrets = sorted(_SEEN, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def cut(text: str, max_chars: int) -> str:
    """The first `max_chars` characters of `text` with every key redacted: redacted before the cut (a key across the
    cut would leave a piece that no longer matches it), a "[redacted]" across the cut kept whole, and a tail that
    is the start of a key, from `MIN_FRAGMENT` characters on, redacted as well."""
    text = redact(text)
    marker = text.rfind(REDACTED, 0, max_chars + len(REDACTED) - 1)  # one that starts before the cut
    end = marker + len(REDACTED) if marker >= 0 and marker + len(REDACTED) > max_chars else max_chars
    text = text[:end]
    with _LOCK:
        secrets = list(_SEEN)
    longest = 0
    for secret in secrets:
        for size in range(min(len(secret), len(text)), max(MIN_FRAGMENT, longest + 1) - 1, -1):
            if text.endswith(secret[:size]):
                longest = size
                break
    return text[: len(text) - longest] + REDACTED if longest else text


def holds_key(text: str) -> bool:
    """Whether `text` holds a key returned by `read_key`, in any of its spellings (e.g. a header's value)."""
    with _LOCK:
        secrets = list(_SEEN)
    return any(secret in text for secret in secrets)


def redact_value(value: Any) -> Any:
    """`value` (strings, and mappings and lists of them, e.g. tool-call arguments) with every key redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact_value(k): redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v) for v in value)
    return value
