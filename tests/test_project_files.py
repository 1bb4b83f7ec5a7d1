"""The files at the repository's root that tools and people read besides the code: CITATION.cff holds what the
Citation File Format 1.2.0 requires and cites the paper of every shipped paper recipe, and CHANGELOG.md and
CITATION.cff name the package's version; CONTRIBUTING.md's links resolve."""

import re
import tomllib
from pathlib import Path

import yaml

import jaxseeker

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ("webdancer", "websailor", "webexplorer", "webseer", "openseeker")  # recipe names start with these


def citation() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text())


def test_the_citation_file_has_the_keys_cff_requires_and_the_packages_version_and_licence():
    cff = citation()
    assert cff["cff-version"] == "1.2.0" and cff["message"] and cff["title"] and cff["type"] == "software"
    assert cff["authors"] and all(a.get("name") or a.get("family-names") for a in cff["authors"])
    assert cff["version"] == jaxseeker.__version__
    assert cff["license"] == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]


def test_the_citation_file_cites_the_paper_of_every_paper_recipe():
    """Each reference has the keys CFF requires of one (type, title, authors); every arXiv number a paper recipe
    names is a reference's, and every paper a recipe is named for is a reference's title."""
    references = citation()["references"]
    assert all(r["type"] and r["title"] and r["authors"] and isinstance(r["year"], int) for r in references)
    cited = {i["value"].removeprefix("arXiv:") for r in references for i in r.get("identifiers", [])}
    recipes = [p for p in sorted((ROOT / "configs").glob("*.yaml")) if p.name.startswith(PAPERS)]
    named = {n for p in recipes for n in re.findall(r"arXiv[ :]?(\d{4}\.\d{5})", p.read_text())}
    assert len(named) >= 4 and named <= cited
    titles = " ".join(r["title"].lower() for r in references)
    assert {p.name.split("_")[0] for p in recipes} == set(PAPERS) and all(paper in titles for paper in PAPERS)


def test_the_changelog_has_an_entry_for_this_version():
    headings = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings[:2] == ["Unreleased", jaxseeker.__version__]


def test_every_relative_link_of_contributing_resolves():
    text = re.sub(r"^```.*?^```", "", (ROOT / "CONTRIBUTING.md").read_text(), flags=re.M | re.S)
    targets = [t.partition("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]
    assert len(targets) > 5 and all((ROOT / t).exists() for t in targets)
