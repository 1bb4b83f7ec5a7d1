"""Counterfactual numbers and names: one relabelling per trajectory, consistent everywhere it is applied."""

import re

import numpy as np
import pytest

from jaxseeker.data.counterfactual import NamePool, digit_table, permute_digits, permute_names, searched_names
from jaxseeker.world.pages import wiki_slug

MESSAGES = [
    {"role": "system", "content": "You are a deep-search agent.\n\nCurrent date: 2026-01-01"},
    {"role": "user", "content": "What is the population of Lawrenceville (Illinois, US)?"},
    {
        "role": "assistant",
        "content": '<tool_call>{"name": "search", "arguments": {"query": ["Lawrenceville"]}}</tool_call>',
    },
    {
        "role": "user",
        "content": "<tool_response>\n[1] Lawrenceville (Illinois, US)\n"
        "https://atlas.jaxseeker.local/wiki/Lawrenceville_(Illinois%2C_US)\n"
        "Lawrenceville (Illinois, US) has a population of 4,427. It was founded in 1835.\n"
        "[2] Lawrenceville (Virginia, US)\n</tool_response>",
    },
    {
        "role": "assistant",
        "content": "<think>Result [1] says: “has a population of 4,427.”</think>\n<answer>4427</answer>",
    },
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


TRIP = [
    {"role": "system", "content": "You are a deep-search agent."},
    {"role": "user", "content": "What is the elevation of the airport that serves Harrison (Michigan, US)?"},
    {
        "role": "assistant",
        "content": "<think>Search Harrison (Michigan, US).</think>\n<tool_call>\n"
        '{"name": "search", "arguments": {"query": ["Harrison (Michigan, US)"]}}\n</tool_call>',
    },
    {
        "role": "user",
        "content": "<tool_response>\n[1] Harrison (Michigan, US)\n"
        "https://atlas.jaxseeker.local/wiki/Harrison_(Michigan%2C_US)\n"
        "Harrison (Michigan, US) is served by Clare County Airport.\n"
        "[2] Harrison (Ohio, US)\n</tool_response>",
    },
    {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "search", "arguments": {"query": ["Clare County Airport"]}}\n</tool_call>',
    },
    {
        "role": "user",
        "content": "<tool_response>\n[1] Clare County Airport\n"
        "https://atlas.jaxseeker.local/wiki/Clare_County_Airport\n"
        "Clare County Airport lies at an elevation of 348 m.\n</tool_response>",
    },
    {"role": "assistant", "content": "<think>Clare County Airport's page says 348 m.</think>\n<answer>348</answer>"},
]
POOL = NamePool(
    {
        "city": ["Harrison (Michigan, US)", "Zell (Baden, DE)", "Nice (FR)"],
        "airport": ["Clare County Airport", "Lightning Bolt Field"],
    }
)


def test_searched_names_are_the_search_queries_in_order():
    assert searched_names(TRIP) == ["Harrison (Michigan, US)", "Clare County Airport"]
    assert searched_names([{"role": "assistant", "content": "<tool_call>{not json</tool_call>"}]) == []


def test_each_searched_name_becomes_another_of_its_group_everywhere_with_its_url():
    out = permute_names(TRIP, np.random.default_rng(0), POOL)
    city, airport = searched_names(out)
    assert city in {"Zell (Baden, DE)", "Nice (FR)"} and airport == "Lightning Bolt Field"
    text = "\n".join(m["content"] for m in out)
    assert "Harrison (Michigan, US)" not in text and "Clare County" not in text
    assert f"the airport that serves {city}?" in out[1]["content"]
    assert f"{city} is served by Lightning Bolt Field." in out[3]["content"]
    assert f"https://atlas.jaxseeker.local/wiki/{wiki_slug(city)}\n" in out[3]["content"]
    assert "Lightning_Bolt_Field" in out[5]["content"] and out[6]["content"].endswith("<answer>348</answer>")
    assert "[2] Harrison (Ohio, US)" in out[3]["content"]  # a name the trajectory did not search stays
    assert TRIP[1]["content"].endswith("Harrison (Michigan, US)?")  # the input is not modified


def test_names_outside_the_pool_and_partial_words_are_kept():
    pool = NamePool({"": ["Harrison", "Nice"]})
    messages = [
        {"role": "user", "content": "Harrison or Harrisonburg?"},
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "search", "arguments": {"query": "Harrison"}}</tool_call> and Clare',
        },
    ]
    out = permute_names(messages, np.random.default_rng(1), pool)
    assert out[0]["content"] == "Nice or Harrisonburg?" and out[1]["content"].endswith("and Clare")
    assert permute_names(TRIP, np.random.default_rng(1), pool) == TRIP


def test_a_pool_file_names_its_bad_line(tmp_path):
    path = tmp_path / "pool.tsv"
    path.write_text("city\tZell (Baden, DE)\n\nNice (FR)\nairport\t\n")
    with pytest.raises(ValueError, match=r"pool.tsv:4: no name after the tab"):
        NamePool.read(path)
    path.write_text("city\tZell (Baden, DE)\n\nNice (FR)\n")
    assert NamePool.read(path).groups == {"city": ["Zell (Baden, DE)"], "": ["Nice (FR)"]}
