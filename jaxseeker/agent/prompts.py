"""What the agent reads besides the question: the system prompt, observations, and the final-answer request.

The tags are those of WebSailor / WebDancer: the policy thinks in `<think>…</think>`, calls tools with
`<tool_call>{"name": …, "arguments": {…}}</tool_call>` (several per turn allowed), reads each result
in `<tool_response>…</tool_response>` (one user message per assistant turn, the bytes the SFT data
normalisation writes) and ends with `<answer>…</answer>`. `Renderer` turns these messages into the
token ids the engine reads, with `jaxseeker.data`'s chat rendering: the same ids as the SFT data.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

from jaxseeker.data.chat import IM_END, render_chat, render_generation_prompt

TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"

SYSTEM_INTRO = (
    "You are a deep-search agent. Answer the user's question by searching for and reading evidence; do not "
    "guess when you can look it up.\n\n"
    "In every turn, first think inside <think></think>. Then either call one or more tools, or, once you are "
    "sure, give the final answer inside <answer></answer> (short: the answer only)."
)

TOOLS_SECTION = (
    "# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n{schemas}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>\n\n'
    "The results come back inside <tool_response></tool_response> tags."
)

PROMPT_STYLES = ("full", "compact")  # `system_prompt`: the tool schemas, or one line of signatures

# The same tags and call format in a few lines: for small policies, where the full prompt would be most of every row.
COMPACT_INTRO = (
    "You are a deep-search agent. Think inside <think></think>, then call a tool as "
    '<tool_call>{"name": …, "arguments": {…}}</tool_call> or give the final answer inside <answer></answer>.'
)

SUBMIT_NOTE = (
    "Submit candidate answers with the answer_submit tool: its feedback tells you how good an answer is, and you "
    "may keep searching and submit again until it is correct."
)

FINAL_ANSWER_REQUEST = (
    "You have now reached the maximum context length you can handle. Stop making tool calls and, based on all "
    "the information above, think once more and give the most likely answer in this format:\n"
    "<think>your final thinking</think>\n<answer>your answer</answer>"
)

NO_ACTION_ERROR = (
    "[format error] Your reply has neither a <tool_call> nor an <answer>. Call a tool as "
    '<tool_call>{"name": …, "arguments": {…}}</tool_call> or give the final answer as <answer>…</answer>.'
)


def today() -> str:
    """Today's date as YYYY-MM-DD (the default date of the system prompt)."""
    return datetime.date.today().isoformat()


def _signatures(schemas: Sequence[Mapping[str, Any]]) -> str:
    """`name(arg, …)` of each tool schema, comma-separated."""
    functions = [s.get("function", {}) for s in schemas]
    return ", ".join(f"{f.get('name')}({', '.join(f.get('parameters', {}).get('properties', {}))})" for f in functions)


def system_prompt(schemas: Sequence[Mapping[str, Any]], *, date: str | None = None, compact: bool = False) -> str:
    """The system prompt: role and tags, the tool schemas (one JSON object per line) and the current date.

    `compact`: the tags and one line of tool signatures instead of the schemas (same call format)."""
    if compact:
        parts = [COMPACT_INTRO + (f"\nTools: {_signatures(schemas)}" if schemas else "")]
    else:
        parts = [SYSTEM_INTRO]
        if schemas:
            lines = "\n".join(json.dumps(dict(s), ensure_ascii=False) for s in schemas)
            parts.append(TOOLS_SECTION.format(schemas=lines))
    names = {s.get("function", {}).get("name") for s in schemas}
    if "answer_submit" in names:
        parts.append(SUBMIT_NOTE)
    parts.append(f"Current date: {date or today()}")
    return "\n\n".join(parts)


def initial_messages(
    question: str, schemas: Sequence[Mapping[str, Any]], *, date: str | None = None, compact: bool = False
) -> list[dict]:
    """[system prompt, user question]: the start of every episode (`compact`: see `system_prompt`)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    return [
        {"role": "system", "content": system_prompt(schemas, date=date, compact=compact)},
        {"role": "user", "content": question},
    ]


def format_observation(texts: Sequence[str]) -> str:
    """One observation message for an assistant turn: each result in `<tool_response>\\n…\\n</tool_response>`."""
    if not texts:
        raise ValueError("format_observation needs at least one result text")
    return "\n".join(f"{TOOL_RESPONSE_OPEN}\n{t}\n{TOOL_RESPONSE_CLOSE}" for t in texts)


def format_error_text(message: str) -> str:
    """The result text a malformed tool call gets (read by the policy as an observation)."""
    return f"[format error] {message}"


class Renderer:
    """Token ids of an episode's context, rendered exactly as `jaxseeker.data.tokenize_chat` renders messages.

    The context always ends right after an assistant turn's `<|im_end|>` (a special token) when an
    observation is appended, so the ids of the appended text are those of the whole rendering's tail.
    """

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.end_of_turn_ids = self.encode(IM_END)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (special tokens matched, none added)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None:
            return list(backend.encode(text, add_special_tokens=False).ids)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids`, special tokens included, spaces untouched."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def prompt_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """The generation prompt: the conversation then `<|im_start|>assistant\\n`."""
        return render_generation_prompt(messages, self.tokenizer).tolist()

    def conversation_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """Ids of the whole conversation rendered as training data (no generation prompt)."""
        return self.encode(render_chat(messages, self.tokenizer))

    def turn_content(self, tokens: Sequence[int]) -> tuple[str, bool]:
        """(assistant message content, whether the turn ended with `<|im_end|>`) of a turn's sampled tokens."""
        text = self.decode(tokens)
        if text.endswith(IM_END):
            return text[: -len(IM_END)], True
        return text, False

    def _turn_end(self, messages: Sequence[Mapping[str, str]]) -> tuple[str, str]:
        """The training rendering split right after the last assistant turn's `<|im_end|>`."""
        text = render_chat(messages, self.tokenizer)
        cut = text.rfind(IM_END)
        if cut < 0 or messages[-1]["role"] != "assistant":
            raise ValueError("the conversation must end with an assistant turn")
        return text[: cut + len(IM_END)], text[cut + len(IM_END) :]

    def extension_ids(self, messages: Sequence[Mapping[str, str]], message: Mapping[str, str]) -> list[int]:
        """Ids that follow the last assistant turn's `<|im_end|>`: `message`, then the next generation prompt."""
        head, _ = self._turn_end(messages)
        text = render_chat([*messages, message], self.tokenizer, add_generation_prompt=True)
        if not text.startswith(head):
            raise ValueError("the chat template is not prefix-stable: appending a message changes earlier turns")
        return self.encode(text[len(head) :])

    def tail_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """Ids the training rendering has after the last assistant turn's `<|im_end|>` (its newline)."""
        return self.encode(self._turn_end(messages)[1])


STOP_STRINGS = (TOOL_RESPONSE_OPEN,)  # a policy writing its own observation is cut there


def engine_stops(tokenizer: Any) -> tuple[list[int], tuple[str, ...]]:
    """(eos ids, stop strings) for an engine serving the loop: turns end at `<|im_end|>` / end-of-text.

    Turns are not stopped at `</tool_call>` so that a turn may hold several calls and its `<|im_end|>`
    is sampled (trained on); `<tool_response>` stops a policy that starts inventing observations.
    """
    ids = {tokenizer.convert_tokens_to_ids(t) for t in (IM_END, "<|endoftext|>")}
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    ids.discard(tokenizer.unk_token_id)
    ids.discard(None)
    return sorted(ids), STOP_STRINGS
