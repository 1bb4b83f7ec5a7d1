"""What a request must pass before its prompt is tokenized: the API key, the model's name, a JSON body within the
size limit, and prompt text that can fit the context."""

from __future__ import annotations

import asyncio
import hmac
import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from jaxseeker.serve import protocol
from jaxseeker.serve.protocol import APIError

if TYPE_CHECKING:
    from jaxseeker.serve.app import Served


def check_auth(served: Served, request: Request) -> None:
    """A 401 unless the request sends the server's key (when it has one) as a Bearer token."""
    if served.api_key is None:
        return
    given = request.headers.get("authorization", "")
    scheme, _, key = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode(), served.api_key.encode()):
        raise APIError(401, "Incorrect or missing API key: send 'Authorization: Bearer <key>'.", code="invalid_api_key")


def check_model(served: Served, model: str) -> None:
    """A 404 `model_not_found` unless `model` is the served model's name."""
    if model != served.model_name:
        raise APIError(
            404,
            f"The model {protocol.show(model)} does not exist; this server serves {served.model_name!r}.",
            param="model",
            code="model_not_found",
        )


async def read_body(served: Served, request: Request) -> Any:
    """The decoded JSON body: 415 unless it is application/json, 413 past `max_body_bytes`, 400 unless JSON."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        got = protocol.show(media_type) if media_type else "no Content-Type"
        raise APIError(
            415,
            f"The request body must be JSON sent with 'Content-Type: application/json', got {got}.",
            code="unsupported_media_type",
        )
    limit = served.max_body_bytes
    too_large = APIError(
        413,
        f"The request body exceeds the {limit} bytes this server reads (its context is {served.max_len} tokens).",
        code="request_too_large",
    )
    if int(request.headers.get("content-length") or 0) > limit:  # h11 has checked that it is a number
        raise too_large
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise too_large
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON or UTF-8, an integer of > 4300 digits, too deep nesting
        raise APIError(400, f"The request body is not valid JSON: {exc}") from None


async def check_size(served: Served, texts: list[str], param: str) -> None:
    """A 400 `context_length_exceeded` for prompt text that cannot fit the context, before it is tokenized (text
    over the bound as sent is composed and counted again on a worker thread: a megabyte takes up to 0.1 s)."""
    bound = served.prompt_bound
    if bound.max_units is None or bound.units(texts) <= bound.max_units:
        return
    size = await asyncio.to_thread(bound.oversized, texts)
    if size is not None:
        unit = "bytes" if bound.byte_level else "characters"
        raise APIError(
            400,
            f"This model's maximum context length is {served.max_len} tokens. However, your prompt has {size} "
            f"{unit} of text, more than {bound.max_units} {unit} hold in that many tokens of this tokenizer. Please "
            "reduce the prompt.",
            param=param,
            code="context_length_exceeded",
        )
