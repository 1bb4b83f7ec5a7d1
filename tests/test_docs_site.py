"""The documentation site (`make docs`) builds with `mkdocs build --strict`: every page of docs/ is in its nav, every
stage package has an API page, and the API pages hold the docstrings of the functions they name."""

import html
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import markdown
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = sorted(p.parent.name for p in (ROOT / "jaxseeker").glob("*/__init__.pyi"))  # stages with a public surface


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as `make docs` builds it, into a temporary directory; --strict turns every warning into a failure."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's notice about its successor
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def nav_pages(nav: list) -> list[str]:
    """The page paths of an mkdocs nav, in order."""
    pages = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages.extend(nav_pages(value) if isinstance(value, list) else [value])
    return pages


def text_of(page_html: str) -> str:
    """The visible text of an HTML fragment, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page_html)).split())


def test_the_nav_holds_every_page_once_in_the_reading_order():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = nav_pages(config["nav"])
    on_disk = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(pages) == on_disk and len(set(pages)) == len(pages)
    order = ["index.md", "install.md", "quickstart.md", "concepts.md", "guides/", "reference/", "api/", "results.md"]
    firsts = [next(i for i, page in enumerate(pages) if page.startswith(prefix)) for prefix in order]
    assert firsts == sorted(firsts)


def shadowed(package: str) -> list[str]:
    """The names `jaxseeker.<package>` exports that are also the names of its submodules (`model.forward`)."""
    stub = (ROOT / "jaxseeker" / package / "__init__.pyi").read_text()
    exported = re.findall(r'^    "(\w+)",$', stub, re.M)  # the __all__ list, one name a line
    return sorted(n for n in exported if (ROOT / "jaxseeker" / package / f"{n}.py").exists())


def test_every_stage_package_has_an_api_page():
    """One page a package with a public surface; a name its submodule shadows (griffe, like Python after the
    submodule's import, sees the module under that name) is rendered from its module, on the same page."""
    assert {"model", "losses", "rewards"} <= set(PACKAGES) and "forward" in shadowed("model")
    pages = {p.stem: p.read_text() for p in (ROOT / "docs" / "api").glob("*.md")}
    assert sorted(pages) == PACKAGES
    assert all(f"::: jaxseeker.{name}\n" in text for name, text in pages.items())
    missing = [f"{p}.{n}" for p in PACKAGES for n in shadowed(p) if f"::: jaxseeker.{p}.{n}.{n}\n" not in pages[p]]
    assert not missing


@pytest.mark.parametrize(
    "qualname",
    [
        "losses.policy_loss",
        "losses.group_advantages",
        "losses.masked_nll",
        "model.forward",
        "model.load_hf",
        "rewards.token_f1",
    ],
)
def test_the_api_pages_hold_each_functions_docstring_under_its_name(site, qualname):
    """The first paragraph of the docstring, as Markdown renders it, lies between the function's heading and the
    next member's (a docstring shown under the wrong name, or not at all, fails)."""
    package, name = qualname.split(".")
    summary = inspect.getdoc(getattr(importlib.import_module(f"jaxseeker.{package}"), name)).split("\n\n")[0]
    page = (site / "api" / package / "index.html").read_text()
    start = re.search(rf'id="jaxseeker\.{package}\.{name}(\.{name})?"', page).start()  # or `.forward.forward`
    following = re.search(rf'id="jaxseeker\.{package}\.[A-Za-z_]+"', page[start + 1 :])
    section = page[start : start + 1 + following.start()] if following else page[start:]
    assert text_of(markdown.markdown(summary)) in text_of(section)
    assert f"{name}(" in re.sub(r"<[^>]+>", "", section)  # the signature


def test_the_site_has_a_page_for_each_docs_page(site):
    assert (site / "index.html").is_file() and (site / "guides" / "custom_loss" / "index.html").is_file()
    assert "jaxseeker trains deep-search agents" in text_of((site / "index.html").read_text())
    assert not (site / "generate.py").exists()  # the generator of cli.md and configs.md is not published
