"""Build the tool registry an agent gets from a ToolsConfig."""

from __future__ import annotations

from collections.abc import Callable

from jaxseeker.tools.answer import answer_submit_tool
from jaxseeker.tools.base import ToolRegistry
from jaxseeker.tools.config import ToolsConfig
from jaxseeker.tools.llm_client import LLMClient
from jaxseeker.tools.python_exec import python_tool
from jaxseeker.tools.search import LocalSearch, SerperSearch, search_tool
from jaxseeker.tools.visit import JinaReader, LocalPages, visit_tool
from jaxseeker.world.corpus import Corpus


def build_registry(
    config: ToolsConfig = ToolsConfig(),
    *,
    corpus: Corpus | None = None,
    feedback: Callable[[str], str] | None = None,
) -> ToolRegistry:
    """The registry of `config.enabled` tools; local back-ends need `corpus`, `answer_submit` needs `feedback`."""
    needs_corpus = ("search" in config.enabled and config.search_backend == "local") or (
        "visit" in config.enabled and config.visit_backend == "local"
    )
    if needs_corpus and corpus is None:
        raise ValueError("build_registry: the local search / visit back-ends need a corpus (pass corpus=…)")
    registry = ToolRegistry()
    for name in config.enabled:
        if name == "search":
            backend = (
                LocalSearch(corpus, title_first=config.title_first)
                if config.search_backend == "local"
                else SerperSearch(config.serper_url, config.serper_key_env, config.http)
            )
            registry.register(search_tool(backend, top_k=config.top_k, max_queries=config.max_queries))
        elif name == "visit":
            if config.visit_backend == "local":
                reader = LocalPages(corpus)
            else:
                reader = JinaReader(
                    config.jina_url, config.jina_key_env, config.http, allow_private=config.allow_private
                )
            llm = LLMClient(config.summarizer) if config.summarizer is not None else None
            registry.register(visit_tool(reader, options=config.visit, llm=llm))
        elif name == "python":
            registry.register(python_tool(config.python))
        elif name == "answer_submit":
            if feedback is None:
                raise ValueError("build_registry: 'answer_submit' is enabled but no feedback function was given")
            registry.register(answer_submit_tool(feedback))
    return registry
