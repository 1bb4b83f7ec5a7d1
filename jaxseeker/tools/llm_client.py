"""An OpenAI-compatible chat-completions client (httpx): summariser here, teacher and judge elsewhere."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from jaxseeker.tools import http
from jaxseeker.tools.keys import cut, read_key, redact


@dataclasses.dataclass(frozen=True)
class LLMConfig:
    """Where and how to reach a chat-completions server; the key is read from the environment variable `api_key_env`."""

    base_url: str = "https://api.openai.com/v1"  # an OpenAI-compatible server's /v1
    model: str = "gpt-4o-mini"  # the model's name on that server
    api_key_env: str = "OPENAI_API_KEY"  # unset or empty variable: no Authorization header (local servers)
    timeout_s: float = 120.0  # per attempt
    max_retries: int = 3  # further attempts on 429 / 5xx / network errors
    backoff_s: float = 1.0  # first wait; doubles each retry
    max_backoff_s: float = 30.0
    max_concurrency: int = 8  # requests in flight at once
    temperature: float = 0.0
    max_tokens: int | None = None  # null: the server's default


class LLMError(Exception):
    """A chat request that failed; names the status (None when no reply came) and the URL, never the key."""

    def __init__(self, message: str, *, url: str, status: int | None = None):
        super().__init__(redact(message))
        self.url = url
        self.status = status


@dataclasses.dataclass(frozen=True)
class ChatResult:
    """The first choice's text, its finish reason, the token usage reported by the server and the model name;
    `reasoning`: the thinking a server returns apart from the text (vLLM's and DeepSeek's `reasoning_content`,
    OpenRouter's and newer vLLM's `reasoning`), "" when it returns none."""

    text: str
    finish_reason: str | None
    usage: Mapping[str, int]
    model: str
    reasoning: str = ""


class LLMClient:
    """Thread-safe client: at most `config.max_concurrency` requests in flight, bounded retries with backoff."""

    def __init__(self, config: LLMConfig):
        self.config = config
        read_key(config.api_key_env)  # now: a bad key fails at start-up, and `redact` knows it
        self._http = http.client()
        self._slots = threading.BoundedSemaphore(max(1, config.max_concurrency))
        self._http_config = http.HttpConfig(
            timeout_s=config.timeout_s,
            max_retries=config.max_retries,
            backoff_s=config.backoff_s,
            max_backoff_s=config.max_backoff_s,
            max_bytes=16_000_000,
            max_redirects=0,  # a redirect is an error: the key goes to the configured server and nowhere else
        )

    def __repr__(self) -> str:
        return f"LLMClient(base_url={self.config.base_url!r}, model={self.config.model!r})"

    @property
    def url(self) -> str:
        """The chat-completions endpoint."""
        return self.config.base_url.rstrip("/") + "/chat/completions"

    def chat(self, messages: Sequence[Mapping[str, str]], **params: Any) -> ChatResult:
        """One chat completion; `params` (temperature, max_tokens, stop, …) override the config; LLMError on failure."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(messages),
            "temperature": self.config.temperature,
        }
        if self.config.max_tokens is not None:
            body["max_tokens"] = self.config.max_tokens
        body.update(params)
        headers = {"Content-Type": "application/json"}
        key = read_key(self.config.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        with self._slots:
            try:
                reply = http.request(self._http, "POST", self.url, self._http_config, headers=headers, json_body=body)
                payload = reply.json(self.url)
            except http.HttpError as exc:
                hint = f" (is ${self.config.api_key_env} set?)" if exc.status in (401, 403) else ""
                raise LLMError(f"chat completion failed: {exc}{hint}", url=self.url, status=exc.status) from None
        return _parse_chat(payload, self.url, self.config.model)

    def complete(self, messages: Sequence[Mapping[str, str]], **params: Any) -> str:
        """The text of one chat completion (see `chat`)."""
        return self.chat(messages, **params).text

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _parse_chat(payload: Any, url: str, model: str) -> ChatResult:
    try:
        choice = payload["choices"][0]
        text = choice["message"]["content"]
        if not isinstance(text, str | None):
            raise TypeError(f"content is {type(text).__name__}")
    except (KeyError, IndexError, TypeError):
        raise LLMError(
            f"malformed chat completion from {url}: no choices[0].message.content text in {cut(str(payload), 200)!r}",
            url=url,
            status=200,
        ) from None
    usage = payload.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    message = choice["message"]
    reasoning = next(
        (r for r in (message.get("reasoning_content"), message.get("reasoning")) if isinstance(r, str)), ""
    )
    return ChatResult(
        text=text or "",
        finish_reason=choice.get("finish_reason"),
        usage={k: int(v) for k, v in usage.items() if isinstance(v, int)},
        model=str(payload.get("model", model)),
        reasoning=reasoning,
    )
