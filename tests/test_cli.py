"""The `jaxseeker` entry point: every stage's subcommands are wired, and `info` reads an HF checkpoint."""


import jax
import pytest

from jaxseeker import cli, model
from jaxseeker.cli import build_parser, main


def test_every_subcommand_is_registered():
    parser = build_parser()
    for argv in (["info", "x"], ["sft", "--config", "c.yaml"], ["rl", "--config", "c.yaml"], ["pipeline", "--quick"],
                 ["rollout", "--model", "m", "--questions", "q", "--n", "1", "--out", "o"], ["bench", "sft"],
                 ["bench", "generate"], ["bench", "rollout"], ["bench", "rl"], ["export-hf", "--checkpoint", "c", "--out", "o"],
                 ["data", "inspect", "f", "--tokenizer", "t"], ["world", "build", "--source", "synthetic"],
                 ["eval", "--config", "c.yaml", "--model", "rl"]):
        assert callable(parser.parse_args(argv).func), argv


def test_info_prints_parameters_and_flops(tmp_path, capsys):
    cfg = model.ModelConfig.tiny("qwen3")
    model.save_hf(model.init_params(cfg, jax.random.key(0)), cfg, tmp_path)
    assert main(["info", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out
    assert f'"parameters": {model.count_params(cfg)}' in out and '"forward_flops_per_token"' in out


def test_bad_input_ends_the_command_with_one_line_naming_the_file_and_key(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("policy: {steps: three}\n")
    with pytest.raises(SystemExit, match=rf"^jaxseeker pipeline: {path}: policy\.steps: expected int, got 'three'"):
        main(["pipeline", "--config", str(path)])
    with pytest.raises(SystemExit, match=r"^jaxseeker pipeline: --set 'policy\.steps': expected key=value"):
        main(["pipeline", "--config", str(path), "--set", "policy.steps"])
    with pytest.raises(SystemExit, match=rf"^jaxseeker pipeline: {tmp_path / 'nope.yaml'}: no such file$"):
        main(["pipeline", "--config", str(tmp_path / "nope.yaml")])
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model_type": "gpt9"}')
    with pytest.raises(SystemExit, match=r"^jaxseeker info: .*config\.json: unsupported architecture model_type='gpt9'"):
        main(["info", str(tmp_path / "model")])


def test_ctrl_c_ends_a_command_with_status_130_and_one_line(monkeypatch, capsys):
    parser = cli.build_parser()
    parse = parser.parse_args

    def ctrl_c(_args):  # what Python's default SIGINT handler raises in the main thread while the command runs
        raise KeyboardInterrupt

    def interrupted(argv):
        args = parse(argv)
        args.func = ctrl_c
        return args

    monkeypatch.setattr(parser, "parse_args", interrupted)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    assert cli.main(["world", "info", "synthetic:200"]) == 130
    assert capsys.readouterr().err.strip() == "jaxseeker world: stopped by Ctrl-C"
