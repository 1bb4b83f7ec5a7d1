"""The expert's visit goals find their sentence in a page by word overlap alone (the offline extractor), its
reader reads the value there as the world wrote it, and the reasoning expert's queries and quotes come from the
clue and the observation."""

import pytest

from jaxseeker.synthesis import reader
from jaxseeker.synthesis.plan import answer_goal
from jaxseeker.synthesis.qa.hunt import hunt_queries
from jaxseeker.synthesis.reasoned import evidence
from jaxseeker.tools.extract import overlap_extract
from jaxseeker.world import DateIn, LabelIs, Var
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


def test_date_clues_are_searched_a_year_at_a_time_and_evidence_quotes_the_sentence_that_bears_on_the_clue():
    player = Var(
        "person",
        (
            LabelIs("occupation", "baseball player"),
            DateIn("born", "1890-01-01", "1893-12-31", "early-decade"),
            DateIn("debut", "1914-01-01", "1916-12-31", "mid-decade"),
        ),
    )
    born = "baseball player born 1890 1891 1892 1893"
    queries = hunt_queries(player)
    assert queries[:4] == [  # the whole profile, then the sharpest clue a year at a time
        f"{born} made major-league debut 1914 1915 1916",
        f"{born} made major-league debut 1914",
        f"{born} made major-league debut 1915",
        f"{born} made major-league debut 1916",
    ]
    assert len(queries) == 4 + 3 * 4  # then every pair of years, in the order the page says them
    assert queries[4:6] == [
        "baseball player born 1890 made major-league debut 1914",
        "baseball player born 1891 made major-league debut 1914",
    ]
    assert hunt_queries(player, most=2) == queries[:2]
    died = DateIn("died", "1910-01-01", "1919-12-31", "decade")
    decade = Var("person", (LabelIs("occupation", "baseball player"), died))
    assert hunt_queries(decade)[1:] == [f"baseball player died {y}" for y in range(1910, 1920)]
    century = Var("person", (DateIn("died", "1801-01-01", "1900-12-31", "century"),))
    assert hunt_queries(century) == [] and hunt_queries(Var("city", ())) == []  # nothing sharp to search
    seen = [
        "Search results for 'Tulsa':\n\n[1] Tulsa\nhttps://w.local/wiki/Tulsa\nTulsa is a city. Tulsa has a "
        "population of 413,066. Tulsa lies in Okla…",
        "No results for 'Tulsa airport'. Try a shorter or different query.",
    ]
    assert evidence(seen, "Tulsa", "the city has a population of hundreds of thousands") == (
        "Tulsa has a population of 413,066."
    )
    assert evidence(seen[1:], "Tulsa", "the city").startswith("No results for 'Tulsa airport'.")


def test_a_visited_pages_links_read_as_links_to_hops():
    observation = (
        "Page: Alpha River\nURL: https://pages.example/Alpha_River\nGoal: its links\n\nEvidence in page:\n"
        "Alpha River lies next to Beta Town.\n\nLinks on this page:\n- Beta Town: https://pages.example/Beta_Town\n"
        "- Gamma Hill: https://pages.example/Gamma_Hill"
    )
    (page,) = reader.parse_visit(observation)
    assert page.links == {
        "Beta Town": "https://pages.example/Beta_Town",
        "Gamma Hill": "https://pages.example/Gamma_Hill",
    }
    names, more, said = reader.related(page.text, "Alpha River", "links_to", True)
    assert (names, more) == (["Beta Town", "Gamma Hill"], 0)
    assert said == ["Alpha River links to Beta Town.", "Alpha River links to Gamma Hill."]
    assert reader.related(page.text, "Alpha River", "links_to", False)[0] == []  # who links here: not on this page
