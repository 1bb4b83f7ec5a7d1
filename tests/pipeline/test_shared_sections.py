"""`tools` and `world` are written the same way in a pipeline recipe and a `jaxseeker rl` recipe: a block copied from
one kind into the other loads there, and the pipeline keeps its stages' fingerprints for the same settings."""

import pytest

from jaxseeker.pipeline import pipeline_config
from jaxseeker.pipeline.data_config import PIPELINE_TOOLS, PIPELINE_WORLD, tools_key
from jaxseeker.pipeline.recipes import rl_recipe
from jaxseeker.pipeline.stages import fingerprint
from jaxseeker.planning.recipe import rl_stages
from jaxseeker.tools import tools_config
from jaxseeker.train.recipe import RecipeError, read_recipe
from jaxseeker.world import world_spec

# a block of demo.yaml's kind, every key the two kinds' defaults differ on written out
TOOLS = {
    "enabled": ["search", "visit"],
    "top_k": 3,
    "title_first": True,
    "visit": {"page_chars": 400, "max_links": 0, "goal_passages": 2},
}
# the fingerprints of demo.yaml's world and tools that its runs on disk carry (tools as the flat keys of the stage key)
OLD_WORLD, OLD_TOOLS = "408de4317d12d758", "40322cb375416341"


def rl_tiny_with(**sections) -> dict:
    """rl_tiny with `sections` laid over its own, as a user would paste them."""
    return read_recipe("rl_tiny") | sections


@pytest.mark.parametrize("world", ["atlas:GB,FR", {"source": "atlas", "countries": ["GB", "FR"]}, "synthetic:900:1"])
def test_a_pipelines_tools_and_world_load_in_an_rl_recipe_and_back(world):
    cfg = pipeline_config({"tools": TOOLS, "world": world})
    assert cfg.tools == tools_config(TOOLS)  # the same ToolsConfig in both kinds
    assert rl_stages(rl_tiny_with(tools=TOOLS, world=world), [])  # `jaxseeker plan`'s checks of an RL recipe
    written = rl_recipe(cfg, name="r", model={"hf_path": "p"}, questions=["q.jsonl"], out_dir="o")
    assert tools_config(written["tools"]) == cfg.tools and world_spec(written["world"]).spec() == cfg.world.spec()
    again = pipeline_config({"tools": written["tools"], "world": written["world"]})
    assert (again.tools, again.world) == (cfg.tools, cfg.world)


def test_an_rl_recipes_world_null_is_no_world_and_the_pipelines_is_its_default():
    assert world_spec(read_recipe("rl_tiny")["world"]) is None
    assert pipeline_config({"world": None}).world == PIPELINE_WORLD == world_spec("synthetic:3000:0")
    assert pipeline_config({}).tools == PIPELINE_TOOLS


def test_the_pipelines_default_fills_the_keys_a_block_leaves_out():
    cfg = pipeline_config({"tools": {"title_first": True}, "world": "synthetic"})
    assert (cfg.tools.top_k, cfg.tools.visit.page_chars, cfg.tools.visit.max_links) == (3, 400, 5)
    assert (tools_config({"title_first": True}).top_k, cfg.world.size) == (5, 3000)  # an RL recipe: the library's
    assert world_spec("synthetic").size == 2000 and pipeline_config({"world": {"seed": 4}}).world.spec() == (
        "synthetic:3000:4"
    )


@pytest.mark.parametrize(
    "tools, message",
    [
        ({"page_chars": 300}, r"^tools.page_chars: unknown key \(it belongs under a section: tools.visit.page_chars\)"),
        ({"goal_passages": 2}, r"^tools.goal_passages: unknown key \(it belongs under a section: tools.visit.goal"),
        ({"visit": {"max_link": 0}}, r"^tools.visit.max_link: unknown key \(did you mean 'max_links'\?\)"),
        ({"search_backend": "serper"}, r"^tools.search_backend: the pipeline's rollouts run offline over its world"),
        ({"summarizer": {"model": "m"}}, r"^tools.summarizer: the pipeline's rollouts run offline"),
        ({"enabled": ["search", "visit", "python"]}, r"^tools.enabled: the pipeline's expert and eval search and"),
        ({"visit": {"page_chars": 0}}, r"^tools.visit.page_chars must be >= 1, got 0$"),
    ],
)
def test_a_tools_key_the_pipeline_cannot_take_is_named(tools, message):
    with pytest.raises(RecipeError, match=message):
        pipeline_config({"tools": tools})


@pytest.mark.parametrize(
    "world, message",
    [
        ("pages:pages.jsonl", r"^world: the pipeline draws its questions from a world's entities.*'pages:pages.jsonl'"),
        ({"sise": 3000}, r"^world: unknown keys \['sise'\] \(did you mean 'size'\?\)"),
        ("synthetic:big", r"^world: world spec 'synthetic:big': expected synthetic\[:SIZE\[:SEED\]\] with integers"),
        (3000, r"^world: expected a spec string \(synthetic\[:SIZE\[:SEED\]\], .*\) or a mapping \{source, size"),
        ({"size": 0}, r"^world.size: 0 is too small for a synthetic world \(need at least \d+ entities\)$"),
    ],
)
def test_a_bad_world_names_the_key_and_the_accepted_forms(world, message):
    with pytest.raises(RecipeError, match=message):
        pipeline_config({"world": world})


def test_demos_tools_and_world_keep_their_fingerprints():
    """demo.yaml's world and tools give the stage keys its existing runs carry, so `runs/demo` is reused: the world's
    four keys, and the tools' search and visit sizes as flat keys (others only where set)."""
    cfg = pipeline_config(read_recipe("demo"))
    world = {"source": "atlas", "size": 3000, "seed": 0, "countries": ("GB", "FR", "DE", "IT", "ES", "US")}
    tools = {"top_k": 3, "page_chars": 400, "max_links": 0, "goal_passages": 2, "title_first": True}
    assert (cfg.world.key(), tools_key(cfg.tools)) == (world, tools)
    assert (fingerprint(cfg.world.key()), fingerprint(tools_key(cfg.tools))) == (OLD_WORLD, OLD_TOOLS)
    assert tools_key(pipeline_config({}).tools) == {"top_k": 3, "page_chars": 400, "max_links": 5, "goal_passages": 0}
    # a key the flat section had no place for enters the key only when set
    assert tools_key(pipeline_config({"tools": {"max_queries": 2}}).tools)["max_queries"] == 2
