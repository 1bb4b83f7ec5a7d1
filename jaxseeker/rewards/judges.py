"""Answer judges: SQuAD-style exact match and token F1, and an LLM-as-judge with a parsed verdict.

The LLM judge never guesses: a reply it cannot parse gives `correct=None` with a `parse_error`,
and `summarize_judgements` counts those so they are reported, not dropped.
"""

import collections
import dataclasses
import json
import re
import string
import unicodedata
from collections.abc import Callable, Iterable, Sequence

JUDGE_STYLES = ("browsecomp", "gaia")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation (ASCII and Unicode) and articles, squeeze spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in string.punctuation and not unicodedata.category(ch).startswith("P"))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golds: str | Sequence[str]) -> list[str]:
    """The gold answers as a non-empty list of strings."""
    gold_list = [golds] if isinstance(golds, str) else list(golds)
    if not gold_list or not all(isinstance(g, str) for g in gold_list):
        raise ValueError(f"golds must be a string or a non-empty list of strings, got {golds!r}")
    return gold_list


def gold_answers(answer: str | None) -> list[str]:
    """The reference answers of a question's `answer` text: a JSON list of aliases, or the one string."""
    if answer is None:
        raise ValueError("the question has no reference 'answer' to judge against")
    try:
        parsed = json.loads(answer)
    except json.JSONDecodeError:
        return [answer]
    if isinstance(parsed, list) and parsed and all(isinstance(a, str | int | float) for a in parsed):
        return [str(a) for a in parsed]
    return [answer]


def exact_match(pred: str, golds: str | Sequence[str]) -> bool:
    """True when the normalised prediction equals any normalised gold answer."""
    normalized = normalize_answer(pred)
    return any(normalized == normalize_answer(gold) for gold in _golds(golds))


def _tokens(text: str) -> list[str]:
    """Tokens of a normalised answer: whitespace-separated words, each CJK character on its own."""
    return _TOKEN.findall(normalize_answer(text))


def token_f1(pred: str, golds: str | Sequence[str]) -> float:
    """Best SQuAD token F1 of the prediction over the gold answers (1.0 when both sides are empty)."""
    pred_tokens = _tokens(pred)
    best = 0.0
    for gold in _golds(golds):
        gold_tokens = _tokens(gold)
        if not pred_tokens or not gold_tokens:
            best = max(best, float(pred_tokens == gold_tokens))
            continue
        common = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
        if common:
            precision, recall = common / len(pred_tokens), common / len(gold_tokens)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


BROWSECOMP_PROMPT = """Judge whether the following [response] to [question] is correct or not based on the precise and \
unambiguous [correct_answer] below.

[question]: {question}

[response]: {response}

Your judgement must be in the format and criteria specified below:

extracted_final_answer: The final exact answer extracted from the [response]. Put the extracted answer as 'None' if \
there is no exact, final answer to extract from the response.

[correct_answer]: {correct_answer}

reasoning: Explain why the extracted_final_answer is correct or incorrect based on [correct_answer], focusing only on \
if there are meaningful differences between [correct_answer] and the extracted_final_answer. Do not comment on any \
background to the problem, do not attempt to solve the problem, do not argue for any answer different than \
[correct_answer], focus only on whether the answers match.

correct: Answer 'yes' if extracted_final_answer matches the [correct_answer] given above, or is within a small margin \
of error for numerical problems. Answer 'no' otherwise, i.e. if there is any inconsistency, ambiguity, \
non-equivalency, or if the extracted answer is incorrect.

confidence: The extracted confidence score between 0% and 100% from [response]. Put 100 if there is no confidence \
score available."""

GAIA_PROMPT = """You are an evaluation assistant. Decide whether the predicted answer is equivalent to the labeled \
answer for the question.

Question: {question}

Labeled Answer: {correct_answer}

Predicted Answer: {response}

Is the predicted answer **equivalent** to the labeled answer? Reply with exactly one word: "Correct" if they are \
equivalent, or "Incorrect" if they are not. Do not include any other text."""

