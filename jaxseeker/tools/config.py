"""Which tools and back-ends an agent gets, and their limits; read from a plain mapping (a YAML section)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

from jaxseeker.tools.http import HttpConfig
from jaxseeker.tools.llm_client import LLMConfig
from jaxseeker.tools.python_exec import PythonConfig
from jaxseeker.tools.visit import VisitOptions

TOOL_NAMES = ("search", "visit", "python", "answer_submit")
SEARCH_BACKENDS = ("local", "serper")
VISIT_BACKENDS = ("local", "jina")


@dataclasses.dataclass(frozen=True)
class ToolsConfig:
    """Tools offered to the agent; the defaults run offline over the embedded world."""

    enabled: tuple[str, ...] = ("search", "visit", "python")  # search, visit, python, answer_submit
    search_backend: str = "local"  # local (BM25 over the world) | serper
    visit_backend: str = "local"  # local (the world's pages) | jina
    top_k: int = 5  # search results per query
    max_queries: int = 8  # queries one search call may take
    # local search: pages titled with the query's words first (`Corpus.search`), as a web search lists the page of
    # the name it was asked for first; plain BM25 ranks a short page below longer ones that repeat the name
    title_first: bool = False
    serper_url: str = "https://google.serper.dev"
    serper_key_env: str = "SERPER_API_KEY"  # environment variable holding the Serper key
    jina_url: str = "https://r.jina.ai"
    jina_key_env: str = "JINA_API_KEY"  # environment variable holding the Jina reader's key
    allow_private: bool = False  # let `visit` reach loopback / private / link-local hosts
    http: HttpConfig = HttpConfig()
    visit: VisitOptions = VisitOptions()
    python: PythonConfig = PythonConfig()
    summarizer: LLMConfig | None = None  # reduces fetched pages to evidence; None: offline word-overlap extraction
    max_workers: int = 8  # concurrent tool calls of one turn

    def __post_init__(self) -> None:
        for key, value, allowed in (
            ("search_backend", self.search_backend, SEARCH_BACKENDS),
            ("visit_backend", self.visit_backend, VISIT_BACKENDS),
        ):
            if value not in allowed:
                raise ValueError(f"tools.{key}: {value!r} is not one of {list(allowed)}")
        unknown = [n for n in self.enabled if n not in TOOL_NAMES]
        if unknown:
            raise ValueError(f"tools.enabled: unknown tool(s) {unknown}; known: {list(TOOL_NAMES)}")


UNSAFE_PYTHON_HELP = "run the python tool without kernel isolation (tools.python.isolation: none; warns every run)"


def unsafe_python(config: ToolsConfig, unsafe: bool = True) -> ToolsConfig:
    """`config` with its python tool unisolated when `unsafe` (the --unsafe-python flag of the commands)."""
    if not unsafe:
        return config
    return dataclasses.replace(config, python=dataclasses.replace(config.python, isolation="none"))


def _dataclass_of(annotation: Any) -> type | None:
    if dataclasses.is_dataclass(annotation):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return next((a for a in typing.get_args(annotation) if dataclasses.is_dataclass(a)), None)
    return None


def from_mapping(cls: type, data: Mapping[str, Any] | None, where: str) -> Any:
    """Dataclass `cls` from `data`, nested mappings for nested dataclasses; unknown keys are errors naming `where`."""
    if data is None:
        return cls()
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
    values = {}
    for key, value in data.items():
        nested = _dataclass_of(hints[key])
        if nested is not None and not isinstance(value, nested) and value is not None:
            value = from_mapping(nested, value, f"{where}.{key}")
        elif isinstance(value, list):
            value = tuple(value)
        values[key] = value
    return cls(**values)


def tools_config(data: Mapping[str, Any] | None, where: str = "tools") -> ToolsConfig:
    """A ToolsConfig from a YAML section such as {"search_backend": "serper", "python": {"timeout_s": 5}}."""
    return from_mapping(ToolsConfig, data, where)
