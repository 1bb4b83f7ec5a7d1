"""The shape of the engine a server builds; jax-free, so `jaxseeker serve --help` lists its flags quickly."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class EngineShape:
    """The engine the server builds: concurrent slots, context length, decode steps per call and chunks, and the KV
    cache's pages (None: every slot at its whole context)."""

    slots: int = 16
    max_len: int = 4096
    steps_per_call: int = 8
    prefill_chunk: int = 128
    max_queue: int = 256
    pages: int | None = None
