"""`synth report`'s figures: a quantile of a few trajectories lies between their smallest and largest value."""

import collections
import re

import pytest

from jaxseeker.synthesis.report import TrajectoryStats, format_report, trajectory_stats


@pytest.mark.parametrize("tokens", [[100, 1000], [3, 5, 40], [7, 7, 7, 7, 9000]])
def test_the_p90_of_a_few_values_is_never_above_their_max(tokens):
    st = TrajectoryStats(n=len(tokens), tool_calls=collections.Counter({1: len(tokens) - 1, 2: 1}), tokens=tokens)
    report = format_report(st)
    for line in ("tool calls per trajectory", "tokens per trajectory"):
        found = re.search(rf"{line}: mean [\d.]+, median [\d.]+, p90 (\d+), max (\d+)", report)
        assert found, report
        p90, largest = map(int, found.groups())
        assert p90 <= largest
    # the inclusive p90 (linear interpolation between the order statistics) of the tokens
    ordered = sorted(tokens)
    rank = 0.9 * (len(ordered) - 1)
    low = int(rank)
    p90 = ordered[low] + (ordered[min(low + 1, len(ordered) - 1)] - ordered[low]) * (rank - low)
    assert f"tokens per trajectory: mean {sum(tokens) / len(tokens):.1f}, median" in report
    assert re.search(rf"tokens per trajectory: .*p90 {p90:.0f}, max {max(tokens)}\n", report)


def test_a_turn_counts_as_reasoned_when_it_quotes_an_earlier_observation_and_names_the_next_clue():
    think = "<think>{}</think>\n<answer>x</answer>"
    messages = [
        {"role": "system", "content": "tools"},
        {"role": "user", "content": "Which city?"},
        {"role": "assistant", "content": think.format("Next clue: the city. “Paris is a city.”")},  # nothing seen yet
        {"role": "user", "content": "<tool_response>\nParis is a city.   Paris lies in France.\n</tool_response>"},
        {"role": "assistant", "content": think.format("“Paris lies in France.” Next clue: the river.")},
        {"role": "user", "content": "<tool_response>\nNo results for 'Seine'.\n</tool_response>"},
        {"role": "assistant", "content": think.format("“Paris lies in Spain.” Still unchecked: the river.")},
        {"role": "user", "content": "<tool_response>\nLyon is a city.\n</tool_response>"},
        {"role": "assistant", "content": think.format("“Paris is a city.” So it is Paris.")},
    ]
    record = {"messages": messages, "provenance": {"oracle_jumps": 2, "names_nothing": True, "tokens": 10}}
    st = trajectory_stats([record, {"messages": messages[:3], "provenance": {}}])
    # the first turn of each record has no observation before it; the rest: quoted 2 of 3, named 2 of 3, both 1
    assert (st.after_observation, st.quoted, st.named_next, st.reasoned) == (3, 2, 2, 1)
    assert (st.oracle_jumps, st.names_nothing) == (2, 1)
    assert st.rft_kept == 0  # no tool calls: WebSailor's filter keeps more than five
    assert "quoting it 67%, naming the next clue or what is unchecked 67%, both 33%" in format_report(st)
