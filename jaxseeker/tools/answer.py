"""The `answer_submit` tool: hand an answer to the episode's feedback function (multi-submit SRRL episodes, WebSeer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxseeker.tools.base import Tool, ToolError

ANSWER_PARAMETERS = {
    "type": "object",
    "properties": {"answer": {"type": "string", "description": "Your answer to the question."}},
    "required": ["answer"],
}


def answer_submit_tool(feedback: Callable[[str], str]) -> Tool:
    """The `answer_submit` tool: `answer` → the text `feedback(answer)` returns (e.g. "F1 = 0.67; 2 tries left")."""

    def fn(args: dict[str, Any]) -> str:
        answer = args["answer"].strip()
        if not answer:
            raise ToolError("the answer is empty")
        return feedback(answer)

    description = "Submit an answer to the question and read the feedback on it. You may submit again to improve it."
    return Tool("answer_submit", description, ANSWER_PARAMETERS, fn)
