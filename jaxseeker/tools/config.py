"""Which tools and back-ends an agent gets, and their limits; read from a plain mapping (a YAML section)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

from jaxseeker.errors import InputError, did_you_mean
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
    summarizer_chips: int = 0  # for `jaxseeker plan`: chips of its kind serving the summariser; 0: not stated
    summarizer_shape: Mapping[str, Any] | None = None  # for `plan`: the summariser model shape if its name is unknown
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
        for key, value, least in (
            ("top_k", self.top_k, 1),
            ("max_queries", self.max_queries, 1),
            ("max_workers", self.max_workers, 1),
            ("summarizer_chips", self.summarizer_chips, 0),
            ("visit.page_chars", self.visit.page_chars, 1),
            ("visit.max_urls", self.visit.max_urls, 1),
            ("visit.max_links", self.visit.max_links, 0),
            ("visit.goal_passages", self.visit.goal_passages, 0),
        ):
            if value < least:
                raise ValueError(f"tools.{key} must be >= {least}, got {value}")


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


def _nested_home(cls: type, key: str, where: str) -> str:
    """` (it belongs under a section: tools.visit.page_chars)` when `key` is a field of one of `cls`'s nested
    sections, else ''."""
    hints = typing.get_type_hints(cls)
    homes = [
        f"{where}.{f.name}.{key}"
        for f in dataclasses.fields(cls)
        if (nested := _dataclass_of(hints[f.name])) is not None and key in {g.name for g in dataclasses.fields(nested)}
    ]
    return f" (it belongs under a section: {' or '.join(homes)})" if homes else ""


def from_mapping(cls: type, data: Mapping[str, Any] | None, where: str, default: Any = None) -> Any:
    """Dataclass `cls` from `data` laid over `default` (None: `cls()`), nested mappings for nested dataclasses (laid
    over the default's); an unknown key is an InputError naming its dotted path, the closest known key, or the
    section it belongs under."""
    base = cls() if default is None else default
    if data is None:
        return base
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(known))
    if unknown:  # the first, by name: its place, or the closest known key
        key = unknown[0]
        hint = _nested_home(cls, key, where) or did_you_mean([key], known)
        raise InputError(f"{where}.{key}: unknown key{hint}; known keys: {known}")
    values = {}
    for key, value in data.items():
        nested = _dataclass_of(hints[key])
        if nested is not None and not isinstance(value, nested) and value is not None:
            current = getattr(base, key)
            value = from_mapping(nested, value, f"{where}.{key}", current if isinstance(current, nested) else None)
        elif isinstance(value, list):
            value = tuple(value)
        values[key] = value
    try:
        return dataclasses.replace(base, **values)
    except (TypeError, ValueError) as e:
        message = str(e)  # ToolsConfig's own checks name the key already ("tools.enabled: …")
        raise InputError(message if message.startswith(where) else f"{where}: {message}") from None


def tools_mapping(config: ToolsConfig) -> dict[str, Any]:
    """The keys of `config` that differ from ToolsConfig's defaults, nested as a recipe's `tools` section writes them
    (`tools_config` reads it back to `config`): what the pipeline hands its RL stage's recipe."""
    return _changed(dataclasses.asdict(config), dataclasses.asdict(ToolsConfig()))


def _changed(values: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        default = defaults.get(key)
        if isinstance(value, dict) and isinstance(default, dict):
            if nested := _changed(value, default):
                out[key] = nested
        elif value != default:
            out[key] = list(value) if isinstance(value, tuple) else value
    return out


def tools_config(
    data: Mapping[str, Any] | None, where: str = "tools", default: ToolsConfig | None = None
) -> ToolsConfig:
    """A ToolsConfig from a YAML section such as {"search_backend": "serper", "python": {"timeout_s": 5}}, the keys
    it leaves out from `default` (None: ToolsConfig's own defaults)."""
    return from_mapping(ToolsConfig, data, where, default)
