"""The HTTP layer: an ASGI (Starlette) app with the OpenAI routes over a `Scheduler`.

Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /v1/models/{id}, GET /health.
A handler renders and checks the prompt, submits one job (its `n` choices per prompt) and awaits its
updates; with `stream` it answers server-sent events (`data: {chunk}` … `data: [DONE]`). A client that
disconnects, streaming or not, cancels its job, which frees its slots. When an API key is set, /v1 routes
need `Authorization: Bearer KEY`; /health never does. Every request must name this server in its Host header
(`hosts.HostCheck`). A POST body must be `application/json` (so that a web page cannot post to a local server
without a CORS preflight) and at most `Served.max_body_bytes` long; a prompt with more text than the context can
hold (`bound.PromptBound`) is refused before it is tokenized; prompts are rendered and tokenized on a thread of
their own, so a long one does not stall other requests.
Every error, an unexpected one included, is answered in OpenAI's JSON shape.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from jaxseeker.generation import SamplingConfig
from jaxseeker.generation.sampling import request_hash
from jaxseeker.serve import protocol
from jaxseeker.serve.bound import PromptBound, prompt_bound
from jaxseeker.serve.checks import check_auth, check_model, check_size, read_body
from jaxseeker.serve.hosts import HostCheck
from jaxseeker.serve.protocol import APIError, Params, Usage
from jaxseeker.serve.scheduler import (
    Choice,
    Job,
    QueueFull,
    Scheduler,
    SchedulerDown,
    Update,
)
from jaxseeker.serve.text import TextStream

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Served:
    """What the app serves: the scheduler, the tokenizer, the model's public name and context length; the key
    clients must send and the Host names they may use besides this machine's (`hosts.host_allowed`)."""

    scheduler: Scheduler
    tokenizer: Any
    model_name: str
    max_len: int
    api_key: str | None = dataclasses.field(default=None, repr=False)
    allowed_hosts: tuple[str, ...] = ()
    # Prompts are rendered and tokenized off the event loop, one at a time: a fast tokenizer used from two threads
    # at once can fail ("Already borrowed") while one of them changes its truncation settings.
    tokenizing: ThreadPoolExecutor = dataclasses.field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="tokenize"), repr=False, compare=False
    )

    @property
    def max_body_bytes(self) -> int:
        """The largest request body read (answered 413 beyond): 1 MiB plus 32 bytes per context token, far more
        than any prompt that fits the context needs."""
        return 2**20 + 32 * self.max_len

    @functools.cached_property
    def prompt_bound(self) -> PromptBound:
        """The most prompt text that may fit the context (`bound.prompt_bound`), read from the tokenizer once."""
        return prompt_bound(self.tokenizer, self.max_len)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (special tokens matched, none added)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None:
            return list(backend.encode(text, add_special_tokens=False).ids)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        """The text of `ids`, special tokens and spaces kept as sampled (safe from any thread)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None:
            return backend.decode(ids, skip_special_tokens=False)
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def choice_seed(seed: int | None, index: int) -> int:
    """The PRNG seed of choice `index`: derived from the request's seed (reproducible), else random."""
    return secrets.randbits(31) if seed is None else request_hash(f"{seed}/{index}")


