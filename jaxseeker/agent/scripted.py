"""Scripted policies: an Engine double replaying fixed assistant texts, and tiny models with set weights.

It serves tests and demos of the rollout loop without a model: each turn's text is tokenized in its
context (the same ids `tokenize_chat` gives), then emitted `steps_per_call` tokens per `step()` with
the engine's stop rules (EOS ids, stop strings, max new tokens, cache length), so the loop sees what
a real `jaxseeker.generation.Engine` would report. Every emitted token has log-prob 0 (probability 1).

`tool_calling_params` builds the weights of a tiny model that writes a tool call every turn after a
thought of random length: real decoding on the real engine with a predictable workload (benchmarks).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker import model
from jaxseeker.agent import prompts
from jaxseeker.data.tokenizer import train_tokenizer
from jaxseeker.generation import Event
from jaxseeker.model import ModelConfig

Script = Sequence[str] | Callable[[str, int], str]


@dataclasses.dataclass
class _Request:
    context: list[int]
    turn: int = -1
    pending: list[int] = dataclasses.field(default_factory=list)  # scripted tokens not yet emitted this turn
    emitted: list[int] = dataclasses.field(default_factory=list)  # emitted since the last event
    turn_tokens: list[int] = dataclasses.field(default_factory=list)  # emitted since the last submit/extend
    max_new_tokens: int = 0
    active: bool = False


class ScriptedEngine:
    """Engine double: `script[turn]` (or `script(context_text, turn)`) is the text of a request's next turn.

    A sequence script gives every request the same turns (past its end, the last text repeats); a
    callable gets the decoded context so far (system prompt, question, observations) and the turn
    index. Each turn is followed by `end_of_turn` (the chat template's `<|im_end|>`); a turn whose
    scripted tokens run out without an EOS id or stop string ends with reason "eos".
    `step_time_s` sleeps in every `step()` that has active requests, to stand in for device time.
    """

    def __init__(
        self,
        tokenizer: Any,
        script: Script,
        *,
        slots: int = 4,
        max_len: int = 4096,
        eos_ids: Sequence[int] = (),
        stop_strings: Sequence[str] = (),
        steps_per_call: int = 8,
        step_time_s: float = 0.0,
        end_of_turn: str = "<|im_end|>",
    ):
        if isinstance(script, Sequence) and (not script or isinstance(script, str)):
            raise ValueError("ScriptedEngine: script must be a non-empty list of turn texts or a callable")
        if slots < 1 or max_len < 1 or steps_per_call < 1:
            raise ValueError(
                f"ScriptedEngine: slots={slots}, max_len={max_len}, steps_per_call={steps_per_call} must be >= 1"
            )
        self.tokenizer = tokenizer
        self.render = prompts.Renderer(tokenizer)
        self.script = script
        self.slots = slots
        self.max_len = max_len
        self.eos_ids = frozenset(int(i) for i in eos_ids)
        self.stop_strings = tuple(stop_strings)
        self.steps_per_call = steps_per_call
        self.step_time_s = step_time_s
        self.end_of_turn = end_of_turn
        self.params: Any = None
        self._requests: dict[str, _Request] = {}

    def _turn_text(self, request: _Request) -> str:
        context_text = self.render.decode(request.context)
        if callable(self.script):
            return self.script(context_text, request.turn)
        return self.script[min(request.turn, len(self.script) - 1)]

    def _start_turn(self, request_id: str, request: _Request, max_new_tokens: int) -> None:
        if len(request.context) > self.max_len:
            raise ValueError(f"request {request_id!r}: {len(request.context)} tokens exceed max_len={self.max_len}")
        if max_new_tokens < 0:
            raise ValueError(f"request {request_id!r}: max_new_tokens must be >= 0, got {max_new_tokens}")
        request.turn += 1
        text = self._turn_text(request) + self.end_of_turn
        context_text = self.render.decode(request.context)
        whole = self.render.encode(context_text + text)
        n = len(request.context)
        tokens = whole[n:] if whole[:n] == request.context else self.render.encode(text)
        request.pending, request.turn_tokens = tokens, []
        request.max_new_tokens, request.active = max_new_tokens, True

    def free_slots(self) -> int:
        """Slots not held by a request (active or paused)."""
        return self.slots - len(self._requests)

    def submit(self, request_id: str, prompt: list[int], *, max_new_tokens: int) -> None:
        """Start a request in a free slot (ValueError when none is free or the id is in use)."""
        if self.free_slots() < 1:
            raise ValueError(f"submit {request_id!r}: no free slot (all {self.slots} in use)")
        if request_id in self._requests:
            raise ValueError(f"submit {request_id!r}: the request id is already in use")
        request = _Request(context=[int(t) for t in prompt])
        self._start_turn(request_id, request, max_new_tokens)
        self._requests[request_id] = request

    def extend(self, request_id: str, tokens: list[int], *, max_new_tokens: int) -> None:
        """Append observation tokens to a paused request and start its next turn."""
        request = self._requests.get(request_id)
        if request is None or request.active:
            raise ValueError(f"extend {request_id!r}: no paused request with this id")
        request.context.extend(int(t) for t in tokens)
        self._start_turn(request_id, request, max_new_tokens)

    def release(self, request_id: str) -> None:
        """Free the request's slot."""
        self._requests.pop(request_id, None)

    def context_left(self, request_id: str) -> int:
        """Free cache positions of the request."""
        return self.max_len - len(self._requests[request_id].context)

    def set_params(self, params: Any) -> None:
        """Store new weights (a script has no use for them)."""
        self.params = params

    def unload(self) -> None:
        """Drop the weights, as the engine does while the trainer updates them."""
        self.params = None

    def has_work(self) -> bool:
        """True while some request is decoding."""
        return any(r.active for r in self._requests.values())

    def _emit(self, request: _Request) -> tuple[str, str | None] | None:
        """Emit one scripted token; the pause reason and stop string if the request pauses on it."""
        token = request.pending.pop(0)
        request.context.append(token)
        request.emitted.append(token)
        request.turn_tokens.append(token)
        if token in self.eos_ids:
            return "eos", self.render.decode([token])
        text = self.render.decode(request.turn_tokens)
        stop = next((s for s in self.stop_strings if s in text), None)
        if stop is not None:
            return "stop", stop
        if not request.pending:
            return "eos", None
        return None

    def _limit(self, request: _Request) -> str | None:
        """ "context" when the cache is full, "length" when the turn's budget is spent, else None."""
        if len(request.context) >= self.max_len:
            return "context"
        if len(request.turn_tokens) >= request.max_new_tokens:
            return "length"
        return None

    def step(self) -> list[Event]:
        """Emit up to `steps_per_call` tokens for every active request; events for those that paused."""
        active = [(rid, r) for rid, r in self._requests.items() if r.active]
        if active and self.step_time_s > 0:
            time.sleep(self.step_time_s)
        events = []
        for request_id, request in active:
            paused = None
            for _ in range(self.steps_per_call):
                if self._limit(request) is not None:
                    break
                paused = self._emit(request)
                if paused is not None:
                    break
            reason, stop = paused if paused is not None else (self._limit(request), None)
            if reason is not None:
                tokens, request.emitted = request.emitted, []
                request.active = False
                events.append(Event(request_id, tokens, [0.0] * len(tokens), reason, stop))
        return events


def bigram_params(cfg: ModelConfig, transitions: Mapping[int, Mapping[int, float]], *, seed: int = 0) -> dict:
    """Weights of a model whose next token depends only on the current one: `P(b | a) = transitions[a][b]`.

    Every decoder block is zero (the residual stream is the token's embedding), each state token `a`
    gets its own embedding axis, and `lm_head` maps that axis to logits 30 + log P(b | a) (all other
    tokens: 0, so they are e^-30 times less likely). Other tokens get random embeddings off those axes.
    Needs untied embeddings and `hidden_size` > number of states. Sampling at temperature 1 follows the table.
    """
    if cfg.tie_word_embeddings:
        raise ValueError("bigram_params: the model config needs tie_word_embeddings=False")
    if len(transitions) >= cfg.hidden_size:
        raise ValueError(f"bigram_params: {len(transitions)} states need hidden_size > {len(transitions)}")
    params = model.init_params(cfg, jax.random.key(seed))
    embed = np.array(params["embed"], np.float32)  # [vocab, embed]
    embed[:, : len(transitions)] = 0.0
    lm_head = np.zeros((cfg.hidden_size, cfg.vocab_size), np.float32)  # [embed, vocab]
    scale = np.sqrt(cfg.hidden_size)  # rms_norm maps a one-hot embedding to sqrt(hidden) on its axis
    for axis, (state, nexts) in enumerate(transitions.items()):
        if abs(sum(nexts.values()) - 1.0) > 1e-6 or min(nexts.values()) <= 0:
            raise ValueError(f"bigram_params: transitions[{state}] must be positive and sum to 1, got {dict(nexts)}")
        embed[state] = 0.0
        embed[state, axis] = 1.0
        for nxt, p in nexts.items():
            lm_head[axis, nxt] = (30.0 + np.log(p)) / scale
    dtype = jnp.dtype(cfg.param_dtype)
    return {
        **params,
        "embed": jnp.asarray(embed, dtype),
        "lm_head": jnp.asarray(lm_head, dtype),
        "final_norm": jnp.ones((cfg.hidden_size,), dtype),
        "blocks": jax.tree.map(jnp.zeros_like, params["blocks"]),
    }


def tool_calling_params(
    cfg: ModelConfig,
    tokenizer: Any,
    call: str,
    *,
    mean_think_tokens: float = 32.0,
    word: str = " search",
    seed: int = 0,
) -> dict:
    """A tiny model that, sampled at temperature 1 after the chat generation prompt, always writes
    `<think>` + `word` × N + `</think><tool_call>` + `call` + `</tool_call><|im_end|>`, N ~ geometric(mean).

    Real compute on the real engine with turns of varying length and a tool call every turn: the
    rollout loop's benchmark policy. `word` must be one token and the tokens of `call` distinct.
    """
    if mean_think_tokens < 1:
        raise ValueError(f"mean_think_tokens must be >= 1, got {mean_think_tokens}")
    encode = prompts.Renderer(tokenizer).encode
    prompt_end = encode("<|im_start|>assistant\n")[-1]
    words = encode(word)
    if len(words) != 1:
        raise ValueError(f"tool_calling_params: word {word!r} is {len(words)} tokens, not one")
    chain = [prompt_end, *encode("<think>"), words[0]]
    tail = encode("</think><tool_call>" + call + "</tool_call><|im_end|>")
    if len(set(chain + tail)) != len(chain + tail):
        raise ValueError(f"tool_calling_params: the tokens of the turn are not distinct: {chain + tail}")
    stay = 1.0 - 1.0 / mean_think_tokens
    transitions: dict[int, dict[int, float]] = {a: {b: 1.0} for a, b in itertools.pairwise(chain)}
    transitions[words[0]] = {words[0]: stay, tail[0]: 1.0 - stay} if stay > 0 else {tail[0]: 1.0}
    transitions.update({a: {b: 1.0} for a, b in itertools.pairwise(tail)})
    return bigram_params(cfg, transitions, seed=seed)


_TOKENIZER_TEXTS = (
    prompts.SYSTEM_INTRO,
    prompts.TOOLS_SECTION,
    prompts.SUBMIT_NOTE,
    prompts.FINAL_ANSWER_REQUEST,
    (
        '{"type": "function", "function": {"name": "search", "description": "Search the web.", "parameters": '
        '{"type": "object", "properties": {"query": {"type": "array", "items": {"type": "string"}}}, '
        '"required": ["query"]}}}'
    ),
    "The town was founded by a weaver; the river flows through the old bridge with nine arches.",
)


def tool_calling_model(
    call: str, *, mean_think_tokens: float = 32.0, word: str = " the", seed: int = 0
) -> tuple[Any, ModelConfig, dict]:
    """(tokenizer, cfg, params) of a tiny model that writes the tool call `call` every turn (`tool_calling_params`).

    The tokenizer is a 600-token BPE trained on the agent's prompt texts plus `call` as one added
    token; the model is Qwen3-shaped (2 layers, hidden 64). Every call gives the same shapes, so
    engines over such models share their compiled steps.
    """
    tokenizer = train_tokenizer([text for text in _TOKENIZER_TEXTS for _ in range(4)], 600)
    tokenizer.add_tokens([call])
    cfg = ModelConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        head_dim=32,
        tie_word_embeddings=False,
    )
    params = tool_calling_params(cfg, tokenizer, call, mean_think_tokens=mean_think_tokens, word=word, seed=seed)
    return tokenizer, cfg, params
