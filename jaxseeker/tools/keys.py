"""API keys from environment variables, and redaction of every key read from any observation or error text."""

from __future__ import annotations

import os
import threading

_SEEN: set[str] = set()
_LOCK = threading.Lock()
REDACTED = "[redacted]"


def read_key(env_name: str) -> str | None:
    """The value of the environment variable `env_name` (None when unset or empty); remembered for `redact`."""
    if not env_name:
        return None
    value = os.environ.get(env_name, "").strip()
    if not value:
        return None
    with _LOCK:
        _SEEN.add(value)
    return value


def redact(text: str) -> str:
    """`text` with every key ever returned by `read_key` replaced by "[redacted]"."""
    with _LOCK:
        secrets = sorted(_SEEN, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text
