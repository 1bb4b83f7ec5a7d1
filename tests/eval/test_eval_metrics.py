"""The pass@k family on hand-built judgement tables, and `summarize` on judged rollout records."""

import itertools
import math
from statistics import fmean

import pytest

from jaxseeker import eval as ev

T, F = True, False

# five questions, three rounds each
#   q1 T F F (1)   q2 F T T (2)   q3 F F F (0)   q4 T T T (3)   q5 F F T (1)
TABLE = {"q1": [T, F, F], "q2": [F, T, T], "q3": [F, F, F], "q4": [T, T, T], "q5": [F, F, T]}


def test_pass_at_1_is_mean_over_all_rollouts():
    assert ev.pass_at_1(TABLE) == pytest.approx(7 / 15)
    # rollout-weighted: one right of one, none of three → 1 of 4
    assert ev.pass_at_1({"a": [T], "b": [F, F, F]}) == pytest.approx(0.25)


def test_pass_at_k_counts_questions_with_any_correct():
    assert ev.pass_at_k(TABLE, 3) == pytest.approx(4 / 5)
    assert ev.pass_at_k(TABLE, 1) == pytest.approx(7 / 15)


def test_pass_at_k_below_n_is_the_unbiased_estimator():
    # n=4, k=2: c=1 → 1 − C(3,2)/C(4,2) = 1/2;  c=0 → 0;  c=3 → 1 − C(1,2)/C(4,2) = 1
    table = {"a": [T, F, F, F], "b": [F, F, F, F], "c": [T, T, F, T]}
    assert ev.pass_at_k(table, 2) == pytest.approx((0.5 + 0 + 1) / 3)


def test_pass_at_k_needs_k_rollouts_per_question():
    with pytest.raises(ValueError, match="question 'q1' has 3 rollouts, k=4"):
        ev.pass_at_k(TABLE, 4)


def test_avg_at_k_weights_questions_equally():
    assert ev.avg_at_k(TABLE) == pytest.approx((1 / 3 + 2 / 3 + 0 + 1 + 1 / 3) / 5)
    assert ev.avg_at_k({"a": [T], "b": [F, F, F]}) == pytest.approx(0.5)


def test_cons_at_k_is_a_strict_majority_of_verdicts():
    assert ev.cons_at_k(TABLE) == pytest.approx(2 / 5)  # q2 and q4
    # with k=4 a 2–2 tie is no majority, 3 of 4 is
    assert ev.cons_at_k({"tie": [T, T, F, F], "three": [T, T, T, F]}) == pytest.approx(0.5)


def test_best_pass_at_1_is_the_best_round():
    assert ev.pass_at_1_by_round(TABLE) == pytest.approx([2 / 5, 2 / 5, 3 / 5])
    assert ev.best_pass_at_1(TABLE) == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="different numbers of rollouts"):
        ev.best_pass_at_1({"a": [T], "b": [F, F]})


def test_paired_change_counts_questions_that_moved_and_tests_the_sign():
    after = {"q1": [T, T, F], "q2": [F, T, T], "q3": [F, F, F], "q4": [T, F, T], "q5": [T, T, T]}
    change = ev.paired_change(TABLE, after)
    # q1 1→2 and q5 1→3 gained, q4 3→2 lost, q2 and q3 unchanged; pass@1 7/15 → 9/15
    assert {k: change[k] for k in ("questions", "gained", "lost", "unchanged")} == {
        "questions": 5,
        "gained": 2,
        "lost": 1,
        "unchanged": 2,
    }
    assert change["delta_pass_at_1"] == pytest.approx(2 / 15)
    # n = 3, min = 1: 2 · (C(3,0) + C(3,1)) / 8 = 1
    assert change["p_value"] == pytest.approx(1.0)


