"""The reasoning expert backtracks: a candidate that fits is followed on, and when a later page contradicts it the
expert goes back and reaches the answer through the next candidate, the contradiction quoted."""

from __future__ import annotations

import re

from traj_support import LOOP

from jaxseeker.agent import as_question, run_episodes
from jaxseeker.synthesis import ExpertConfig, ExpertTeacher
from jaxseeker.synthesis.backtrack import Backtracking
from jaxseeker.tools import ToolsConfig, build_registry
from jaxseeker.world import DateIn, Edge, Entity, Is, LabelIs, Query, Relation, Var, World


def two_players() -> World:
    """Varo is the birthplace of two baseball players; the first listed played for a team founded in 1950, the
    second for one founded in 1905."""
    return World(
        [
            Entity("varo", "city", "Varo"),
            Entity("p1", "person", "Ada Wren", labels={"occupation": "baseball player"}),
            Entity("p2", "person", "Bo Rusk", labels={"occupation": "baseball player"}),
            Entity(
                "t1", "organisation", "Red Team", dates={"first_season": "1950-01-01"}, labels={"kind": "baseball team"}
            ),
            Entity(
                "t2",
                "organisation",
                "Blue Team",
                dates={"first_season": "1905-01-01"},
                labels={"kind": "baseball team"},
            ),
        ],
        [
            Relation("p1", "born_in", "varo"),
            Relation("p2", "born_in", "varo"),
            Relation("p1", "played_for", "t1"),
            Relation("p2", "played_for", "t2"),
        ],
        info={"source": "tiny"},
    )


def test_the_first_fit_is_ruled_out_by_its_teams_page_and_the_second_is_the_answer(traj_tokenizer):
    world = two_players()
    assert "Varo is the birthplace of Ada Wren and Bo Rusk." in world.page(world.url("varo")).text  # Ada Wren first
    query = Query(
        vars=(
            Var("person", (LabelIs("occupation", "baseball player"),)),
            Var("city", (Is("varo"),)),
            Var(
                "organisation",
                (LabelIs("kind", "baseball team"), DateIn("first_season", "1900-01-01", "1909-12-31", "decade")),
            ),
        ),
        edges=(Edge(0, "born_in", 1), Edge(0, "played_for", 2)),
    )
    question = as_question(
        {
            "question": "Which baseball player born in Varo played for a team whose first season came in the 1900s?",
            "answer": "Bo Rusk",
            "tag": "sailorfog",
            "meta": {"query": query.to_json(), "entities": ["p2", "varo", "t2"]},
        }
    )
    teacher = ExpertTeacher(world, ExpertConfig(detour_rate=0.0, link_rate=1.0))
    registry = build_registry(ToolsConfig(enabled=("search", "visit")), corpus=world.corpus)
    [episode] = run_episodes(teacher.engine(traj_tokenizer, [question]), traj_tokenizer, registry, [question], LOOP)
    assert episode.prediction == "Bo Rusk"
    run = teacher.latest[question.question]
    assert isinstance(run, Backtracking) and run.backtracks == 1 and run.jumps == 0
    turns = [m["content"] for m in episode.messages[2:]]
    contradiction = "Red Team played its first season in 1950."
    shown = next(i for i, t in enumerate(turns) if contradiction in t and "<tool_response>" in t)
    after = turns[shown + 1]
    assert f"“{contradiction}”" in after  # quoted from the page that showed it
    ruled_out = re.search(r"rules Ada Wren out after all|Ada Wren looked right but leads nowhere", after)
    assert ruled_out and after.index(f"“{contradiction}”") < ruled_out.start() < after.index("Bo Rusk fits")
    final = turns[-1]
    assert "<answer>Bo Rusk</answer>" in final and "“Blue Team played its first season in 1905.”" in final
    assert "Nothing is left unchecked." in final  # the answer's chain showed every clue
