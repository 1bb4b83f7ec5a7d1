"""Keeping questions apart: no shared evidence entity, hubs excepted."""

import collections

from jaxseeker.synthesis.qa.apart import evidence_entities, keep_apart, synthesize_apart
from jaxseeker.synthesis.qa.driver import SynthResult
from jaxseeker.synthesis.qa.record import QARecord


def q(*entities):
    return {"question": "?", "answer": "1", "meta": {"entities": list(entities)}}


def test_a_shared_entity_drops_a_question_and_a_shared_hub_does_not():
    trained = [q("city/a", "country/US"), q("airport/b")]
    fresh = [q("city/c", "country/US"), q("city/a"), q("city/d", "airport/b"), q()]
    assert keep_apart(fresh, trained, hub_ids={"country/US"}) == [fresh[0], fresh[3]]
    assert evidence_entities(fresh[0], {"country/US"}) == {"city/c"}


def test_synthesize_apart_drafts_twice_as_many_until_enough_are_apart():
    drafted = []

    def draft(count):  # question i is about city/i; the trained questions took cities 0-3
        drafted.append(count)
        records = [QARecord(f"q{i}?", "1", "t", 1, {"entities": [f"city/{i}", "country/US"]}) for i in range(count)]
        return SynthResult(records, attempts=count + 1, dropped=collections.Counter(duplicate=1))

    trained = [q(f"city/{i}") for i in range(4)]
    result = synthesize_apart(draft, 4, trained, hub_ids={"country/US"})
    assert drafted == [4, 8]  # 4 drafts kept none, 8 kept four
    assert [r.question for r in result.records] == ["q4?", "q5?", "q6?", "q7?"]
    assert result.dropped == {"duplicate": 1, "shares an evidence entity": 4} and result.attempts == 9
