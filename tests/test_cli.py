"""The `jaxseeker` entry point: every subcommand parses a realistic command line, shared flags have one name (old
names still work, with a note), misspellings are answered with the closest name, and `info` reads a checkpoint."""

import argparse
import json
from pathlib import Path

import jax
import pytest
from cli_support import usage_error

from jaxseeker import __version__, cli, model
from jaxseeker.cli import build_parser, main
from jaxseeker.train.recipe import CONFIGS_DIR

# One realistic command line per leaf command, and values it must parse to.
COMMAND_LINES = {
    ("info",): (["info", "ckpt", "--context", "8192", "--json"], {"path": "ckpt", "context": 8192, "json": True}),
    ("bench", "generate"): (
        ["bench", "generate", "--batch", "4", "--new-tokens", "32"],
        {"batch": 4, "new_tokens": 32},
    ),
    ("bench", "pages"): (["bench", "pages", "--pages", "1000", "--json"], {"pages": 1000, "json": True}),
    ("bench", "sft"): (["bench", "sft", "--seq-len", "512", "--no-ynn"], {"seq_len": 512, "ynn": False}),
    ("bench", "rl"): (["bench", "rl", "--max-context", "512", "--pack"], {"max_context": 512, "pack": True}),
    ("bench", "rollout"): (
        ["bench", "rollout", "--max-context", "4096", "--slots", "8"],
        {"max_context": 4096, "slots": 8},
    ),
    ("bench", "serve"): (
        ["bench", "serve", "--max-context", "512", "--concurrency", "1,4"],
        {"max_len": 512, "concurrency": (1, 4)},
    ),
    ("bench", "sandbox"): (["bench", "sandbox", "--calls", "5"], {"calls": 5}),
    ("import-gguf",): (
        ["import-gguf", "m.gguf", "--out", "hf", "--dtype", "bfloat16"],
        {"file": "m.gguf", "out": "hf", "dtype": "bfloat16"},
    ),
    ("data", "inspect"): (
        ["data", "inspect", "a.jsonl", "b.jsonl", "--tokenizer", "tok"],
        {"files": ["a.jsonl", "b.jsonl"], "tokenizer": "tok"},
    ),
    ("data", "build"): (["data", "build", "a.jsonl", "--out", "ds", "--split", "test"], {"out": "ds", "split": "test"}),
    ("world", "build"): (
        ["world", "build", "--source", "atlas", "--countries", "FR,DE"],
        {"source": "atlas", "countries": "FR,DE"},
    ),
    ("world", "info"): (
        ["world", "info", "synthetic:200:1", "--search", "capital"],
        {"world": "synthetic:200:1", "search": "capital"},
    ),
    ("synth", "crawlqa"): (
        ["synth", "crawlqa", "--world", "atlas:FR", "--n", "5", "--out", "q.jsonl"],
        {"world": "atlas:FR", "n": 5, "recipe": "crawlqa"},
    ),
    ("synth", "e2hqa"): (
        ["synth", "e2hqa", "--out", "q.jsonl", "--rounds", "0", "2"],
        {"world": "synthetic:2000:0", "rounds": [0, 2]},
    ),
    ("synth", "openseeker"): (
        [
            "synth",
            "openseeker",
            "--out",
            "q.jsonl",
            "--solver",
            "openai",
            "--llm-url",
            "http://127.0.0.1:8000/v1",
            "--llm-model",
            "qwen",
        ],
        {"solver": "openai", "llm_url": "http://127.0.0.1:8000/v1", "llm_model": "qwen"},
    ),
    ("synth", "sailorfog"): (
        ["synth", "sailorfog", "--out", "q.jsonl", "--seed", "3", "--writer", "openai", "--llm-model", "qwen"],
        {"seed": 3, "writer": "openai", "llm_model": "qwen"},
    ),
    ("synth", "webexplorer"): (
        ["synth", "webexplorer", "--out", "q.jsonl", "--explorer", "openai", "--llm-model", "gpt-4o"],
        {
            "explorer": "openai",
            "llm_model": "gpt-4o",
            "llm_url": "https://api.openai.com/v1",
            "llm_key_env": "OPENAI_API_KEY",
        },
    ),
    ("synth", "trajectories"): (
        [
            "synth",
            "trajectories",
            "--questions",
            "q.jsonl",
            "--world",
            "w",
            "--out",
            "t.jsonl",
            "--teacher",
            "openai",
            "--llm-model",
            "gpt-4o",
            "--max-context",
            "8192",
        ],
        {"teacher": "openai", "llm_model": "gpt-4o", "max_context": 8192},
    ),
    ("synth", "report"): (["synth", "report", "t.jsonl", "--no-plot"], {"file": "t.jsonl", "no_plot": True}),
    ("synth", "stats"): (["synth", "stats", "q.jsonl", "--world", "atlas"], {"file": "q.jsonl", "world": "atlas"}),
    ("sft",): (
        ["sft", "--config", "c.yaml", "--set", "optimizer.lr=1e-4", "--resume"],
        {"config": Path("c.yaml"), "set": ["optimizer.lr=1e-4"], "resume": True},
    ),
    ("export-hf",): (
        ["export-hf", "--model", "runs/x", "--out", "hf"],
        {"model": "runs/x", "out": "hf", "dtype": "bfloat16", "step": None},
    ),
    ("average",): (
        ["average", "a", "b", "--out", "soup", "--weights", "1", "3"],
        {"models": ["a", "b"], "weights": [1.0, 3.0]},
    ),
    ("rl",): (
        ["rl", "--config", "rl_tiny", "--set", "rl.steps=2"],
        {"config": CONFIGS_DIR / "rl_tiny.yaml", "set": ["rl.steps=2"]},
    ),
    ("plan",): (
        ["plan", "--config", "demo", "--mesh", "fsdp=-1,tensor=4", "--chips", "8", "--chip", "v6e"],
        {"config": CONFIGS_DIR / "demo.yaml", "chips": 8, "chip": "v6e"},
    ),
    ("rollout",): (
        [
            "rollout",
            "--model",
            "m",
            "--questions",
            "q.jsonl",
            "--out",
            "e.jsonl",
            "--k",
            "4",
            "--world",
            "synthetic:500",
            "--max-context",
            "4096",
        ],
        {"k": 4, "world": "synthetic:500", "max_context": 4096},
    ),
    ("eval",): (
        ["eval", "--config", "demo", "--model", "rl", "--k", "2", "--judge", "llm", "--llm-model", "gpt-4o"],
        {"config": CONFIGS_DIR / "demo.yaml", "model": "rl", "k": 2, "llm_model": "gpt-4o"},
    ),
    ("compare",): (
        ["compare", "--before", "e1", "e2", "--after", "e3", "--k", "1"],
        {"before": ["e1", "e2"], "after": ["e3"], "k": 1},
    ),
    ("pipeline",): (["pipeline", "--quick", "--until", "qa"], {"config": CONFIGS_DIR / "demo.yaml", "quick": True}),
    ("serve",): (
        ["serve", "--model", "runs/demo/rl/hf", "--port", "9000", "--max-context", "2048"],
        {"model": "runs/demo/rl/hf", "port": 9000, "max_len": 2048},
    ),
}


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """The command paths of `parser`, e.g. ("bench", "sft")."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        yield path
        return
    for name, sub in groups[0].choices.items():
        yield from leaf_commands(sub, (*path, name))


def test_every_subcommand_parses_a_realistic_command_line():
    parser = build_parser()
    assert set(leaf_commands(parser)) == set(COMMAND_LINES)  # a new command gets a line here
    for command, (argv, expected) in COMMAND_LINES.items():
        args = parser.parse_args(argv)
        assert callable(args.func), command
        assert {key: getattr(args, key) for key in expected} == expected, command


@pytest.mark.parametrize(
    "argv, old, new, dest, value",
    [
        (["rollout", "--model", "m", "--questions", "q", "--out", "o"], "--n", "--k", "k", 3),
        (["serve", "--model", "m"], "--max-len", "--max-context", "max_len", 64),
        (["bench", "serve"], "--max-len", "--max-context", "max_len", 64),
        (["bench", "rollout"], "--max-len", "--max-context", "max_context", 4096),
        (["eval"], "--judge-url", "--llm-url", "llm_url", "http://h/v1"),
        (["eval"], "--judge-model", "--llm-model", "llm_model", "gpt-4o"),
        (["eval"], "--judge-key-env", "--llm-key-env", "llm_key_env", "MY_KEY"),
        (
            ["synth", "trajectories", "--questions", "q", "--world", "w", "--out", "o"],
            "--base-url",
            "--llm-url",
            "llm_url",
            "http://h/v1",
        ),
        (
            ["synth", "trajectories", "--questions", "q", "--world", "w", "--out", "o"],
            "--api-key-env",
            "--llm-key-env",
            "llm_key_env",
            "MY_KEY",
        ),
        (["synth", "openseeker", "--out", "o"], "--base-url", "--llm-url", "llm_url", "http://h/v1"),
        (["synth", "webexplorer", "--out", "o"], "--model", "--llm-model", "llm_model", "gpt-4o"),
    ],
)
def test_an_old_flag_name_is_refused_naming_the_new_one(argv, old, new, dest, value, capsys):
    assert getattr(build_parser().parse_args([*argv, new, str(value)]), dest) == value
    error = usage_error([*argv, old, str(value)], capsys)
    assert error.startswith(f"jaxseeker {' '.join(argv[: 2 if argv[0] in ('bench', 'synth') else 1])}: error: ")
    assert f"unrecognized arguments: {old} {value}" in error  # not taken for a flag it abbreviates either


def test_a_required_flag_is_shown_so(capsys):
    assert usage_error(["export-hf", "--out", "hf"], capsys) == (
        "jaxseeker export-hf: error: the following arguments are required: --model"
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["export-hf", "--help"])
    assert "--model RUN --out OUT" in capsys.readouterr().out  # not [--model RUN]


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["plan", "--config", "demo", "--chps", "3"],
            "jaxseeker plan: error: unrecognized arguments: --chps 3 (did you mean '--chips'?)",
        ),
        (
            ["rollout", "--model", "m", "--questions", "q", "--out", "o", "--max-contxt=64"],
            "jaxseeker rollout: error: unrecognized arguments: --max-contxt=64 (did you mean '--max-context'?)",
        ),
        (["rolout"], "jaxseeker: error: unknown command 'rolout' (did you mean 'rollout'?)"),
        (["bench", "sftt"], "jaxseeker bench: error: unknown command 'sftt' (did you mean 'sft'?)"),
        (
            ["synth", "sailorfgo", "--out", "q"],
            "jaxseeker synth: error: unknown command 'sailorfgo' (did you mean 'sailorfog'?)",
        ),
        (
            ["plan", "--config", "demo", "--chip", "v5"],
            "jaxseeker plan: error: argument --chip: invalid choice: 'v5' "
            "(did you mean 'v5p'?); choose from h100, h200, v4, v5e, v5p, v6e",
        ),
        (
            ["world", "info", "synthtic:200"],
            "jaxseeker world info: error: argument WORLD: unknown world kind 'synthtic' in "
            "'synthtic:200' (did you mean 'synthetic'?); a world is a saved world "
            "directory (`jaxseeker world build --out`), or synthetic[:SIZE[:SEED]], "
            "pages:FILE.jsonl or atlas[:FR,DE,…] (built once, then read from the cache)",
        ),
    ],
)
def test_a_misspelling_is_one_line_naming_the_closest_name(argv, message, capsys):
    assert usage_error(argv, capsys) == message
    assert "usage:" not in capsys.readouterr().err  # the command's one line, not the top-level usage


def test_a_misspelled_config_key_or_file_names_the_closest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--config", "demo", "--set", "sft.train.stepz=3"])
    assert str(exit_.value.code).startswith(  # the override is to blame, not the recipe's file
        "jaxseeker plan: --set sft.train.stepz: unknown keys ['stepz'] (did you mean 'steps'?); known keys: ["
    )
    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--config", "demo", "--set", "optimizer.lrr=1"])
    assert str(exit_.value.code).startswith(
        "jaxseeker plan: --set optimizer.lrr: unknown sections ['optimizer']; known: ['eval', 'expert', 'extend'"
    )
    with pytest.raises(SystemExit) as exit_:
        main(["sft", "--config", "demo"])
    assert str(exit_.value.code).startswith(
        "jaxseeker sft: demo: a pipeline recipe, for `jaxseeker pipeline --config demo`; this command reads sft "
        "recipes (shipped: "
    ) and "sft_tiny" in str(exit_.value.code)
    with pytest.raises(
        SystemExit,
        match=r"^jaxseeker plan: configs/demo\.yaml: no such file \(did you mean the "
        r"shipped recipe 'demo'\?\)$",
    ):
        main(["plan", "--config", "configs/demo.yaml"])  # the repository path, typed outside the repository


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"jaxseeker {__version__}\n"


def test_help_shows_defaults_but_not_empty_ones(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["rollout", "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "context tokens of an episode: prompt, turns and tool results (default 32768, or the model's" in shown
    assert "--tools TOOLS" in shown and "(default search,visit)" in shown  # the help's own words, not twice
    assert "--seed SEED default: 0" in shown  # a flag without help still shows its default
    assert "default: None" not in shown and "default: False" not in shown


def test_a_config_by_name_is_the_shipped_recipe_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("demo", "demo.yaml"):
        assert build_parser().parse_args(["plan", "--config", name]).config == CONFIGS_DIR / "demo.yaml"
    (tmp_path / "mine.yaml").write_text("name: mine\n")
    assert build_parser().parse_args(["plan", "--config", "mine.yaml"]).config == Path("mine.yaml")
    assert (CONFIGS_DIR / "demo.yaml").is_file() and CONFIGS_DIR.parent.name == "jaxseeker"


def test_info_prints_parameters_and_flops(tmp_path, capsys):
    cfg = model.ModelConfig.tiny("qwen3")
    model.save_hf(model.init_params(cfg, jax.random.key(0)), cfg, tmp_path)
    assert main(["info", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out
    assert f'"parameters": {model.count_params(cfg)}' in out and '"forward_flops_per_token"' in out


def test_bad_input_ends_the_command_with_one_line_naming_the_file_and_key(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("sft: {train: {steps: three}}\n")
    with pytest.raises(SystemExit, match=rf"^jaxseeker pipeline: {path}: sft\.train\.steps: expected int, got 'three'"):
        main(["pipeline", "--config", str(path)])
    with pytest.raises(SystemExit, match=r"^jaxseeker pipeline: --set 'sft\.train\.steps': expected key=value"):
        main(["pipeline", "--config", str(path), "--set", "sft.train.steps"])
    with pytest.raises(SystemExit, match=rf"^jaxseeker pipeline: {tmp_path / 'nope.yaml'}: no such file$"):
        main(["pipeline", "--config", str(tmp_path / "nope.yaml")])
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model_type": "gpt9"}')
    with pytest.raises(
        SystemExit,
        match=r"^jaxseeker info: .*config\.json: unsupported architecture "
        r"model_type='gpt9'",
    ):
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


def test_a_model_is_read_by_registered_name_or_gguf_file_and_its_context_is_checked(tmp_path, monkeypatch, capsys):
    from gguf_support import hf_config, hf_state, write_gguf

    monkeypatch.setenv("JAXSEEKER_CACHE", str(tmp_path / "cache"))  # where a GGUF is imported, once
    config = hf_config("llama")
    gguf = write_gguf(tmp_path / "tiny-chat.gguf", hf_state(config), config)
    assert main(["info", str(gguf), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["hidden_size"], info["layers"]) == (config.hidden_size, config.num_hidden_layers)
    trajectory = {"messages": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello."}]}
    (tmp_path / "t.jsonl").write_text(json.dumps(trajectory) + "\n")
    assert main(["data", "inspect", str(tmp_path / "t.jsonl"), "--tokenizer", str(gguf)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 1 and 0 < summary["trained_tokens"] < summary["tokens"]
    (tmp_path / "q.jsonl").write_text(json.dumps({"question": "Where?", "answer": "here"}) + "\n")
    argv = ["rollout", "--model", str(gguf), "--questions", str(tmp_path / "q.jsonl"), "--world", "synthetic:50"]
    limit = config.max_position_embeddings
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--out", str(tmp_path / "e.jsonl"), "--max-context", str(limit + 1)])
    assert str(exit_.value.code) == (
        f"jaxseeker rollout: --max-context {limit + 1} exceeds the model's max_position_embeddings ({limit})"
    )
    assert not (tmp_path / "e.jsonl").exists()
