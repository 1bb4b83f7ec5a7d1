import pytest

from jaxseeker.rewards import (
    JudgeResult,
    exact_match,
    judge_messages,
    llm_judge,
    normalize_answer,
    summarize_judgements,
    token_f1,
)


def test_normalize_answer_is_squad_style():
    assert normalize_answer("  The Eiffel-Tower, Paris! ") == "eiffeltower paris"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("“Quoted”—text…") == "quotedtext"  # Unicode punctuation goes too
    assert normalize_answer("theatre") == "theatre"  # only whole-word articles


def test_exact_match_over_one_or_many_golds():
    assert exact_match("the Beatles", "Beatles")
    assert exact_match("beatles.", ["The Rolling Stones", "The Beatles"])
    assert not exact_match("Beatles band", "The Beatles")


def test_token_f1_hand_computed():
    # pred tokens {new, york, city}, gold tokens {new, york}: P = 2/3, R = 1, F1 = 0.8
    assert token_f1("New York City", "new york") == pytest.approx(0.8)
    assert token_f1("New York City", ["Boston", "New York City"]) == 1.0
    assert token_f1("Paris", "London") == 0.0
    assert token_f1("the", "a") == 1.0  # both normalise to nothing
    assert token_f1("", "London") == 0.0
    # repeated tokens count once per occurrence: pred [a1, a1, b] vs gold [a1, b]: P = 2/3, R = 1
    assert token_f1("a1 a1 b", "a1 b") == pytest.approx(0.8)


def test_token_f1_splits_cjk_characters():
    # pred 北京市 -> 3 tokens, gold 北京 -> 2 tokens, 2 in common: P = 2/3, R = 1, F1 = 0.8
    assert token_f1("北京市", "北京") == pytest.approx(0.8)


def test_bad_golds_are_an_error():
    with pytest.raises(ValueError, match="non-empty list of strings"):
        exact_match("x", [])


class Grader:
    """A chat client stand-in that records the messages and returns a fixed reply."""

    def __init__(self, reply):
        self.reply = reply
        self.messages = None

    def __call__(self, messages):
        self.messages = messages
        return self.reply


BROWSECOMP_YES = """extracted_final_answer: Paris

reasoning: The response names Paris, which is the correct answer.

correct: yes

confidence: 90"""


def test_browsecomp_judge_reads_the_verdict_and_extracted_answer():
    grader = Grader(BROWSECOMP_YES)
    result = llm_judge("Capital of France?", "I think it is Paris.", "Paris", grader)
    assert result == JudgeResult(correct=True, raw=BROWSECOMP_YES, parse_error=None, extracted_answer="Paris")
    prompt = grader.messages[0]["content"]
    assert "[question]: Capital of France?" in prompt
    assert "[response]: I think it is Paris." in prompt
    assert "[correct_answer]: Paris" in prompt
    markdown_no = llm_judge("q", "p", "g", Grader("**extracted_final_answer:** Lyon\n**correct:** no"))
    assert markdown_no.correct is False and markdown_no.extracted_answer == "Lyon"


@pytest.mark.parametrize(
    "reply, error",
    [
        ("The answer looks right to me.", "no 'correct: yes|no' line"),
        ("correct: yes\ncorrect: no", "conflicting 'correct:' lines"),
        ("correct: maybe", "no 'correct: yes|no' line"),
    ],
)
def test_browsecomp_parse_failures_are_reported(reply, error):
    result = llm_judge("q", "p", "g", Grader(reply))
    assert result.correct is None
    assert error in result.parse_error
    assert result.raw == reply


@pytest.mark.parametrize(
    "reply, verdict",
    [("Correct", True), ("Incorrect", False), ("**Correct.**", True), ("Comparing both...\nIncorrect", False)],
)
def test_gaia_judge_verdicts(reply, verdict):
    grader = Grader(reply)
    assert llm_judge("q", "p", "g", grader, style="gaia").correct is verdict
    assert "Labeled Answer: g" in grader.messages[0]["content"]


def test_gaia_reply_that_is_not_a_verdict_is_a_parse_error():
    result = llm_judge("q", "p", "g", Grader("The prediction is not correct"), style="gaia")
    assert result.correct is None and "neither 'Correct' nor 'Incorrect'" in result.parse_error


def test_unknown_style_lists_the_styles():
    with pytest.raises(ValueError, match="allowed values: browsecomp, gaia"):
        judge_messages("q", "p", "g", style="simpleqa")


def test_summarize_judgements_counts_parse_failures():
    results = [
        JudgeResult(True, "correct: yes"),
        JudgeResult(False, "correct: no"),
        JudgeResult(None, "garbled", "no 'correct: yes|no' line in grader reply"),
        JudgeResult(True, "correct: yes"),
    ]
    stats = summarize_judgements(results)
    assert (stats.n, stats.n_correct, stats.n_incorrect, stats.n_parse_errors) == (4, 2, 1, 1)
    assert stats.accuracy == 0.5 and stats.parse_error_rate == 0.25
    assert stats.parse_error_examples == ("no 'correct: yes|no' line in grader reply: 'garbled'",)
    assert summarize_judgements([]).accuracy == 0.0
