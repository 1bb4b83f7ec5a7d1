"""What the agent tests share: the pages, the assistant turns scripted policies replay, a slow tool."""

import time

from jaxseeker.tools import Tool
from jaxseeker.world.corpus import Page

PAGES = [
    Page(
        "https://world.test/velmora",
        "Velmora",
        "Velmora is a river town on the Ostra. The town was founded in 1412 by the weaver Ida Konst. "
        "Its bridge has nine arches and was rebuilt in 1876.",
        ("https://world.test/ostra", "https://world.test/ida-konst"),
    ),
    Page(
        "https://world.test/ostra",
        "Ostra (river)",
        "The Ostra is a river 212 km long. It flows through Velmora.",
        ("https://world.test/velmora",),
    ),
    Page("https://world.test/ida-konst", "Ida Konst", "Ida Konst was a weaver born in 1380. She founded Velmora."),
    Page("https://world.test/glass", "Glassworks of Pirn", "Pirn is known for blue glass made since 1602."),
    Page("https://world.test/pirn", "Pirn", "Pirn is a hill village with a glassworks and a chapel."),
]
DATE = "2025-01-01"
CALL = '{"name": "search", "arguments": {"query": ["Velmora bridge arches"]}}'
SLOTS, MAX_LEN = 2, 2048  # one engine shape (and one attention window) for every real-engine test: compiled once

QUESTION = "How many arches has the bridge of Velmora?"

SEARCH = (
    "<think>I should find the town's page first.</think>\n"
    '<tool_call>\n{"name": "search", "arguments": {"query": ["Velmora bridge arches"]}}\n</tool_call>'
)
VISIT = (
    "<think>The first result is the town page; read it.</think>\n"
    '<tool_call>\n{"name": "visit", "arguments": {"url": "https://world.test/velmora", "goal": "arches of the bridge"}}'
    "\n</tool_call>"
)
ANSWER = "<think>The page says the bridge has nine arches.</think>\n<answer>nine</answer>"
SLOW = '<think>Wait.</think>\n<tool_call>\n{"name": "slow", "arguments": {}}\n</tool_call>'


def submit(answer: str) -> str:
    """A turn that submits `answer` with the answer_submit tool."""
    call = f'{{"name": "answer_submit", "arguments": {{"answer": "{answer}"}}}}'
    return f"<think>Try {answer}.</think>\n<tool_call>\n{call}\n</tool_call>"


def slow_tool(seconds: float) -> Tool:
    """A tool named `slow` that sleeps `seconds` (a web call stand-in)."""

    def fn(args):
        time.sleep(seconds)
        return f"waited {seconds}s"

    return Tool("slow", "Wait a little.", {"type": "object", "properties": {}}, fn)
