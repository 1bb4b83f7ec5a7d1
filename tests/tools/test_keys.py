"""API keys: a key that cannot be sent is refused at start-up naming its variable; every key read is redacted in
every form jaxseeker writes (observations, tool-call arguments, HTTP errors)."""

import urllib.parse

import pytest

from jaxseeker.tools import HttpConfig, HttpError, JinaReader, LLMClient, LLMConfig, SerperSearch, Tool, ToolRegistry
from jaxseeker.tools.keys import REDACTED, BadKey, read_key, redact


@pytest.mark.parametrize(
    "value, position", [("sk-abc\ndef", 7), ("sk-\x1babc", 4), ("sk-caf\u00e9-123", 7), ("sk-\u200babc", 4)]
)
@pytest.mark.parametrize(
    "build",
    [
        lambda: JinaReader("http://127.0.0.1:9", "JAXSEEKER_TEST_KEY"),
        lambda: SerperSearch("http://127.0.0.1:9", "JAXSEEKER_TEST_KEY"),
        lambda: LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1", api_key_env="JAXSEEKER_TEST_KEY")),
    ],
)
def test_a_key_with_a_control_or_non_ascii_character_is_refused_at_start_up(monkeypatch, value, position, build):
    monkeypatch.setenv("JAXSEEKER_TEST_KEY", value)
    with pytest.raises(BadKey) as caught:
        build()
    message = str(caught.value)
    assert message.startswith(
        f"$JAXSEEKER_TEST_KEY: the key has a control or non-ASCII character at position {position} of {len(value)}"
    )
    assert value not in message and value[3:6] not in message


def test_surrounding_whitespace_is_not_part_of_the_key(monkeypatch):
    monkeypatch.setenv("JAXSEEKER_TEST_KEY", "  sk-trailing-newline-9z\n")
    assert read_key("JAXSEEKER_TEST_KEY") == "sk-trailing-newline-9z"


def test_every_spelling_of_a_key_is_redacted(monkeypatch):
    key = 'sk-a/b+c="d\\e'
    monkeypatch.setenv("JAXSEEKER_TEST_KEY", key)
    read_key("JAXSEEKER_TEST_KEY")
    for form in (key, repr(key)[1:-1], urllib.parse.quote(key, safe=""), urllib.parse.quote(key)):
        assert redact(f"error: {form}!") == f"error: {REDACTED}!"
    assert redact(f"Illegal header value b'Bearer {repr(key)[1:-1]}'") == f"Illegal header value b'Bearer {REDACTED}'"


def test_tool_results_redact_keys_in_arguments_and_text(monkeypatch):
    monkeypatch.setenv("JAXSEEKER_TEST_KEY", "sk-in-the-arguments-42")
    key = read_key("JAXSEEKER_TEST_KEY")
    echo = Tool(
        "echo",
        "echo",
        {"type": "object", "properties": {"text": {"type": "string"}, "more": {"type": "array"}}},
        lambda a: a["text"],
    )
    result = ToolRegistry([echo]).call("echo", {"text": f"key={key}", "more": [{"k": key}]})
    assert result.arguments == {"text": f"key={REDACTED}", "more": [{"k": REDACTED}]}
    assert result.text == f"key={REDACTED}"


def test_http_error_text_never_holds_the_key(monkeypatch, closed_port_url):
    monkeypatch.setenv("JAXSEEKER_TEST_KEY", "sk-never-in-errors-77")
    reader = JinaReader(closed_port_url, "JAXSEEKER_TEST_KEY", HttpConfig(timeout_s=5, max_retries=0))
    with pytest.raises(HttpError) as caught:
        reader.read("http://93.184.216.34/sk-never-in-errors-77")
    assert "connection failed" in str(caught.value) and "sk-never-in-errors-77" not in str(caught.value)
    assert REDACTED in str(caught.value)
