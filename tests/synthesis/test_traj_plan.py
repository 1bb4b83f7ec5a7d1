"""The expert's visit goals find their sentence in a page by word overlap alone (the offline extractor), and its
reader reads the value there as the world wrote it."""

import pytest

from jaxseeker.synthesis import reader
from jaxseeker.synthesis.plan import answer_goal
from jaxseeker.tools.extract import overlap_extract
from jaxseeker.world.entities import Entity
from jaxseeker.world.pages import say_attribute
from jaxseeker.world.schema import ATTRIBUTES


@pytest.mark.parametrize("attr", sorted(ATTRIBUTES))
def test_an_answer_goal_picks_its_attribute_sentence_from_a_page(attr):
    value = "1,234" if ATTRIBUTES[attr].kind == "number" else "on 3 May 1887"
    fact = f"Velmora {ATTRIBUTES[attr].verb.format(value)}."
    page = f"Velmora is a river town. {fact} Velmora lies in Ostra. Velmora is served by Velmora Airport."
    assert overlap_extract(page, answer_goal(attr, "Velmora"), max_chars=400, max_passages=1) == fact


@pytest.mark.parametrize("name", ["Velmora", "P. J. Walters", "St. Louis"])
@pytest.mark.parametrize("attr", sorted(ATTRIBUTES))
def test_the_reader_reads_every_attribute_as_the_world_writes_it(attr, name):
    entity = Entity("person/x", "person", name, numbers={attr: 1234.0}, dates={attr: "1887-05-03"})
    fact = f"{name} {say_attribute(entity, attr)}."  # "… played its first season in 1887." / "… on 3 May 1887."
    page = f"{name} is a baseball player. {fact} {name} lies in Ostra."
    value, sentence = reader.attribute(page, name, attr)
    assert sentence == fact
    assert reader.answer_value(value, attr) == ("1234" if ATTRIBUTES[attr].kind == "number" else "1887")
    assert overlap_extract(page, answer_goal(attr, name), max_chars=400, max_passages=1) == fact
