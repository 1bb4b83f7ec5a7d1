"""ToolsConfig from a YAML-like mapping, and the registry built from it."""

import dataclasses

import pytest

from jaxseeker.tools import LLMConfig, ToolsConfig, build_registry, tools_config, tools_mapping
from jaxseeker.tools.keys import REDACTED


def test_tools_config_reads_nested_sections():
    config = tools_config(
        {"enabled": ["search", "visit"], "python": {"timeout_s": 3}, "summarizer": {"model": "judge-small"}}
    )
    assert config.enabled == ("search", "visit")
    assert config.python.timeout_s == 3 and config.python.cpu_s == 10
    assert config.summarizer == LLMConfig(model="judge-small")
    assert tools_config(None) == ToolsConfig()


def test_a_config_written_as_its_changed_keys_reads_back_to_itself():
    config = tools_config({"enabled": ["search"], "top_k": 2, "visit": {"max_links": 0}, "summarizer": {}})
    written = tools_mapping(config)
    assert written == {
        "enabled": ["search"],
        "top_k": 2,
        "visit": {"max_links": 0},
        "summarizer": dataclasses.asdict(LLMConfig()),
    }
    assert tools_config(written) == config and tools_mapping(ToolsConfig()) == {}
    # keys left out come from the default given: the pipeline's tools lay a recipe's keys over its own
    base = ToolsConfig(top_k=3, visit=dataclasses.replace(ToolsConfig().visit, page_chars=400))
    laid = tools_config({"visit": {"max_links": 1}}, default=base)
    assert (laid.top_k, laid.visit.page_chars, laid.visit.max_links) == (3, 400, 1)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"serach_backend": "local"}, r"tools.serach_backend: unknown key \(did you mean 'search_backend'\?\)"),
        (
            {"python": {"timeout": 3}},
            r"tools.python.timeout: unknown key \(did you mean 'timeout_s'\?\); known keys: \[",
        ),
        ({"page_chars": 400}, r"tools.page_chars: unknown key \(it belongs under a section: tools.visit.page_chars\)"),
        ({"visit": {"top_k": 3}}, r"tools.visit.top_k: unknown key; known keys: \['page_chars', "),
        ({"top_k": 0}, r"tools.top_k must be >= 1, got 0"),
        ({"search_backend": "bing"}, r"tools.search_backend: 'bing' is not one of \['local', 'serper'\]"),
        ({"enabled": ["search", "browse"]}, r"tools.enabled: unknown tool\(s\) \['browse'\]"),
        ({"http": 5}, r"tools.http: expected a mapping, got int"),
    ],
)
def test_bad_config_names_the_key(data, message):
    with pytest.raises(ValueError, match=message):
        tools_config(data)


def test_default_registry_runs_offline_over_the_world(corpus, auto_sandbox):
    registry = build_registry(ToolsConfig(), corpus=corpus)
    assert registry.names == ["search", "visit", "python"]
    assert "Ida Konst" in registry.call("search", {"query": ["Ida Konst weaver"]}).text
    assert (
        "founded Velmora"
        in registry.call("visit", {"url": "https://world.test/ida-konst", "goal": "who founded Velmora"}).text
    )


def test_build_registry_checks_what_it_needs(corpus):
    with pytest.raises(ValueError, match="need a corpus"):
        build_registry(ToolsConfig())
    with pytest.raises(ValueError, match="no feedback function"):
        build_registry(ToolsConfig(enabled=("answer_submit",)))
    web = build_registry(ToolsConfig(search_backend="serper", visit_backend="jina", enabled=("search", "visit")))
    assert web.names == ["search", "visit"]
    registry = build_registry(ToolsConfig(enabled=("answer_submit",)), feedback=lambda a: f"got {a}")
    assert registry.call("answer_submit", {"answer": "x"}).text == "got x"


def test_web_back_end_keys_are_redacted_before_their_first_request(monkeypatch):
    keys = {"SERPER_NEW_KEY": "sk-serper-9f8e7d", "JINA_NEW_KEY": "jina-4c3b2a", "LLM_NEW_KEY": "sk-llm-1a2b3c"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    config = ToolsConfig(
        enabled=("search", "visit", "python"),
        search_backend="serper",
        visit_backend="jina",
        serper_key_env="SERPER_NEW_KEY",
        jina_key_env="JINA_NEW_KEY",
        summarizer=LLMConfig(api_key_env="LLM_NEW_KEY"),
    )
    registry = build_registry(config)
    leaked = registry.call("python", {"code": f"print({list(keys.values())!r})"})  # e.g. read from /proc/PPID/environ
    assert leaked.text == f"stdout:\n{[REDACTED] * 3!r}"


def test_unsafe_python_turns_isolation_off_for_the_commands_that_build_tools():
    import argparse

    from jaxseeker.cli import build_parser
    from jaxseeker.tools import unsafe_python

    assert unsafe_python(ToolsConfig()).python.isolation == "none"
    assert unsafe_python(ToolsConfig(), False) == ToolsConfig()

    def options(parser: argparse.ArgumentParser, *path: str) -> set[str]:
        for name in path:
            sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            parser = sub.choices[name]
        return {o for a in parser._actions for o in a.option_strings}

    parser = build_parser()
    for path in (("rollout",), ("eval",), ("synth", "trajectories")):
        assert "--unsafe-python" in options(parser, *path), path
