"""WebSailor short-CoT reconstruction (arXiv 2507.02592 §3.2): keep the actions, rewrite the thoughts.

The action–observation sequence of a successful trace is kept byte for byte; each assistant turn's
`<think>` is rewritten by an instruction model given the history so far, the action the turn took
and the observation that followed, to be short and action-oriented. Offline, the embedded expert's
own template thoughts are already of that kind and are kept (`rewriter=None`); `template_rewriter`
writes a minimal thought from the action alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxseeker.agent.episode import Episode
from jaxseeker.agent.parser import ToolCall, parse_answer, parse_tool_calls, split_think
from jaxseeker.data.chat import tokenize_chat
from jaxseeker.tools import LLMClient

Rewriter = Callable[[list[dict[str, str]], str, str | None], str]  # (history, action, next observation) -> thought


def _action(content: str) -> str:
    """The part of a turn after its thought (tool calls or the answer), stripped."""
    return split_think(content)[1].strip()


def rewrite_thoughts(messages: Sequence[dict[str, str]], rewriter: Rewriter) -> list[dict[str, str]]:
    """The conversation with every assistant thought replaced by `rewriter(history, action, next observation)`."""
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            out.append(dict(m))
            continue
        action = _action(m["content"])
        following = messages[i + 1]["content"] if i + 1 < len(messages) else None
        thought = " ".join(rewriter([dict(x) for x in messages[:i]], action, following).split())
        out.append({"role": "assistant", "content": f"<think>{thought}</think>\n{action}"})
    return out


SHORT_COT_PROMPT = """You rewrite the reasoning of a web-search agent so that it is short and action-oriented.

Conversation so far:
{history}

The agent's next action:
{action}

What that action returned:
{observation}

Write the agent's thought before this action in one to three short sentences: what it has learned so far \
and why this action is the right next step. Do not mention what the action will return. Reply with the \
thought only."""


def llm_rewriter(client: LLMClient, *, max_tokens: int = 160, history_chars: int = 12_000) -> Rewriter:
    """A Rewriter asking an instruction model (the last `history_chars` of the history are shown)."""

    def rewrite(history: list[dict[str, str]], action: str, observation: str | None) -> str:
        text = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in history[1:])[-history_chars:]
        prompt = SHORT_COT_PROMPT.format(history=text, action=action, observation=observation or "(the episode ends)")
        return client.complete([{"role": "user", "content": prompt}], max_tokens=max_tokens).strip()

    return rewrite


def template_rewriter(history: list[dict[str, str]], action: str, observation: str | None) -> str:
    """A minimal thought from the action alone: `Search for X.`, `Open the page for Y.`, `The answer is Z.`."""
    answer = parse_answer(f"</think>{action}")
    if answer is not None:
        return f"The evidence gives {answer}."
    parts = []
    for call in parse_tool_calls(f"</think>{action}"):
        if not isinstance(call, ToolCall):
            continue
        args = call.arguments
        if call.name == "search":
            parts.append(f"Search for {', '.join(map(str, _listed(args.get('query'))))}.")
        elif call.name == "visit":
            parts.append(f"Open the page to find {args.get('goal', 'the facts')}.")
        elif call.name == "answer_submit":
            parts.append(f"Submit {args.get('answer')} for checking.")
        else:
            parts.append(f"Call {call.name}.")
    return " ".join(parts) or "Continue."


def _listed(value: object) -> list:
    return value if isinstance(value, list) else [value]


def short_cot(
    rewriter: Rewriter | None, tokenizer: Any = None
) -> Callable[[Episode], tuple[list[dict[str, str]], dict]]:
    """A `trajectories.synthesize` transform: the kept episode's messages with rewritten thoughts (and their
    token count when a tokenizer is given); `rewriter=None` keeps the teacher's thoughts."""

    def transform(episode: Episode) -> tuple[list[dict[str, str]], dict]:
        if rewriter is None:
            return list(episode.messages), {"short_cot": "template"}
        messages = rewrite_thoughts(episode.messages, rewriter)
        extra: dict[str, Any] = {"short_cot": "rewritten"}
        if tokenizer is not None:
            extra["tokens"] = len(tokenize_chat(messages, tokenizer)[0])
        return messages, extra

    return transform
