"""An engine over transformers' `generate`: the baseline `jaxseeker bench rollout --model` drives with the same loop.

`HFEngine` offers what the rollout loop uses of `generation.Engine` (`submit`, `extend`, `step`, `release`,
`free_slots`, `has_work`, `context_left`, `max_len`) and reports the same `Event`s, but each turn is one greedy
`model.generate` call of one request at a time: no batching across requests, the request's own `DynamicCache`
carried from turn to turn (so a turn prefills only its new tokens, as the engine's slots do), stopped by
transformers' own EOS and stop-string criteria. torch and transformers load when an HFEngine is built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jaxseeker.generation.requests import Event


@dataclasses.dataclass
class _Request:
    """A request's context (every token so far), its turn budget, cache and whether it waits to decode."""

    context: list[int]
    max_new: int
    cache: Any = None  # transformers DynamicCache of context[:-1] after the first turn
    running: bool = True


class HFEngine:
    """Greedy turns of `hf` (a transformers causal LM, eval mode) for the rollout loop, one request at a time.

    `slots` bounds the requests held at once (the loop admits that many episodes); `max_len` bounds a request's
    context. A turn ends at an id of `eos_ids` ("eos"), a string of `stop_strings` ("stop": transformers'
    `StopStringCriteria` over `tokenizer`'s vocabulary), its `max_new_tokens` ("length") or a full context
    ("context"), as `Engine.step` reports them. `fed_tokens` counts the tokens the model ran over (prefilled
    and decoded).
    """

    def __init__(
        self,
        hf: Any,
        tokenizer: Any,
        *,
        slots: int,
        max_len: int,
        eos_ids: Sequence[int] = (),
        stop_strings: Sequence[str] = (),
    ):
        import transformers

        if slots < 1 or max_len < 2:
            raise ValueError(f"HFEngine: slots must be >= 1 and max_len >= 2, got {slots} and {max_len}")
        self.hf, self.tokenizer = hf, tokenizer
        self.slots, self.max_len = slots, max_len
        self.eos_ids = frozenset(int(t) for t in eos_ids)
        self.stop_strings = tuple(stop_strings)
        stops = transformers.StoppingCriteriaList(
            [transformers.StopStringCriteria(tokenizer, list(self.stop_strings))] if self.stop_strings else []
        )  # built once: transformers would rebuild it from the vocabulary at every call
        self._options = {
            "do_sample": False,
            "eos_token_id": sorted(self.eos_ids) or None,
            "pad_token_id": min(self.eos_ids, default=0),
            "stopping_criteria": stops,
            "return_dict_in_generate": True,
            "output_logits": True,
        }
        # transformers 5.2x names generate's cache `cache` (`past_key_values` warns there); earlier ones know only that
        self._cache_key = "cache" if hasattr(transformers.generation.utils, "ALL_CACHE_NAMES") else "past_key_values"
        self.fed_tokens = 0
        self._requests: dict[str, _Request] = {}

    # ---- requests (as Engine) -------------------------------------------------------------------------------

    def free_slots(self) -> int:
        """Number of requests that could still be admitted."""
        return self.slots - len(self._requests)

    def has_work(self) -> bool:
        """True when some request waits for its turn (not paused)."""
        return any(r.running for r in self._requests.values())

    def submit(
        self, request_id: str, prompt: list[int], *, max_new_tokens: int, sampling: Any = None, key: int | None = None
    ) -> None:
        """Start a request (ValueError when no slot is free, the id is taken or the prompt does not fit); `key` (a
        random stream) is unused: decoding is greedy."""
        if sampling is not None:
            raise ValueError(f"HFEngine.submit: {request_id!r}: only greedy decoding (no per-request sampling)")
        if request_id in self._requests:
            raise ValueError(f"HFEngine.submit: request {request_id!r} already holds a slot")
        if not self.free_slots():
            raise ValueError(f"HFEngine.submit: no free slot for {request_id!r} (all {self.slots} are held)")
        if not 0 < len(prompt) <= self.max_len:
            raise ValueError(
                f"HFEngine.submit: prompt of {request_id!r} has {len(prompt)} tokens; needs 1..{self.max_len}"
            )
        self._requests[request_id] = _Request([int(t) for t in prompt], max_new_tokens)

    def extend(self, request_id: str, tokens: list[int], *, max_new_tokens: int) -> None:
        """Append `tokens` (an observation) to a paused request's context and resume it."""
        request = self._request(request_id, "extend")
        if request.running:
            raise ValueError(f"HFEngine.extend: request {request_id!r} is not paused (wait for its event)")
        if len(tokens) > self.context_left(request_id):
            raise ValueError(
                f"HFEngine.extend: {len(tokens)} tokens do not fit request {request_id!r} "
                f"(context_left={self.context_left(request_id)})"
            )
        request.context += [int(t) for t in tokens]
        request.running, request.max_new = True, max_new_tokens

    def release(self, request_id: str) -> None:
        """Drop the request and its cache."""
        self._request(request_id, "release")
        del self._requests[request_id]

    def context_left(self, request_id: str) -> int:
        """How many more tokens (sampled or extended) the request's context can take."""
        return self.max_len - len(self._request(request_id, "context_left").context)

    def _request(self, request_id: str, caller: str) -> _Request:
        if request_id not in self._requests:
            raise ValueError(f"HFEngine.{caller}: unknown request {request_id!r} (held: {sorted(self._requests)})")
        return self._requests[request_id]

    # ---- turns ----------------------------------------------------------------------------------------------

    def step(self) -> list[Event]:
        """One whole turn of every running request, one `generate` call after another; their events."""
        return [self._turn(rid, r) for rid, r in list(self._requests.items()) if r.running]

    def _turn(self, request_id: str, request: _Request) -> Event:
        """Greedy `generate` from the request's context until a stop, its budget or the end of its context."""
        import torch
        import transformers

        budget = min(request.max_new, self.max_len - len(request.context))
        request.running = False
        if budget <= 0:
            return Event(request_id, [], [], "context" if len(request.context) >= self.max_len else "length")
        if request.cache is None:
            request.cache = transformers.DynamicCache(config=self.hf.config)
        cached = request.cache.get_seq_length()  # the context but its newest turn's last token and the extension
        ids = torch.tensor([request.context])  # [1, context]
        with torch.no_grad():
            out = self.hf.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                **{self._cache_key: request.cache},
                max_new_tokens=budget,
                **self._options,
            )
        tokens = out.sequences[0, len(request.context) :].tolist()
        logits = torch.cat(out.logits).float()  # [new, vocab]
        logprobs = torch.log_softmax(logits, dim=-1)[torch.arange(len(tokens)), tokens].tolist()
        self.fed_tokens += len(request.context) - cached + len(tokens) - 1
        request.context += tokens
        return Event(request_id, tokens, logprobs, *self._reason(tokens, len(request.context) >= self.max_len))

    def _reason(self, tokens: list[int], full: bool) -> tuple[str, str | None]:
        """Why the turn of `tokens` ended (`full`: the context has no room left), as `Engine` words it, and the EOS
        text or the stop string."""
        if tokens and tokens[-1] in self.eos_ids:
            return "eos", self.tokenizer.decode(tokens[-1:], skip_special_tokens=False)
        tail = self.tokenizer.decode(tokens, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        stop = next((s for s in self.stop_strings if s in tail), None)
        if stop is not None:
            return "stop", stop
        return ("context" if full else "length"), None
