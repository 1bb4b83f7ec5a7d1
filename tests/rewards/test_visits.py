"""Evidence recall: the share of a question's evidence pages an episode's visit calls opened."""

from jaxseeker.agent.episode import ToolCallRecord
from jaxseeker.rewards import evidence_recall

HUB, ANSWER = "https://atlas.test/wiki/Jenkins_Airport", "https://atlas.test/wiki/Vidor_(Texas%2C_US)"


def call(name, **arguments):
    return ToolCallRecord(turn=1, name=name, arguments=arguments, error=None, latency_s=0.0)


def test_counts_visited_pages_once_and_ignores_searches():
    calls = [call("search", query=[ANSWER]), call("visit", url=[HUB], goal="g"), call("visit", url=HUB, goal="g")]
    assert evidence_recall(calls, [ANSWER, HUB]) == 0.5


def test_urls_compare_percent_decoded():
    assert evidence_recall([call("visit", url=["https://atlas.test/wiki/Vidor_(Texas,_US)"])], [ANSWER]) == 1.0


def test_no_evidence_pages_is_none_and_bad_arguments_count_nothing():
    assert evidence_recall([call("visit", url=[HUB])], []) is None
    assert evidence_recall([call("visit", url=[3, None]), call("visit", goal="g")], [HUB]) == 0.0
    assert evidence_recall([call("visit", url=3), call("visit", url={"u": HUB}), call("visit", url=HUB)], [HUB]) == 1.0
