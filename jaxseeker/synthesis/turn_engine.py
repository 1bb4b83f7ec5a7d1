"""An Engine-contract object whose turns come from a text writer (a teacher) instead of a model.

The rollout loop drives it exactly like `jaxseeker.generation.Engine`: it submits prompt ids and
extends requests with observation ids. The engine decodes those ids back into chat messages,
asks `write_turn(messages, request_id)` for the next assistant turn, and reports that text as the
tokens the tokenizer gives it (then `<|im_end|>`), cut by the same rules a model's turn is (stop
strings, `max_new_tokens`, cache length). Every observation a teacher reads is therefore what the
real tools returned through the real loop. Like `jaxseeker.agent.ScriptedEngine`, every token gets
log-prob 0; unlike it, a whole turn is reported in one `step()` (no per-token decoding), and turns
can be written on a thread pool (`workers` > 0) so that remote teachers run concurrently.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from jaxseeker.agent.prompts import Renderer, engine_stops
from jaxseeker.data.chat import IM_END, IM_START
from jaxseeker.generation import Event

TurnWriter = Callable[[list[dict[str, str]], str], str]
_MESSAGE = re.compile(re.escape(IM_START) + r"(\w+)\n(.*?)" + re.escape(IM_END), re.DOTALL)


def parse_chat(text: str) -> list[dict[str, str]]:
    """The complete chatml messages of a rendered context (a trailing open generation prompt is left out)."""
    messages = [{"role": m.group(1), "content": m.group(2)} for m in _MESSAGE.finditer(text)]
    if not messages:
        raise ValueError(f"no chatml messages in the context: {text[:120]!r}")
    return messages


@dataclasses.dataclass
class _Request:
    text: str  # the decoded context so far
    length: int  # its tokens
    max_new_tokens: int
    turn: Future | str | None = None
    active: bool = True


class TurnEngine:
    """Engine-contract object over a `write_turn(messages, request_id) -> text` teacher.

    `errors` collects (request_id, exception) of turns whose writer raised; such a turn is empty,
    which the loop treats as a format error (so the episode fails the validity filter, visibly).
    """

    def __init__(
        self,
        tokenizer: Any,
        write_turn: TurnWriter,
        *,
        slots: int = 64,
        max_len: int = 32768,
        workers: int = 0,
        eos_ids: Sequence[int] | None = None,
        stop_strings: Sequence[str] | None = None,
        on_release: Callable[[str], None] | None = None,
    ):
        if slots < 1 or max_len < 1 or workers < 0:
            raise ValueError(f"TurnEngine: slots={slots} and max_len={max_len} must be >= 1, workers={workers} >= 0")
        default_eos, default_stops = engine_stops(tokenizer)
        self.render = Renderer(tokenizer)
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self._decode = (lambda ids: backend.decode(ids, skip_special_tokens=False)) if backend else self.render.decode
        self.write_turn = write_turn
        self.slots, self.max_len = slots, max_len
        self.eos_ids = list(default_eos if eos_ids is None else eos_ids)
        self.stop_strings = tuple(default_stops if stop_strings is None else stop_strings)
        self.on_release = on_release
        self.params: Any = None
        self.errors: list[tuple[str, BaseException]] = []
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="teacher") if workers else None
        self._requests: dict[str, _Request] = {}

    # ---- the engine contract --------------------------------------------------------------------------------

    def free_slots(self) -> int:
        """Slots not held by a request."""
        return self.slots - len(self._requests)

    def submit(self, request_id: str, prompt: list[int], *, max_new_tokens: int, key: int | None = None) -> None:
        """Start a request: decode the prompt and ask the teacher for the first turn (`key`, the episode's random
        stream, is unused: the teacher samples on its side)."""
        if self.free_slots() < 1:
            raise ValueError(f"submit {request_id!r}: no free slot (all {self.slots} in use)")
        if request_id in self._requests:
            raise ValueError(f"submit {request_id!r}: the request id is already in use")
        request = _Request(self._decode(prompt), len(prompt), max_new_tokens)
        self._requests[request_id] = request
        self._start(request_id, request)

    def extend(self, request_id: str, tokens: list[int], *, max_new_tokens: int) -> None:
        """Append observation tokens to a paused request and ask the teacher for its next turn."""
        request = self._requests.get(request_id)
        if request is None or request.active:
            raise ValueError(f"extend {request_id!r}: no paused request with this id")
        request.text += self._decode(tokens)
        request.length += len(tokens)
        request.max_new_tokens, request.active = max_new_tokens, True
        self._start(request_id, request)

    def release(self, request_id: str) -> None:
        """Free the request's slot (and tell the teacher the episode is over)."""
        request = self._requests.pop(request_id, None)
        if request is not None and isinstance(request.turn, Future):
            request.turn.cancel()
        if self.on_release is not None:
            self.on_release(request_id)

    def context_left(self, request_id: str) -> int:
        """Free cache positions of the request."""
        return self.max_len - self._requests[request_id].length

    def set_params(self, params: Any) -> None:
        """Store new weights (a text teacher has no use for them)."""
        self.params = params

    def has_work(self) -> bool:
        """True while some request waits for its turn."""
        return any(r.active for r in self._requests.values())

    def step(self) -> list[Event]:
        """Report every turn that is written (blocking until one is, when the teacher writes on threads)."""
        active = [(rid, r) for rid, r in self._requests.items() if r.active]
        futures = [r.turn for _, r in active if isinstance(r.turn, Future)]
        if futures and not any(f.done() for f in futures) and len(futures) == len(active):
            wait(futures, return_when=FIRST_COMPLETED)
        events = []
        for rid, request in active:
            if isinstance(request.turn, Future):
                if not request.turn.done():
                    continue
                request.turn = self._result(rid, request.turn)
            events.append(self._event(rid, request))
        return events

    # ---- turns ----------------------------------------------------------------------------------------------

    def _start(self, request_id: str, request: _Request) -> None:
        messages = parse_chat(request.text)
        if self._pool is not None:
            request.turn = self._pool.submit(self.write_turn, messages, request_id)
            return
        try:
            request.turn = self.write_turn(messages, request_id)
        except Exception as exc:  # noqa: BLE001 - a failing teacher turn becomes an empty turn, recorded
            self.errors.append((request_id, exc))
            request.turn = ""

    def _result(self, request_id: str, future: Future) -> str:
        try:
            return future.result()
        except Exception as exc:  # noqa: BLE001 - as in _start
            self.errors.append((request_id, exc))
            return ""

    def _event(self, request_id: str, request: _Request) -> Event:
        """The turn's tokens, cut like a model's turn: at a stop string, at max_new_tokens, at the cache end."""
        text = str(request.turn).strip() + IM_END
        reason, stop = "eos", IM_END
        hits = [(i + len(s), s) for s in self.stop_strings if (i := text.find(s)) >= 0]
        if hits:
            end, stop = min(hits)
            text, reason = text[:end], "stop"
        tokens = self.render.encode(text)
        room = self.max_len - request.length
        if len(tokens) > request.max_new_tokens and request.max_new_tokens <= room:
            tokens, reason, stop = tokens[: request.max_new_tokens], "length", None
        elif len(tokens) >= room:
            tokens, reason, stop = tokens[: max(room, 0)], "context", None
        request.text += self._decode(tokens)
        request.length += len(tokens)
        request.active, request.turn = False, None
        return Event(request_id, tokens, [0.0] * len(tokens), reason, stop)

    def close(self) -> None:
        """Stop the teacher's thread pool."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
