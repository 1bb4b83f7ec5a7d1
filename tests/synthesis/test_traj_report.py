"""`synth report`'s figures: a quantile of a few trajectories lies between their smallest and largest value."""

import collections
import re

import pytest

from jaxseeker.synthesis.report import TrajectoryStats, format_report


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
