"""The expert's visit goals find their sentence in a page by word overlap alone (the offline extractor)."""

import pytest

from jaxseeker.synthesis.plan import answer_goal
from jaxseeker.tools.extract import overlap_extract
from jaxseeker.world.schema import ATTRIBUTES


@pytest.mark.parametrize("attr", sorted(ATTRIBUTES))
def test_an_answer_goal_picks_its_attribute_sentence_from_a_page(attr):
    value = "1,234" if ATTRIBUTES[attr].kind == "number" else "on 3 May 1887"
    fact = f"Velmora {ATTRIBUTES[attr].verb.format(value)}."
    page = f"Velmora is a river town. {fact} Velmora lies in Ostra. Velmora is served by Velmora Airport."
    assert overlap_extract(page, answer_goal(attr, "Velmora"), max_chars=400, max_passages=1) == fact
