"""The LLM writer (`jaxseeker synth RECIPE --writer openai`): a model behind any OpenAI-compatible server phrases
each question, in the recipe's style, from its structured query; the query stays the source of truth.

For every record the rule-based realiser kept, the writer sends the query as numbered facts (`facts`) with the
rule text as a reference phrasing (`## write` of the prompt file, `writer_prompt.md` by default), then checks the
reply before it replaces the rule text. Drop reasons, counted in `SynthResult.dropped`:
- llm_error: a request failed after the client's retries; unparsable: no JSON `question` in the reply;
- leak: the question gives the answer away (`checks.LeakCheck`); placeholder: it names an entity by a letter;
- name_missing: a name the query uses is not in the question word for word;
- clue_missing: the back-check, a second call (`## check`), lists a fact the question no longer expresses;
  check_unparsable: that reply holds no list;
- solver_changed: the solver (by default the reference solver, which also reads the pages its search for the
  question's words finds) answers the written question otherwise than the rule text: the rewrite gave away or
  hid something the query does not say;
- duplicate: the same question as one written before.
A kept record carries `meta.rule_question` (the rule text) and `meta.writer` (the model).
"""

from __future__ import annotations

import dataclasses
import re
import string
from pathlib import Path
from typing import Any

import json_repair

from jaxseeker.errors import InputError
from jaxseeker.synthesis.qa.checks import LeakCheck, normalize
from jaxseeker.synthesis.qa.phrasing import noun, plural
from jaxseeker.synthesis.qa.record import QARecord
from jaxseeker.synthesis.qa.render import pred_phrase
from jaxseeker.synthesis.qa.solvers import Solver, SolverTask
from jaxseeker.synthesis.qa.style import has_placeholder
from jaxseeker.world import Is, Query, World
from jaxseeker.world.phrases import indefinite
from jaxseeker.world.schema import ATTRIBUTES, RELATIONS

DEFAULT_PROMPT = Path(__file__).with_name("writer_prompt.md")
_SECTIONS = {
    "write": ("$facts", "$names", "$draft", "$answer", "$style"),
    "check": ("$question", "$facts"),
    "styles": (),
}


@dataclasses.dataclass(frozen=True)
class WriterPrompt:
    """The texts of a prompt file: the write and check templates, and a style line per recipe."""

    write: str
    check: str
    styles: dict[str, str]

    def style(self, recipe: str) -> str:
        """The recipe's style line (the `default` one when it has none)."""
        return self.styles.get(recipe, self.styles.get("default", ""))


def read_prompt(path: str | Path = DEFAULT_PROMPT) -> WriterPrompt:
    """The prompt file's `## write`, `## check` and `## styles` sections; InputError naming the file and what is
    missing."""
    text = Path(path).read_text(encoding="utf-8")
    parts = re.split(r"^## +(\w+)[ \t]*$", text, flags=re.MULTILINE)
    sections = {name.lower(): body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}
    for name, needed in _SECTIONS.items():
        if name not in sections:
            raise InputError(f"{path}: no `## {name}` section (sections: write, check, styles)")
        lacking = [p for p in needed if p not in sections[name]]
        if lacking:
            raise InputError(f"{path}: `## {name}` lacks {', '.join(lacking)}")
    styles = {}
    for item in re.split(r"^- ", sections["styles"], flags=re.MULTILINE)[1:]:
        recipe, _, line = item.partition(":")
        styles[recipe.strip()] = " ".join(line.split())
    return WriterPrompt(sections["write"], sections["check"], styles)


