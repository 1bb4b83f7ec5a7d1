"""Counterfactual numbers: one digit permutation per trajectory, consistent everywhere it is applied."""

import re

import numpy as np

from jaxseeker.data.counterfactual import digit_table, permute_digits

MESSAGES = [
    {"role": "system", "content": "You are a deep-search agent.\n\nCurrent date: 2026-01-01"},
    {"role": "user", "content": "What is the population of Lawrenceville (Illinois, US)?"},
    {"role": "assistant", "content": '<tool_call>{"name": "search", "arguments": {"query": ["Lawrenceville"]}}</tool_call>'},
    {"role": "user", "content": "<tool_response>\n[1] Lawrenceville (Illinois, US)\n"
                                "https://atlas.jaxseeker.local/wiki/Lawrenceville_(Illinois%2C_US)\n"
                                "Lawrenceville (Illinois, US) has a population of 4,427. It was founded in 1835.\n"
                                "[2] Lawrenceville (Virginia, US)\n</tool_response>"},
    {"role": "assistant", "content": "<think>Result [1] says: “has a population of 4,427.”</think>\n<answer>4427</answer>"},
]


def test_the_table_fixes_zero_and_permutes_one_to_nine():
    table = digit_table(np.random.default_rng(0))
    assert "0".translate(table) == "0"
    assert sorted("123456789".translate(table)) == list("123456789")


def test_the_answer_stays_the_observations_number_under_the_same_permutation():
    rng = np.random.default_rng(1)
    out = permute_digits(MESSAGES, rng)
    table = digit_table(np.random.default_rng(1))
    answer = re.search(r"<answer>(\d+)</answer>", out[-1]["content"]).group(1)
    assert answer == "4427".translate(table) != "4427"
    assert f"population of {answer[0]},{answer[1:]}." in out[3]["content"]
    assert f"“has a population of {answer[0]},{answer[1:]}.”" in out[-1]["content"]
    assert "founded in 1835." not in out[3]["content"]  # every number moves, not just the answer


def test_system_message_urls_and_result_markers_are_kept():
    out = permute_digits(MESSAGES, np.random.default_rng(2))
    assert out[0] == MESSAGES[0]
    assert "https://atlas.jaxseeker.local/wiki/Lawrenceville_(Illinois%2C_US)\n" in out[3]["content"]
    assert "[1] Lawrenceville" in out[3]["content"] and "[2] Lawrenceville" in out[3]["content"]
    assert "Result [1] says" in out[-1]["content"]
    assert [m["role"] for m in out] == [m["role"] for m in MESSAGES]
    assert MESSAGES[-1]["content"].endswith("<answer>4427</answer>")  # the input is not modified


def test_other_draws_give_other_numbers():
    answers = {permute_digits(MESSAGES, np.random.default_rng(seed))[-1]["content"][-13:-9] for seed in range(20)}
    assert len(answers) > 10
