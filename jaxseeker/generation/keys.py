"""The random stream of a request as a stable number: plain hashing, no JAX (the rollout loop imports it)."""

from __future__ import annotations

import zlib


def request_hash(request_id: str) -> int:
    """A stable 31-bit number for a request id (CRC32), mixed into its PRNG keys."""
    return zlib.crc32(request_id.encode("utf-8")) & 0x7FFFFFFF


def episode_key(*parts: int | str) -> int:
    """The random stream of one episode from what names it (e.g. a question's id and the sample's index): a stable
    31-bit hash (CRC32) of the parts, so the episode draws the same tokens whatever request id, slot or batch it
    runs in (`Engine.submit(..., key=)`; the engine's seed is mixed in on top)."""
    return request_hash("\x1f".join(f"{type(p).__name__}:{p}" for p in parts))