def _error_response(error: APIError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


def _choices(served: Served, params: Params, prompts: list[list[int]], prompt_param: str) -> list[Choice]:
    """`n` choices per prompt (index = prompt · n + j), after checking each prompt against the context."""
    choices = []
    for p, prompt in enumerate(prompts):
        room = served.max_len - len(prompt)
        wanted = params.max_tokens if params.max_tokens is not None else room
        if room < 1 or wanted > room:
            asked = (
                f"your prompt has {len(prompt)} tokens, leaving no room for a completion"
                if wanted < 1
                else f"you requested {len(prompt) + wanted} tokens ({len(prompt)} in the prompt, {wanted} in the "
                "completion)"
            )
            raise APIError(
                400,
                f"This model's maximum context length is {served.max_len} tokens. However, {asked}. "
                "Please reduce the prompt or the completion length.",
                param=prompt_param if params.max_tokens is None else "max_tokens",
                code="context_length_exceeded",
            )
        for j in range(params.n):
            index = p * params.n + j
            sampling = SamplingConfig(
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=params.top_k,
                seed=choice_seed(params.seed, index),
            )
            choices.append(
                Choice(
                    index,
                    prompt,
                    wanted,
                    sampling,
                    TextStream(served.decode, params.stop),
                    ignore_eos=params.ignore_eos,
                )
            )
    return choices


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body has been read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class _Run:
    """One submitted job and the asyncio queue its scheduler updates arrive on."""

    def __init__(self, served: Served, choices: list[Choice]):
        loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[Update] = asyncio.Queue()
        self.served, self.total = served, len(choices)
        self.job = Job(uuid.uuid4().hex, choices, lambda u: loop.call_soon_threadsafe(self.queue.put_nowait, u))
        try:
            served.scheduler.submit(self.job)
        except QueueFull as exc:
            raise APIError(
                429, f"The server is busy: {exc}. Retry later.", type="requests", code="rate_limit_exceeded"
            ) from None
        except SchedulerDown as exc:
            raise APIError(503, f"The model is not available: {exc}", type="server_error") from None

    async def updates(self) -> AsyncIterator[Update]:
        """Updates until every choice has finished (an "error" update raises a 500)."""
        finished = 0
        while finished < self.total:
            update = await self.queue.get()
            if update.finish_reason == "error":
                raise APIError(500, f"The completion failed: {update.error}", type="server_error")
            finished += update.finish_reason is not None
            yield update


async def _complete(
    served: Served, request: Request, params: Params, prompts: list[list[int]], *, chat: bool
) -> Response:
    choices = _choices(served, params, prompts, "messages" if chat else "prompt")
    if len(choices) > served.scheduler.max_queue:
        raise APIError(
            400,
            f"{len(choices)} completions (n × prompts) exceed the {served.scheduler.max_queue} the server can queue",
            param="n",
        )
    run = _Run(served, choices)
    kind = "chat.completion" if chat else "text_completion"
    response_id = ("chatcmpl-" if chat else "cmpl-") + run.job.id
    usage = Usage(prompt_tokens=sum(len(p) for p in prompts) * params.n)
    if params.stream:
        return StreamingResponse(
            _stream(served, run, params, response_id, usage, chat=chat),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )
    texts: dict[int, list[str]] = {c.index: [] for c in choices}
    tokens: dict[int, tuple[list[int], list[float]]] = {c.index: ([], []) for c in choices}
    reasons: dict[int, str] = {}

    async def gather() -> None:
        async for u in run.updates():
            texts[u.index].append(u.text)
            tokens[u.index][0].extend(u.tokens)
            tokens[u.index][1].extend(u.logprobs)
            if u.finish_reason:
                reasons[u.index] = u.finish_reason
                usage.completion_tokens += u.completion_tokens

    work, gone = asyncio.ensure_future(gather()), asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        work.cancel()
        served.scheduler.cancel(run.job)
    if work not in done:
        return Response(status_code=499)  # the client is gone: nobody reads this
    work.result()
    out = []
    for index in sorted(texts):
        logprobs = protocol.logprobs_json(*tokens[index], _token_text(served), chat=chat) if params.logprobs else None
        out.append(protocol.choice_json(index, "".join(texts[index]), reasons[index], logprobs, chat=chat))
    return JSONResponse(protocol.response_json(kind, response_id, params.model, out, usage))


def _token_text(served: Served) -> Callable[[int], str]:
    return lambda t: served.decode([t])


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def _stream(
    served: Served, run: _Run, params: Params, response_id: str, usage: Usage, *, chat: bool
) -> AsyncIterator[str]:
    """The server-sent events of a streamed response; closing it (the client left) cancels the job."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    created = int(time.time())
    offsets: dict[int, int] = {}
    try:
        if chat:
            firsts = [
                protocol.choice_json(c.index, "", None, None, chat=True, delta=True, first=True)
                for c in run.job.choices
            ]
            yield _sse(protocol.response_json(kind, response_id, params.model, firsts, None, created))
        try:
            async for u in run.updates():
                logprobs = None
                if params.logprobs:
                    logprobs = protocol.logprobs_json(
                        u.tokens, u.logprobs, _token_text(served), chat=chat, offset=offsets.get(u.index, 0)
                    )
                offsets[u.index] = offsets.get(u.index, 0) + len(u.text)
                usage.completion_tokens += u.completion_tokens
                choice = protocol.choice_json(u.index, u.text, u.finish_reason, logprobs, chat=chat, delta=True)
                yield _sse(protocol.response_json(kind, response_id, params.model, [choice], None, created))
        except APIError as error:
            yield _sse(error.body())
            return
        if params.include_usage:
            yield _sse(protocol.response_json(kind, response_id, params.model, [], usage, created))
        yield "data: [DONE]\n\n"
    finally:
        served.scheduler.cancel(run.job)


def _handler(served: Served, fn: Callable[[Served, Request], Any]) -> Callable[[Request], Any]:
    async def handle(request: Request) -> Response:
        try:
            if request.url.path.startswith("/v1/"):
                check_auth(served, request)
            return await fn(served, request)
        except APIError as error:
            return _error_response(error)
        except ClientDisconnect:  # gone while sending its body: nobody reads an answer
            return Response(status_code=499)

    return handle


async def _off_loop(served: Served, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` on the tokenizing thread, so a long prompt does not hold up other requests."""
    return await asyncio.get_running_loop().run_in_executor(served.tokenizing, fn, *args)


async def _chat(served: Served, request: Request) -> Response:
    body = await read_body(served, request)
    params = protocol.parse_params(body, chat=True)
    check_model(served, params.model)
    messages = protocol.parse_messages(body)
    await check_size(served, protocol.message_texts(messages), "messages")
    from jaxseeker.data.chat import render_generation_prompt

    try:
        prompt = (await _off_loop(served, render_generation_prompt, messages, served.tokenizer)).tolist()
    except (ValueError, TypeError) as exc:
        raise APIError(400, f"'messages' cannot be rendered with the chat template: {exc}", param="messages") from None
    return await _complete(served, request, params, [prompt], chat=True)


async def _completions(served: Served, request: Request) -> Response:
    body = await read_body(served, request)
    params = protocol.parse_params(body, chat=False)
    check_model(served, params.model)
    vocab = len(served.tokenizer)
    given = protocol.parse_prompts(body)
    for prompt in given:
        if isinstance(prompt, str):
            await check_size(served, [prompt], "prompt")
    prompts = []
    for prompt in given:
        ids = await _off_loop(served, served.encode, prompt) if isinstance(prompt, str) else prompt
        if any(not 0 <= t < vocab for t in ids):
            raise APIError(400, f"'prompt' has token ids outside [0, {vocab})", param="prompt")
        prompts.append(ids)
    return await _complete(served, request, params, prompts, chat=False)


def _model_card(served: Served) -> dict[str, Any]:
    return {
        "id": served.model_name,
        "object": "model",
        "created": 0,
        "owned_by": "jaxseeker",
        "max_model_len": served.max_len,
    }


async def _models(served: Served, request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [_model_card(served)]})