_BROWSECOMP_VERDICT = re.compile(r"^[\W_]*correct[\W_]*:[\s*_]*(yes|no)\b", re.IGNORECASE | re.MULTILINE)
_BROWSECOMP_EXTRACTED = re.compile(r"^[\W_]*extracted_final_answer[\W_]*:[\s*_]*(.*)$", re.IGNORECASE | re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class JudgeResult:
    """One LLM judgement: `correct` is None exactly when the grader's reply could not be parsed."""

    correct: bool | None
    raw: str
    parse_error: str | None = None
    extracted_answer: str | None = None


def _parse_browsecomp(raw: str) -> JudgeResult:
    """Read the `correct: yes|no` line (and `extracted_final_answer:`) of a BrowseComp-style grader reply."""
    verdicts = {match.lower() for match in _BROWSECOMP_VERDICT.findall(raw)}
    extracted = _BROWSECOMP_EXTRACTED.search(raw)
    extracted_answer = extracted.group(1).strip() if extracted else None
    if len(verdicts) != 1:
        problem = "no 'correct: yes|no' line" if not verdicts else "conflicting 'correct:' lines"
        return JudgeResult(None, raw, f"{problem} in grader reply", extracted_answer)
    return JudgeResult(verdicts.pop() == "yes", raw, None, extracted_answer)


def _parse_gaia(raw: str) -> JudgeResult:
    """Read a GAIA-style grader reply that is (or ends with a line that is) `Correct` or `Incorrect`."""
    lines = [line for line in raw.strip().splitlines() if line.strip()]
    for candidate in (raw, lines[-1] if lines else ""):
        word = candidate.strip().strip("*_\"'`.!").strip().lower()
        if word in ("correct", "incorrect"):
            return JudgeResult(word == "correct", raw)
    return JudgeResult(None, raw, "grader reply is neither 'Correct' nor 'Incorrect'")


def judge_messages(question: str, pred: str, gold: str, *, style: str = "browsecomp") -> list[dict]:
    """The chat messages sent to the grader model for one judgement."""
    if style not in JUDGE_STYLES:
        raise ValueError(f"unknown judge style {style!r}; allowed values: {', '.join(JUDGE_STYLES)}")
    template = BROWSECOMP_PROMPT if style == "browsecomp" else GAIA_PROMPT
    return [{"role": "user", "content": template.format(question=question, response=pred, correct_answer=gold)}]


def llm_judge(
    question: str,
    pred: str,
    gold: str,
    complete: Callable[[list[dict]], str],
    *,
    style: str = "browsecomp",
) -> JudgeResult:
    """Ask a grader model whether `pred` answers `question` as `gold` does.

    `complete(messages) -> reply text` is any chat client (an OpenAI-compatible server, a local
    model); its errors propagate. style "browsecomp" expects `correct: yes|no` (BrowseComp grader,
    arXiv 2504.12516); "gaia" expects `Correct` / `Incorrect` (the GAIA judge of WebDancer / WebSailor).
    """
    raw = complete(judge_messages(question, pred, gold, style=style))
    if not isinstance(raw, str):
        raise TypeError(f"complete() returned {type(raw).__name__}, expected the reply text as str")
    return _parse_browsecomp(raw) if style == "browsecomp" else _parse_gaia(raw)


@dataclasses.dataclass(frozen=True)
class JudgeStats:
    """Counts over many judgements; parse failures are counted as wrong in `accuracy` and shown apart."""

    n: int
    n_correct: int
    n_incorrect: int
    n_parse_errors: int
    parse_error_examples: tuple[str, ...]

    @property
    def accuracy(self) -> float:
        """Fraction judged correct (0.0 for no judgements)."""
        return self.n_correct / self.n if self.n else 0.0

    @property
    def parse_error_rate(self) -> float:
        """Fraction of judgements whose reply could not be parsed."""
        return self.n_parse_errors / self.n if self.n else 0.0


def summarize_judgements(results: Iterable[JudgeResult], *, max_examples: int = 5) -> JudgeStats:
    """Count correct / incorrect / unparsable judgements, keeping the first few parse errors verbatim."""
    results = list(results)
    errors = [f"{r.parse_error}: {r.raw[:200]!r}" for r in results if r.correct is None]
    return JudgeStats(
        n=len(results),
        n_correct=sum(r.correct is True for r in results),
        n_incorrect=sum(r.correct is False for r in results),
        n_parse_errors=len(errors),
        parse_error_examples=tuple(errors[:max_examples]),
    )
