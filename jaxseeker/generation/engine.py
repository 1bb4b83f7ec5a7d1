"""The batched generation engine: fixed slots over one KV cache, chunked prefill, multi-step decode,
continuous batching, host-side stop checks with rollback, pause / extend / release.

Each slot keeps every context token but the newest in the cache; the newest (`last`) is the input of the
next decode step. So a prompt of n tokens prefills n - 1 of them, a stop inside a decode call is rolled back
by moving the slot's end (the host owns every row's end and passes it to each call), and `extend` prefills
the stop token followed by the observation.

A request whose prompt opens with another held request's tokens (a question's group of rollouts, one system prompt
for every episode), or with those a released request left (a client resending a conversation), shares their pages
(`generation.prefix`, `generation.pages`) and prefills the rest of its prompt only.

A request may bring its own `SamplingConfig` (`submit(..., sampling=)`, as a server's clients do): a decode
call with such a request samples every row with its own temperature / top-p / top-k / seed (traced, so no
recompile per value). `peek` shows a turn in progress, for streaming.

The cache is paged (`generation.layout`): a pool of fixed-size pages allocated once, a page table a slot, pages taken
as a context grows (`generation.schedule`). Attention reads each row only up to its own end, so the compiled programs
are one decode per rows bucket and one prefill per rows bucket, all compiled by `warm_up` before the first request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import jax.numpy as jnp
import numpy as np

from jaxseeker.generation import handoff, layout, prefix, roofline, schedule, steps, warmup
from jaxseeker.generation.keys import request_hash
from jaxseeker.generation.pages import PAGE, Pages, page_shape
from jaxseeker.generation.requests import Event, Slot, Stops, check_budget, prefill_batch, row_sampling
from jaxseeker.generation.sampling import SamplingConfig
from jaxseeker.model import ModelConfig

GREEDY = SamplingConfig()
# Decode rows buckets: slots, slots / 4, slots / 16 … 2 (each one compiled program). Not 1: for a batch of
# one, XLA:CPU drops the batch axis of the attention dots and copies every layer's cache on each step, so one row
# decodes about a fifth slower than two (docs/results.md).
DECODE_ROWS_STEP = 4


class Engine:
    """Continuous-batching sampler over `slots` rows of `max_len` tokens (see the module docstring).

    Weights and cache are held in the engine's own layout (`generation.layout`: one array per layer), the cache a pool
    of `pages` pages of `page` positions (at most the power of two that covers max_len), allocated once; by default
    enough for every slot at max_len, fewer to hold more slots than would fit at max_len: a slot whose context needs a
    page when none is free waits for one; in a part of the pool where none can go on, the last of that part to come
    gives its pages back and writes its context again later (`preempted` counts them). A decode call runs the rows that
    decode, longest first, in the smallest of `slots`, `slots / 4`, `slots / 16` … 2 rows that holds them (no row is
    moved; `rows_split`: a mesh splits the slots and the pool over its devices, so every call runs every slot in order),
    and its attention reads each row's keys only up to that row's own end (`ragged_attention`), so short contexts and
    idle rows do not pay for the longest one. A request whose prompt shares at least `share_prefix` leading tokens with
    another held request's prompt shares its pages (0: never share), waiting for them to be written where that spares it
    a prefill chunk; `prefilled_tokens` and `shared_tokens` count the context tokens written by prefill calls and those
    shared from another slot. Compiled programs: one decode per rows bucket (one more per bucket for requests with their
    own sampling), one prefill per power-of-two rows bucket (every slot at once where the slots are split); `warm_up`
    compiles them up front. `tally` counts the work the calls needed (`roofline.Tally`: a workload whose roofline a
    run's wall is read against). `host_s`, `device_wait_s`, `decode_calls`: the wall of `step` spent on the host and
    waiting for decode results, and the decode calls made.

    The engine's weights and cache are in `dtype` (default: the model's compute dtype, which the forward casts every
    weight to anyway), whatever the dtype of the params given. With a `mesh`, they are placed on it by their logical
    axes (`rules`, default `parallel.GENERATION_RULES`): weights stationary, split over `tensor` only, so decoding
    never gathers one; slots split over the data axes (the engine's replicas); the cache is created sharded.
    `handoff_mesh`: the mesh new params are resharded onto before this process takes its part (a multi-host RL run:
    every process's engine mesh side by side, `parallel.replica_meshes`; default: `mesh`). `stacked_prefill`: keep a
    stacked copy of the weights for the scanned prefill (`cached_forward.prefill_forward`: compiles faster, at twice
    the weights' memory, and copies the pools in and out of the scan); False (the default)
    prefills over the per-layer weights, unrolled, writing the rows in place (1.6–1.8× faster at 8–32 rows of
    SmolLM2-135M on CPU).
    """

    def __init__(
        self,
        params,
        cfg: ModelConfig,
        *,
        slots: int,
        max_len: int,
        sampling: SamplingConfig = GREEDY,
        eos_ids: Sequence[int] = (),
        stop_strings: Sequence[str] = (),
        decode: Callable[[list[int]], str] | None = None,
        steps_per_call: int = 8,
        prefill_chunk: int = 128,
        mesh=None,
        rules=None,
        dtype: str | None = None,
        handoff_mesh=None,
        stacked_prefill: bool = False,
        share_prefix: int = 16,
        page: int = PAGE,
        pages: int | None = None,
    ):
        for name, value, low in (
            ("slots", slots, 1),
            ("max_len", max_len, 2),
            ("steps_per_call", steps_per_call, 1),
            ("prefill_chunk", prefill_chunk, 1),
            ("share_prefix", share_prefix, 0),
            ("page", page, 1),
        ):
            if value < low:
                raise ValueError(f"Engine: {name} must be >= {low}, got {value}")
        self._stops = Stops(eos_ids, stop_strings, decode)
        self.eos_ids, self.stop_strings = self._stops.eos_ids, self._stops.strings  # what ends a turn
        self.cfg, self.sampling = cfg, sampling
        self.slots, self.max_len = slots, max_len
        self.steps_per_call, self.prefill_chunk = steps_per_call, min(prefill_chunk, max_len)
        self.share_prefix = share_prefix
        page, row_pages = page_shape(max_len, page)
        self.prefilled_tokens = self.shared_tokens = self.decode_calls = self.preempted = self._arrivals = 0
        self.host_s = self.device_wait_s = 0.0
        self.dtype = jnp.dtype(dtype or cfg.compute_dtype).name
        self.tally = roofline.Tally(cfg, self.dtype)  # the work the calls needed, for their roofline
        self.stacked_prefill = stacked_prefill
        if mesh is not None and rules is None:  # imported here: an engine without a mesh needs no rules
            from jaxseeker.parallel import GENERATION_RULES as rules
        self._mesh, self._rules = mesh, rules
        shards = 1 if mesh is None else layout.slot_shards(slots, mesh, self._rules)
        pages = slots * row_pages if pages is None else pages
        if pages % shards or pages < shards:
            raise ValueError(
                f"Engine: pages must be a positive multiple of the {shards} parts of the slots, got {pages}"
            )
        self._shape = layout.PoolShape(slots, row_pages, pages // shards, page, shards)
        self._pages = Pages(slots, row_pages, pages // shards, page, shards)
        self._sharding = None if mesh is None else layout.cache_shardings(cfg, self._shape, mesh, self._rules)
        # A cache whose slots are split over devices decodes every slot in order (no row leaves its device); one held
        # whole on each device (no mesh, or a mesh of tensor parallelism only) decodes the rows that decode.
        self.rows_split = shards > 1
        self._handoff = handoff.handoff_fn(
            cfg,
            dtype=self.dtype,
            stacked=stacked_prefill,
            mesh=handoff_mesh or mesh,
            local_mesh=mesh,
            rules=self._rules,
        )
        self._stacked = self._params = self._cache = None
        self.set_params(params)
        self._slots: list[Slot | None] = [None] * slots
        self._index: dict[str, int] = {}
        least = min(2, slots)
        self._decode_buckets = sorted({max(slots // DECODE_ROWS_STEP**i, least) for i in range(slots.bit_length())})
        # Split slots prefill all together too: each part's rows then write only their own part of the pool.
        self._prefill_buckets = (
            [slots] if self.rows_split else sorted({min(1 << i, slots) for i in range(slots.bit_length() + 1)})
        )

    def warm_up(self, rows: int | None = None) -> warmup.WarmUp:
        """Compile every program the engine's calls will run (`generation.warmup`; with `rows`, those of calls of at
        most that many rows: a workload of fewer requests than slots), so that no request waits for a compile; what
        the persistent compilation cache holds is loaded from it instead. Call it before the first request and after
        `set_params` with weights of another dtype or sharding."""
        return warmup.warm_up(self, rows)

    # ---- requests -------------------------------------------------------------------------------------------

    def free_slots(self) -> int:
        """Number of slots that no request holds."""
        return self._slots.count(None)

    def has_work(self) -> bool:
        """True when some request waits for prefill or decoding (not paused)."""
        return any(s is not None and s.running for s in self._slots)

    def submit(
        self,
        request_id: str,
        prompt: list[int],
        *,
        max_new_tokens: int,
        sampling: SamplingConfig | None = None,
        key: int | None = None,
    ) -> None:
        """Start a request in a free slot (ValueError when none is free, the id is taken or the prompt
        does not fit in max_len).

        key: the request's random stream (`sampling.episode_key(question id, sample index)`, in [0, 2**31)): its
        token i is drawn with the PRNG key (seed, key, i), whatever slot, batch or order it runs in. Default: a hash
        of request_id, or 0 with its own `sampling`.
        sampling: the request's own temperature / top-p / top-k / seed instead of the engine's; its PRNG keys
        are then (sampling.seed, key, token index), so a seed draws the same tokens whatever the id or slot.
        """
        if request_id in self._index:
            raise ValueError(f"Engine.submit: request {request_id!r} already holds a slot")
        if None not in self._slots:
            raise ValueError(f"Engine.submit: no free slot for {request_id!r} (all {self.slots} are held)")
        if not 0 < len(prompt) <= self.max_len:
            raise ValueError(
                f"Engine.submit: prompt of {request_id!r} has {len(prompt)} tokens; needs 1..{self.max_len}"
            )
        check_budget("submit", request_id, max_new_tokens)
        if key is not None and not 0 <= key < 2**31:
            raise ValueError(f"Engine.submit: key of {request_id!r} must be in [0, 2**31), got {key}")
        if sampling is not None and not 0 <= sampling.seed < 2**31:
            raise ValueError(
                f"Engine.submit: sampling.seed of {request_id!r} must be in [0, 2**31), got {sampling.seed}"
            )
        prompt = [int(t) for t in prompt]
        row = self._slots.index(None)
        slot = Slot(
            request_id,
            key if key is not None else 0 if sampling is not None else request_hash(request_id),
            prompt[:-1],
            prompt[-1],
            max_new_tokens,
            sampling=sampling,
            prompt=tuple(prompt),
            arrival=self._arrivals,
        )
        self._arrivals += 1
        self._cache, shared = prefix.share_at_submit(
            self._cache, slot, row, self._slots, self._pages, least=self.share_prefix, chunk=self.prefill_chunk
        )
        self.shared_tokens += shared
        self._slots[row] = slot
        self._index[request_id] = row

    def extend(self, request_id: str, tokens: list[int], *, max_new_tokens: int) -> None:
        """Append `tokens` (an observation) to a paused request's context and resume decoding."""
        slot = self._slot(request_id, "extend")
        if slot.running:
            raise ValueError(f"Engine.extend: request {request_id!r} is not paused (wait for its event)")
        if len(tokens) > self.context_left(request_id):
            raise ValueError(
                f"Engine.extend: {len(tokens)} tokens do not fit request {request_id!r} "
                f"(context_left={self.context_left(request_id)})"
            )
        check_budget("extend", request_id, max_new_tokens)
        if tokens:
            slot.prefill, slot.last = [*slot.prefill, slot.last, *(int(t) for t in tokens[:-1])], int(tokens[-1])
        slot.running, slot.max_new = True, max_new_tokens

    def release(self, request_id: str) -> None:
        """Free the request's slot; its written pages stay as a prefix a later request may share (with
        `share_prefix`), until a page is wanted."""
        self._slot(request_id, "release")
        row = self._index.pop(request_id)
        slot, self._slots[row] = self._slots[row], None
        if self.share_prefix:  # a later request may open with the same tokens (a client resending a conversation)
            self._pages.keep(row, tuple(slot.written))
        else:
            self._pages.release(row)

    def peek(self, request_id: str) -> tuple[list[int], list[float]]:
        """Tokens and log-probs the request has sampled so far in its current turn (copies; its next event
        reports them again): lets a caller stream a turn before it ends."""
        slot = self._slot(request_id, "peek")
        return list(slot.tokens), list(slot.logprobs)

    def context_left(self, request_id: str) -> int:
        """How many more tokens (sampled or extended) the request's context can take."""
        slot = self._slot(request_id, "context_left")
        return self.max_len - (slot.end + len(slot.prefill) + 1)

    def set_params(self, params) -> None:
        """Use new weights from the next call on: `params` stacked as `model.init_params` makes them, in any dtype
        and sharding (e.g. the trainer's float32 fsdp shards), cast and resharded on device into the engine's copy
        (`generation.handoff`; no recompile). Collective when the engine has a hand-off mesh over several
        processes. After `unload`, the cache comes back too, empty."""
        handoff.check_params(params, self.cfg, "Engine.set_params")
        self._stacked = self._params = None  # the old copy goes before the new one comes
        self._pages.forget_kept()  # their keys and values are the old weights
        self._stacked, self._params = self._handoff(params)
        if self._cache is None:
            self._cache = layout.init_layer_cache(self.cfg, self._shape, self.dtype, self._sharding)

    def unload(self) -> None:
        """Drop the engine's weights and cache from the devices (e.g. while the trainer updates the policy, which
        then hands the new weights over with `set_params`). Every request must have been released."""
        if self._index:
            raise ValueError(f"Engine.unload: requests still hold slots: {sorted(self._index)}")
        self._stacked = self._params = self._cache = None
        self._pages.forget_kept()

    def _slot(self, request_id: str, caller: str) -> Slot:
        if request_id not in self._index:
            raise ValueError(f"Engine.{caller}: unknown request {request_id!r} (held: {sorted(self._index)})")
        return self._slots[self._index[request_id]]

    # ---- one round ------------------------------------------------------------------------------------------

    def step(self) -> list[Event]:
        """Prefill every pending prompt / extension (chunked), then `steps_per_call` decode steps of all running
        slots in one device call; return the events of requests that paused this round."""
        if self._params is None:
            raise RuntimeError("Engine.step: the engine is unloaded; give it weights with set_params first")
        start, waited = time.perf_counter(), self.device_wait_s
        schedule.reserve_decoding(self._slots, self._pages, self.steps_per_call, self.max_len)
        moved = self._prefill_all()
        budget, events = schedule.decode_budget(self._slots, self._pages, self.steps_per_call, self.max_len)
        moved |= budget > 0
        moved[[self._index[e.request_id] for e in events]] = True
        if budget.any():
            events += self._decode(budget)
        for part in schedule.stuck_parts(self._slots, self._pages, moved):
            schedule.preempt(self._slots, self._pages, part)
            self.preempted += 1
        self.host_s += time.perf_counter() - start - (self.device_wait_s - waited)
        return events

    def _ends(self) -> np.ndarray:
        return np.array([0 if s is None else s.end for s in self._slots], np.int32)

    def _prefill_all(self) -> np.ndarray:
        """Share the prefixes that are ready, then write all other queued context tokens, one chunk per row per device
        call (a power of 2 of rows: `requests.call_rows`), until none is left or the rows left wait for pages. Returns
        `[slots]`: the slots it wrote context into."""
        wrote = np.zeros(self.slots, bool)
        while True:
            self._cache, copied = prefix.share_ready(self._cache, self._slots, self._pages)
            self.shared_tokens += copied
            ends = self._ends()  # before the batch moves them
            room = schedule.prefill_room(self._slots, self._pages, self.prefill_chunk)
            batch = prefill_batch(self._slots, self.prefill_chunk, room, every=self.rows_split)
            if batch is None:
                return wrote
            rows, tokens, counts = batch
            wrote[rows[counts > 0]] = True
            self.prefilled_tokens += int(counts.sum())
            for row, count in zip(rows.tolist(), counts.tolist(), strict=True):
                self.tally.prefill(count, int(ends[row]))
            self._cache = steps.prefill(
                self._prefill_params(), self._cache, rows, tokens, counts, ends, self._pages.table, **self._options()
            )

    def _prefill_params(self) -> dict:
        """The weights a prefill call runs on: the stacked copy (`stacked_prefill`) or the per-layer ones."""
        return self._stacked if self.stacked_prefill else self._params

    def _options(self, rows: int | None = None, every: bool = False) -> dict:
        """The static arguments of a prefill call, or (`rows` given) of a decode call of that many rows, `every`
        slot in order or not: what makes each of the engine's programs (`warmup` compiles the same ones)."""
        shared = {"cfg": self.cfg, "sharding": self._sharding}
        if rows is None:
            return shared
        return shared | {"steps": self.steps_per_call, "tile": rows if every else steps.DECODE_TILE}

    def _decode(self, budget: np.ndarray) -> list[Event]:
        """One multi-step decode call over the running rows, then the host-side stop checks and rollbacks."""
        # Every slot in order where the slots are split over a mesh's devices (no row leaves its device).
        rows = None if self.rows_split else schedule.decode_rows(budget, self._slots, self._decode_buckets)
        order = np.arange(self.slots, dtype=np.int32) if rows is None else rows
        n = len(order)
        live = [(i, self._slots[row]) for i, row in enumerate(order) if budget[row] > 0]
        last = np.zeros(n, np.int32)
        request = np.zeros(n, np.int32)
        count = np.zeros(n, np.int32)
        for i, slot in live:
            last[i], request[i], count[i] = slot.last, slot.request, slot.sampled
        ends = self._ends()
        seed, per_row, sampling = np.int32(self.sampling.seed), None, self.sampling.static
        if any(slot.sampling is not None for _, slot in live):
            seed, per_row, sampling = *row_sampling(live, n, self.sampling), None
        self._cache, out_tok, out_lp = steps.decode(
            self._params,
            self._cache,
            rows,
            last,
            ends,
            self._pages.table,
            budget[order],
            request,
            count,
            seed,
            per_row,
            sampling=sampling,
            **self._options(n, every=rows is None),
        )
        self.decode_calls += 1
        waiting = time.perf_counter()
        out_tok, out_lp = np.asarray(out_tok), np.asarray(out_lp)  # [n, steps]
        self.device_wait_s += time.perf_counter() - waiting
        events, steps_kept = [], 0
        for i, slot in live:
            new = out_tok[i, : budget[order[i]]].tolist()
            cut, reason, stop = self._stops.find(slot.tokens, new)
            self.tally.decode(cut, slot.end)
            steps_kept = max(steps_kept, cut)
            kept = new[:cut]
            slot.tokens += kept
            slot.logprobs += out_lp[i, :cut].tolist()
            slot.sampled += cut
            slot.end += cut  # the previous `last` and all kept tokens but the newest are now in the cache
            slot.written += [slot.last, *kept[:-1]]
            slot.last = kept[-1]
            if reason is None and (schedule.room(slot, self.max_len) == 0 or len(slot.tokens) >= slot.max_new):
                reason = schedule.limit_reason(slot, self.max_len)
            if reason is not None:
                events.append(slot.pause(reason, stop))
        self.tally.decode_steps += steps_kept
        return events