def test_paired_change_p_value_is_the_exact_sign_test():
    # ten questions gained, none lost: 2 / 2^10
    before = {f"q{i}": [F] for i in range(10)}
    after = {f"q{i}": [T] for i in range(10)}
    assert ev.paired_change(before, after)["p_value"] == pytest.approx(2 / 1024)
    # eight gained, two lost: 2 · (C(10,0) + C(10,1) + C(10,2)) / 2^10
    after = {**after, "q8": [F], "q9": [F]}
    before = {**before, "q8": [T], "q9": [T]}
    assert ev.paired_change(before, after)["p_value"] == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert ev.paired_change(TABLE, TABLE) == {
        "questions": 5,
        "gained": 0,
        "lost": 0,
        "unchanged": 5,
        "delta_pass_at_1": 0.0,
        "p_value": 1.0,
        "p_permutation": 1.0,
        "ci95": [0.0, 0.0],
    }


def test_paired_change_permutation_test_weighs_how_far_each_question_moved():
    # eight rollouts a question: three move a lot up (0/8 → 8/8), four a little down (4/8 → 3/8)
    before = {f"up{i}": [F] * 8 for i in range(3)} | {f"down{i}": [T] * 4 + [F] * 4 for i in range(4)}
    after = {f"up{i}": [T] * 8 for i in range(3)} | {f"down{i}": [T] * 3 + [F] * 5 for i in range(4)}
    change = ev.paired_change(before, after, resamples=200_000)
    assert (change["gained"], change["lost"], change["p_value"]) == (3, 4, 1.0)  # the sign test sees 3 against 4
    deltas = [1.0] * 3 + [-0.125] * 4
    flips = itertools.product((-1, 1), repeat=len(deltas))
    exact = fmean(abs(sum(s * d for s, d in zip(signs, deltas))) >= sum(deltas) - 1e-12 for signs in flips)
    assert exact == pytest.approx(32 / 128) and change["p_permutation"] == pytest.approx(exact, abs=0.005)


def test_paired_change_ci95_is_the_paired_bootstrap_interval():
    # 40 one-rollout questions, 10 gained and 30 unchanged: a resample's gain count is Binomial(40, 1/4)
    before = {f"q{i}": [F] for i in range(40)}
    after = {f"q{i}": [i < 10] for i in range(40)}
    low, high = ev.paired_change(before, after)["ci95"]
    cdf = list(itertools.accumulate(math.comb(40, j) * 0.25**j * 0.75 ** (40 - j) for j in range(41)))
    quantile = [next(j for j, c in enumerate(cdf) if c >= q) / 40 for q in (0.025, 0.975)]
    assert quantile == [0.125, 0.4] and (low, high) == pytest.approx(quantile, abs=0.5 / 40)
    assert ev.paired_change(before, {f"q{i}": [T] for i in range(40)})["ci95"] == [1.0, 1.0]


def test_paired_change_needs_the_same_questions():
    with pytest.raises(ValueError, match="question 'q6' is in only one of the two tables"):
        ev.paired_change(TABLE, {**TABLE, "q6": [T, T, T]})


def test_empty_tables_are_errors():
    with pytest.raises(ValueError, match="empty judgement table"):
        ev.pass_at_1({})
    with pytest.raises(ValueError, match="question 'a' has no rollouts"):
        ev.avg_at_k({"a": []})


def test_judgement_table_keeps_the_k_lowest_rounds_and_scores_unparsed_as_wrong(judged_rollouts):
    table = ev.judgement_table(judged_rollouts, k=2)
    assert table == {"A": [F, T], "B": [F, T], "C": [F, F], "D": [T, T]}


def test_summarize_overall(judged_rollouts):
    s = ev.summarize(judged_rollouts, k=2)
    assert (s["k"], s["questions"], s["rollouts"]) == (2, 4, 8)
    assert s["pass_at_1"] == pytest.approx(4 / 8)
    assert s["pass_at_k"] == pytest.approx(3 / 4)
    assert s["avg_at_k"] == pytest.approx(0.5)
    assert s["cons_at_k"] == pytest.approx(1 / 4)
    assert s["pass_at_1_by_round"] == pytest.approx([1 / 4, 3 / 4])
    assert s["best_pass_at_1"] == pytest.approx(3 / 4)
    assert s["invalid_rate"] == pytest.approx(2 / 8)
    assert (s["judge_failures"], s["judge_failure_rate"]) == (1, pytest.approx(1 / 8))
    assert s["termination"] == pytest.approx({"answer": 6 / 8, "max_turns": 1 / 8, "context_limit": 1 / 8})
    assert next(iter(s["termination"])) == "answer"
    assert s["tool_calls"] == pytest.approx({"search": 11 / 8, "visit": 6 / 8, "python": 3 / 8, "total": 20 / 8})
    assert s["answer_len"] == pytest.approx(53 / 8)
    assert s["think_len"] == pytest.approx(1120 / 8)
    assert s["evidence"] is None, "no question of the table lists its evidence pages"