async def _model(served: Served, request: Request) -> Response:
    check_model(served, request.path_params["model"])
    return JSONResponse(_model_card(served))


async def _health(served: Served, request: Request) -> Response:
    failure = served.scheduler.failure
    status = {
        "status": "ok" if failure is None else "failed",
        "model": served.model_name,
        "max_len": served.max_len,
        **served.scheduler.stats(),
    }
    return JSONResponse(status, status_code=200 if failure is None else 503)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    return _error_response(
        APIError(
            exc.status_code,
            f"{request.method} {request.url.path}: {exc.detail}",
            code="not_found" if exc.status_code == 404 else None,
        )
    )


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug's 500 in OpenAI's shape (the traceback is still logged; the server keeps serving)."""
    return _error_response(APIError(500, f"Internal server error: {type(exc).__name__}", type="server_error"))


def create_app(served: Served) -> Starlette:
    """The ASGI app of the OpenAI routes over `served`, behind its Host check."""
    served.prompt_bound  # noqa: B018 - read from the tokenizer now, not on the first request
    routes = [
        Route("/v1/chat/completions", _handler(served, _chat), methods=["POST"]),
        Route("/v1/completions", _handler(served, _completions), methods=["POST"]),
        Route("/v1/models", _handler(served, _models), methods=["GET"]),
        Route("/v1/models/{model:path}", _handler(served, _model), methods=["GET"]),
        Route("/health", _handler(served, _health), methods=["GET"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(HostCheck, allowed=served.allowed_hosts)],
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )
