"""Saving, loading and the build-once cache."""

import json

import pytest

from jaxseeker.world import build_world, load_world, open_world, save_world, synthetic_world


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
    save_world(w, tmp_path / "saved")
    assert len(open_world(str(tmp_path / "saved"))) == 200
    with pytest.raises(ValueError, match="synthetic\\[:SIZE"):
        open_world("synthetic:big", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown world source 'atlantis'|cannot open world"):
        open_world("atlantis")
    with pytest.raises(ValueError, match="unknown world source"):
        build_world("atlantis")