def test_summarize_by_level_and_tag(judged_rollouts):
    s = ev.summarize(judged_rollouts, k=2)
    assert list(s["by_level"]) == ["1", "2"]
    level1, level2 = s["by_level"]["1"], s["by_level"]["2"]
    assert (level1["questions"], level1["pass_at_1"], level1["pass_at_k"]) == (2, 0.5, 1.0)
    assert (level1["cons_at_k"], level1["best_pass_at_1"], level1["judge_failures"]) == (0.0, 1.0, 1)
    assert (level2["pass_at_1"], level2["pass_at_k"], level2["cons_at_k"]) == (0.5, 0.5, 0.5)
    assert list(s["by_tag"]) == ["e2h", "none", "sailor"]
    sailor = s["by_tag"]["sailor"]
    assert (sailor["questions"], sailor["pass_at_1"], sailor["pass_at_k"]) == (2, 0.25, 0.5)
    assert sailor["termination"] == pytest.approx({"answer": 0.75, "context_limit": 0.25})


def test_a_question_with_several_tags_counts_in_each(make_rollout):
    records = [
        make_rollout("x", 0, True, (1, 0, 0), tag=["hard", "sailor"]),
        make_rollout("y", 0, False, (0, 0, 0), tag="sailor"),
    ]
    s = ev.summarize(records, k=1)
    assert {name: block["pass_at_1"] for name, block in s["by_tag"].items()} == {"hard": 1.0, "sailor": 0.5}


def test_evidence_rate_averages_the_rollouts_that_measured_it(make_rollout):
    records = [
        make_rollout("x", 0, True, (1, 1, 0), evidence=1.0),
        make_rollout("x", 1, False, (1, 0, 0), evidence=0.0),
        make_rollout("y", 0, False, (1, 1, 0), evidence=0.5),
        make_rollout("z", 0, False, (0, 0, 0)),
    ]
    assert ev.evidence_rate(records) == pytest.approx(0.5)
    assert ev.evidence_rate(records[3:]) is None
    assert ev.summarize(records[:2], k=2)["evidence"] == pytest.approx(0.5)


def test_extra_tool_types_are_reported(make_rollout):
    record = make_rollout("x", 0, True, (1, 0, 0))
    record["tool_calls"]["calculator"] = 2
    assert ev.tool_calls_per_rollout([record]) == {"search": 1, "visit": 0, "python": 0, "calculator": 2, "total": 3}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("format_ok"), r"record 1: missing key\(s\) \['format_ok'\]"),
        (lambda r: r.update(correct=1), "record 1 .*'correct' must be true, false or null"),
        (lambda r: r.update(round=0), "record 1: duplicate round 0 of question 'A'"),
        (lambda r: r.update(tool_calls={"search": -1}), "record 1 .*'tool_calls' must map"),
        (lambda r: r.update(format_ok="false"), "record 1 .*'format_ok' must be true or false, got 'false'"),
        (lambda r: r.update(judge_parse_error=None), "record 1 .*'judge_parse_error' must be true or false"),
        (lambda r: r.update(answer_len=None), "record 1 .*'answer_len' must be a number >= 0, got None"),
        (lambda r: r.update(think_len="50"), "record 1 .*'think_len' must be a number >= 0, got '50'"),
    ],
)
def test_bad_records_are_named(judged_rollouts, change, message):
    change(judged_rollouts[1])
    with pytest.raises(ValueError, match=message):
        ev.summarize(judged_rollouts, k=2)


def test_too_few_rollouts_names_the_question(judged_rollouts):
    with pytest.raises(ValueError, match=r"question 'B' has 2 rollouts \(rounds \[0, 1\]\), k=3"):
        ev.summarize(judged_rollouts, k=3)
