"""`jaxseeker` ends a command that failed on a file or over the network with one line, not a traceback."""

import pytest
from loopback import LoopbackServer, Reply

from jaxseeker import cli


def test_a_directory_given_as_a_config_file_is_one_line_naming_a_recipe_in_it(tmp_path):
    (tmp_path / "small.yaml").write_text("name: small\n")
    with pytest.raises(SystemExit) as caught:
        cli.main(["plan", "--config", str(tmp_path)])
    assert str(caught.value.code) == (
        f"jaxseeker plan: {tmp_path}: is a directory, not a recipe file; give one of its "
        f"recipes, e.g. {tmp_path / 'small.yaml'}"
    )


def test_a_failing_solver_server_is_one_line(tmp_path):
    server = LoopbackServer()
    server.route = lambda request: Reply(400, "no such model")
    argv = [
        "synth",
        "openseeker",
        "--world",
        "synthetic:200:0",
        "--n",
        "2",
        "--out",
        str(tmp_path / "qa.jsonl"),
        "--solver",
        "openai",
        "--llm-url",
        f"{server.url}/v1",
        "--llm-model",
        "tiny",
        "--no-solver",
    ]
    try:
        with pytest.raises(SystemExit) as caught:
            cli.main(argv)
    finally:
        server.close()
    message = str(caught.value.code)
    assert message == (
        f"jaxseeker synth: chat completion failed: POST {server.url}/v1/chat/completions failed after "
        "1 attempt: HTTP 400: 'no such model'"
    )
