"""Keeping questions apart: no shared evidence entity, hubs excepted."""

from jaxseeker.synthesis.qa.apart import evidence_entities, keep_apart


def q(*entities):
    return {"question": "?", "answer": "1", "meta": {"entities": list(entities)}}


def test_a_shared_entity_drops_a_question_and_a_shared_hub_does_not():
    trained = [q("city/a", "country/US"), q("airport/b")]
    fresh = [q("city/c", "country/US"), q("city/a"), q("city/d", "airport/b"), q()]
    assert keep_apart(fresh, trained, hub_ids={"country/US"}) == [fresh[0], fresh[3]]
    assert evidence_entities(fresh[0], {"country/US"}) == {"city/c"}
