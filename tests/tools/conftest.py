"""Fixtures of the tools tests: a scripted loopback HTTP server, a refused port, API keys, a small corpus, and the
sandbox of the python tool (or a skip / a CI failure saying why there is none)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from loopback import SECRET, LoopbackServer
from sandbox_support import isolation

from jaxseeker.tools.sandbox import Sandbox
from jaxseeker.world.corpus import Corpus, Page


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """A scripted loopback HTTP server."""
    s = LoopbackServer()
    yield s
    s.close()


@pytest.fixture
def closed_port_url() -> Iterator[str]:
    """A loopback URL on which nothing listens (connections are refused).

    The port stays bound, never listening, for the whole test: a port merely closed again could be taken by a
    server of a test running in parallel (pytest-xdist), which would then answer.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def secret_keys(monkeypatch: pytest.MonkeyPatch) -> str:
    """SERPER_API_KEY, JINA_API_KEY and OPENAI_API_KEY all set to SECRET."""
    for name in ("SERPER_API_KEY", "JINA_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, SECRET)
    return SECRET


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    """Five pages about a made-up river town, linked to each other."""
    pages = [
        Page(
            "https://world.test/velmora",
            "Velmora",
            "Velmora is a river town on the Ostra.\n\n"
            "The town was founded in 1412 by the weaver Ida Konst.\n\n"
            "Its bridge has nine arches and was rebuilt in 1876.",
            ("https://world.test/ostra", "https://world.test/ida-konst"),
        ),
        Page(
            "https://world.test/ostra",
            "Ostra (river)",
            "The Ostra is a river 212 km long. It flows through Velmora.",
            ("https://world.test/velmora",),
        ),
        Page(
            "https://world.test/ida-konst", "Ida Konst", "Ida Konst was a weaver born in 1380. She founded Velmora.", ()
        ),
        Page("https://world.test/glass", "Glassworks of Pirn", "Pirn is known for blue glass made since 1602.", ()),
        Page(
            "https://world.test/tram",
            "Pirn tramway",
            "The tramway of Pirn opened in 1899 with four lines.",
            ("https://world.test/unknown",),
        ),
    ]
    return Corpus(pages)


@pytest.fixture
def auto_sandbox() -> Sandbox:
    """The sandbox isolation "auto" gives the python tool here (or a skip / a CI failure: `sandbox_support`)."""
    return isolation("auto")