def facts(world: World, q: Query) -> tuple[list[str], list[str]]:
    """(the query as facts in the schema's words, the names it uses): `[answer] is a city`, `[B] was born in the
    1960s`, `[answer] is located in Algeria`, and what is asked."""
    letters = iter("BCDEFGHIJKLMNOPQRSTUVWXYZ")
    label = {}
    for i, v in enumerate(q.vars):
        anchor = v.anchor()
        label[i] = (
            world.entity(anchor).name if anchor is not None else "[answer]" if i == q.target else f"[{next(letters)}]"
        )
    lines, names = [], []
    for i, v in enumerate(q.vars):
        if v.anchor() is not None:
            names.append(label[i])
            continue
        lines.append(f"{label[i]} is {indefinite(noun(v))}")
        lines += [f"{label[i]} {phrase}" for p in v.preds if not isinstance(p, Is) and (phrase := pred_phrase(v, p))]
    for e in q.edges:
        lines.append(f"{label[e.src]} {RELATIONS[e.rel].forward.format(label[e.dst])}")
    if q.count:
        lines.append(f"the question asks how many {plural(q.vars[q.target])} fit the facts about [answer]")
    elif q.answer_attr is not None:
        lines.append("the question asks: " + ATTRIBUTES[q.answer_attr].ask.format(label[q.target]))
    else:
        lines.append("the question asks which entity [answer] is")
    return lines, names


def parse_object(text: str) -> dict[str, Any] | None:
    """The JSON object in a model's reply (after any `<think>…</think>`; near-JSON repaired), or None."""
    body = text.rsplit("</think>", 1)[-1]
    try:
        found = json_repair.loads(body)
    except Exception:  # noqa: BLE001 - whatever json_repair cannot read is no object
        return None
    return found if isinstance(found, dict) else None


class LLMWriter:
    """Writes and checks questions with the model behind `client` (an `LLMClient`); call it on a kept record."""

    def __init__(
        self,
        client: Any,
        world: World,
        recipe: str,
        *,
        prompt: WriterPrompt | None = None,
        solver: Solver | None = None,
    ):
        from jaxseeker.synthesis.qa.solvers import reference_solver

        self.client, self.world, self.recipe = client, world, recipe
        self.prompt = prompt or read_prompt()
        self.solver = solver or reference_solver(world)
        self.leak = LeakCheck(world)
        self.seen: set[str] = set()

    def _ask(self, text: str) -> dict[str, Any] | None:
        return parse_object(self.client.chat([{"role": "user", "content": text}]).text or "")

    def write(self, record: QARecord) -> tuple[str | None, str]:
        """(the written question, "kept") or (None, why it is dropped); see the module docstring."""
        from jaxseeker.tools import LLMError

        q = Query.from_json(record.meta["query"])
        lines, names = facts(self.world, q)
        numbered = "\n".join(f"{k}. {line}" for k, line in enumerate(lines, 1))
        ask = string.Template(self.prompt.write).safe_substitute(
            style=self.prompt.style(self.recipe),
            facts=numbered,
            names="; ".join(names) or "(none)",
            draft=record.question,
            answer=record.answer,
        )
        try:
            found = self._ask(ask)
            question = found.get("question") if found else None
            if not isinstance(question, str) or not question.strip():
                return None, "unparsable"
            question = " ".join(question.split())
            if self.leak(record.answer, question):
                return None, "leak"
            if has_placeholder(question):
                return None, "placeholder"
            if any(f" {normalize(n)} " not in f" {normalize(question)} " for n in names):
                return None, "name_missing"
            check = self._ask(string.Template(self.prompt.check).safe_substitute(question=question, facts=numbered))
        except LLMError:
            return None, "llm_error"
        missing = check.get("missing") if check else None
        if not isinstance(missing, list):
            return None, "check_unparsable"
        if missing:
            return None, "clue_missing"
        before = self.solver(SolverTask(record.question, q, None))
        if normalize(self.solver(SolverTask(question, q, None))) != normalize(before):
            return None, "solver_changed"
        if normalize(question) in self.seen:
            return None, "duplicate"
        self.seen.add(normalize(question))
        return question, "kept"

    def __call__(self, record: QARecord) -> tuple[QARecord | None, str]:
        """The record with the written question (the rule text in `meta.rule_question`), or None and the reason."""
        question, why = self.write(record)
        if question is None:
            return None, why
        meta = {**record.meta, "rule_question": record.question, "writer": self.client.config.model}
        return dataclasses.replace(record, question=question, meta=meta), "kept"
