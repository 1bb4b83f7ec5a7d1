"""Saving, loading and the build-once cache."""

import json

import pytest

from jaxseeker.errors import InputError
from jaxseeker.world import build_world, load_world, open_world, save_world, synthetic_world, world_spec


def test_save_load_round_trip(tmp_path):
    w = synthetic_world(200, seed=1)
    save_world(w, tmp_path / "w")
    back = load_world(tmp_path / "w")
    assert list(back.entities.values()) == list(w.entities.values())
    assert back.relations == w.relations and back.pages == w.pages
    assert back.info["source"] == "synthetic" and back.info["seed"] == 1


def test_bad_line_names_file_and_line(tmp_path):
    save_world(synthetic_world(200, seed=1), tmp_path)
    lines = (tmp_path / "relations.jsonl").read_text().splitlines()
    lines[2] = '["only", "two"]'
    (tmp_path / "relations.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"relations.jsonl:3: relation must be"):
        load_world(tmp_path)


def test_cache_builds_once_keyed_by_size_and_seed(tmp_path):
    a = build_world("synthetic", size=200, seed=2, cache_dir=tmp_path)
    dirs = list(tmp_path.iterdir())
    assert len(dirs) == 1 and json.loads((dirs[0] / "world.json").read_text())["size"] == 200
    (dirs[0] / "marker").write_text("")  # the second call must read this directory, not rebuild it
    b = build_world("synthetic", size=200, seed=2, cache_dir=tmp_path)
    assert (dirs[0] / "marker").exists() and b.relations == a.relations
    build_world("synthetic", size=200, seed=3, cache_dir=tmp_path)
    assert len([d for d in tmp_path.iterdir() if d.is_dir()]) == 2


def test_open_world_specs(tmp_path):
    w = open_world("synthetic:200:4", cache_dir=tmp_path)
    assert len(w) == 200 and w.info["seed"] == 4
    assert open_world({"source": "synthetic", "size": 200, "seed": 4}, cache_dir=tmp_path).relations == w.relations
    save_world(w, tmp_path / "saved")
    assert len(open_world(str(tmp_path / "saved"))) == 200
    saved = world_spec(str(tmp_path / "saved"))
    assert saved == world_spec({"source": "saved", "path": str(tmp_path / "saved")}) and saved.spec() == saved.path
    with pytest.raises(ValueError, match="synthetic\\[:SIZE"):
        open_world("synthetic:big", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown world source 'atlantis'|cannot open world"):
        open_world("atlantis")
    with pytest.raises(ValueError, match="unknown world source"):
        build_world("atlantis")


@pytest.mark.parametrize(
    "spec, mapping",
    [
        ("synthetic", {"source": "synthetic"}),
        ("synthetic:3000", {"size": 3000}),
        ("synthetic:3000:7", {"source": "synthetic", "size": 3000, "seed": 7}),
        ("atlas", {"source": "atlas"}),
        ("atlas:PK,IN", {"source": "atlas", "countries": ["PK", "IN"]}),
        ("pages:web.jsonl", {"source": "pages", "path": "web.jsonl"}),
    ],
)
def test_a_world_written_as_a_spec_or_a_mapping_is_the_same_world(spec, mapping):
    world = world_spec(spec)
    assert world == world_spec(mapping) and world_spec(world.spec()) == world
    assert world_spec(None) is None  # a recipe's `world: null`: no world


@pytest.mark.parametrize(
    "value, message",
    [
        ({"source": "pages"}, r"^recipe.world.path: source 'pages' needs a path$"),
        ({"source": "atlas", "path": "x"}, r"^recipe.world.path: source 'atlas' takes no path$"),
        ({"source": "web"}, r"^recipe.world.source: 'web' is not one of \['synthetic', 'atlas', 'pages', 'saved'\]$"),
        ({"countries": "PK"}, r"^recipe.world.countries: expected a list of ISO codes, got 'PK'$"),
        ({"size": "3000"}, r"^recipe.world.size: expected int, got '3000'$"),
        ({"seeds": 1}, r"^recipe.world: unknown keys \['seeds'\] \(did you mean 'seed'\?\)"),
        ("atlantis", r"^recipe.world: cannot open world 'atlantis': .*, or a mapping \{source, size, seed, countries"),
        ([1], r"^recipe.world: expected a spec string .* or null, got \[1\] \(list\)$"),
    ],
)
def test_a_bad_world_names_the_key_and_the_forms(value, message):
    with pytest.raises(InputError, match=message):
        world_spec(value, "recipe.world")
