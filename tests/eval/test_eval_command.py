"""`jaxseeker eval` on a saved model that always answers "nine": judged, resumed, compared with a baseline."""

import argparse
import json
import subprocess
import sys

import jax
import pytest
from cli_support import usage_error

from jaxseeker import model
from jaxseeker.agent import prompts, tool_calling_model
from jaxseeker.agent.scripted import bigram_params
from jaxseeker.cli import build_parser, main
from jaxseeker.data import train_tokenizer
from jaxseeker.errors import InputError
from jaxseeker.eval.command import add_parser
from jaxseeker.parallel.cpu_devices import fake_cpu_devices_env
from jaxseeker.train import RewardConfig
from jaxseeker.train.recipe import RecipeError

QUESTIONS = [
    {"id": "bridge", "question": "How many arches has the bridge of Velmora?", "answer": "nine", "level": 1},
    {"id": "tower", "question": "How many floors has the tower of Pirn?", "answer": "ten", "level": 2},
]
PAGES = [
    {"url": "https://w.test/bridge", "title": "Velmora bridge", "text": "The bridge has nine arches.", "links": []}
]


def cli(argv):
    parser = argparse.ArgumentParser(prog="jaxseeker")
    add_parser(parser.add_subparsers(required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def answering_model(tmp_path_factory):
    """An HF model directory whose every turn is `<think> the</think><answer>nine</answer>`."""
    texts = [prompts.SYSTEM_INTRO, prompts.TOOLS_SECTION] + [q["question"] for q in QUESTIONS] * 4
    tokenizer = train_tokenizer(texts + ["<think> the</think><answer>nine</answer>"] * 8, 600)
    encode = prompts.Renderer(tokenizer).encode
    chain = [
        encode("<|im_start|>assistant\n")[-1],
        *encode("<think> the"),
        *encode("</think><answer>nine</answer><|im_end|>"),
    ]
    cfg = model.ModelConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        head_dim=32,
        tie_word_embeddings=False,
    )
    params = bigram_params(cfg, {a: {b: 1.0} for a, b in zip(chain, chain[1:])})
    path = tmp_path_factory.mktemp("model")
    model.save_hf(params, cfg, path)
    tokenizer.save_pretrained(str(path))
    return path


def test_eval_judges_resumes_and_compares_with_a_baseline(answering_model, tmp_path, capsys):
    questions, pages = tmp_path / "questions.jsonl", tmp_path / "pages.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    pages.write_text("".join(json.dumps(p) + "\n" for p in PAGES))
    out = tmp_path / "eval"
    common = [
        "--model",
        str(answering_model),
        "--questions",
        str(questions),
        "--corpus",
        str(pages),
        "--out",
        str(out),
        "--k",
        "2",
        "--temperature",
        "1.0",
        "--top-p",
        "1.0",
        "--slots",
        "4",
        "--max-context",
        "1024",
        "--max-turn-tokens",
        "64",
        "--max-tool-calls",
        "2",
        "--prompt",
        "compact",
        "--no-progress",
    ]

    assert cli(["eval", *common, "--limit", "1"]) == 0
    assert "| all | 1 | 100.0% |" in capsys.readouterr().out

    baseline = tmp_path / "baseline"
    baseline.mkdir()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (baseline / "results.jsonl").write_text(
        "".join(json.dumps({**r, "question_id": q["id"], "correct": False}) + "\n" for q in QUESTIONS for r in rows)
    )
    assert cli(["eval", *common, "--baseline", str(baseline)]) == 0  # the first question is not rolled out again
    printed = capsys.readouterr().out
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["question_id"], r["prediction"], r["correct"]) for r in rows] == [("bridge", "nine", True)] * 2 + [
        ("tower", "nine", False)
    ] * 2
    assert "| all | 2 | 50.0% |" in printed and (out / "report" / "pass_at_1_by_level.png").exists()
    assert (
        "1 questions gained, 0 lost, 1 unchanged; pass@1 +50.0 points (95% CI +0.0 to +100.0; sign test "
        "p = 1.000, permutation p = 1.000)"
    ) in printed
    assert json.loads((out / "change.json").read_text())["gained"] == 1


def test_eval_with_answer_submit_judges_the_last_submission_as_rl_scores_it(tmp_path):
    """A model that submits "nine arches" every turn and never answers: against "nine" its F1 of 0.67 passes
    --submit-threshold 0.6 (Correct!, which ends the episode); against "ten" it fails twice until the tool calls run
    out. The last submission is the prediction, the episodes count as well-formed, as RL scores them, and their
    submissions count among their tool calls."""
    tokenizer, cfg, params = tool_calling_model(
        '{"name": "answer_submit", "arguments": {"answer": "nine arches"}}', mean_think_tokens=4.0
    )
    model.save_hf(params, cfg, tmp_path / "model")
    tokenizer.save_pretrained(str(tmp_path / "model"))
    questions, pages = tmp_path / "questions.jsonl", tmp_path / "pages.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    pages.write_text("".join(json.dumps(p) + "\n" for p in PAGES))

    assert (
        cli(
            [
                "eval",
                "--model",
                str(tmp_path / "model"),
                "--questions",
                str(questions),
                "--corpus",
                str(pages),
                "--out",
                str(tmp_path / "eval"),
                "--tools",
                "answer_submit",
                "--submit-threshold",
                "0.6",
                "--judge",
                "f1",
                "--f1-threshold",
                "0.6",
                "--k",
                "1",
                "--temperature",
                "1.0",
                "--top-p",
                "1.0",
                "--slots",
                "2",
                "--max-context",
                "1024",
                "--max-turn-tokens",
                "64",
                "--max-tool-calls",
                "2",
                "--prompt",
                "compact",
                "--no-progress",
            ]
        )
        == 0
    )
    rows = sorted(
        (json.loads(line) for line in (tmp_path / "eval" / "results.jsonl").read_text().splitlines()),
        key=lambda r: r["question_id"],
    )
    assert [
        (r["question_id"], r["termination"], r["submissions"], r["prediction"], r["correct"], r["format_ok"])
        for r in rows
    ] == [
        (
            "bridge",
            "answer",
            [{"answer": "nine arches", "feedback": "Correct! The F1 score is 0.67."}],
            "nine arches",
            True,
            True,
        ),
        (
            "tower",
            "max_tool_calls",
            [{"answer": "nine arches", "feedback": "Incorrect! The F1 score is 0.00."}] * 2,
            "nine arches",
            False,
            True,
        ),
    ]
    assert [r["tool_calls"] for r in rows] == [
        {"search": 0, "visit": 0, "python": 0, "answer_submit": n} for n in (1, 2)
    ]
    assert "Tools: answer_submit(answer)" in rows[0]["messages"][0]["content"]


def test_eval_tools_default_to_search_and_visit_and_the_rl_submit_threshold():
    args = build_parser().parse_args(EVAL_ARGS)
    assert args.tools is None and args.submit_threshold == RewardConfig().submit_threshold


def test_eval_names_what_it_lacks(tmp_path):
    with pytest.raises(
        SystemExit, match="give --config \\(for --model sft\\), --questions, --out, --world or --corpus"
    ):
        cli(["eval", "--model", "sft"])
    with pytest.raises(SystemExit, match=f"{tmp_path} holds no HF model"):
        cli(
            ["eval", "--model", str(tmp_path), "--questions", "q.jsonl", "--out", str(tmp_path), "--world", "synthetic"]
        )
    with pytest.raises(InputError, match=r"^model 'smollm9': neither a registered name \(smollm2-135m-instruct\)"):
        cli(["eval", "--model", "smollm9", "--questions", "q.jsonl", "--out", str(tmp_path), "--world", "synthetic"])


def test_eval_of_a_pipeline_run_takes_its_config(answering_model, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "tiny"
    (run / "qa").mkdir(parents=True)
    (run / "qa" / "test.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    (run / "sft").mkdir()
    (run / "sft" / "hf").symlink_to(answering_model)
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "name: tiny\nworld: {source: synthetic, size: 600}\n"
        "eval: {k: 1, slots: 2, max_context: 1024, max_tool_calls: 2, max_tokens_per_turn: 64, "
        "prompt: compact}\n"
    )

    with pytest.raises(RecipeError, match="eval.k is 3 with eval.temperature 0"):  # greedy: one rollout a question
        cli(["eval", "--config", str(config), "--set", "eval.k=3"])
    with pytest.raises(SystemExit, match="--k 3 with temperature 0 repeats one greedy rollout 3 times"):
        cli(["eval", "--config", str(config), "--k", "3"])
    assert cli(["eval", "--config", str(config), "--no-progress"]) == 0  # greedy, as eval.temperature
    rows = [json.loads(line) for line in (run / "eval_sft_t0" / "results.jsonl").read_text().splitlines()]
    assert [(r["question_id"], r["correct"]) for r in rows] == [("bridge", True), ("tower", False)]
    assert len(rows[0]["messages"][0]["content"]) < 600  # the compact system prompt, not the tool schemas
    assert "runs/tiny/eval_sft_t0" in capsys.readouterr().out
    (run / "extend").mkdir()
    (run / "extend" / "hf").symlink_to(answering_model)  # the policy after the pipeline's context extension
    assert cli(["eval", "--config", str(config), "--model", "extend", "--no-progress"]) == 0
    assert (run / "eval_extend_t0" / "results.jsonl").exists()


def _results(path, verdicts):
    """A results file of hand-judged rollouts: {question: [correct, …]}, question "a" level 1, "b" level 2."""
    path.write_text(
        "".join(
            json.dumps(
                {
                    "question_id": q,
                    "round": r,
                    "correct": c,
                    "judge_parse_error": False,
                    "termination": "answer",
                    "tool_calls": {"search": 1},
                    "answer_len": 1,
                    "think_len": 5,
                    "format_ok": True,
                    "level": 1 + (q == "b"),
                }
            )
            + "\n"
            for q, cs in verdicts.items()
            for r, c in enumerate(cs)
        )
    )
    return path


def test_compare_pools_the_seeds_of_each_side(tmp_path, capsys):
    seed0 = _results(tmp_path / "sft_s0.jsonl", {"a": [True, False], "b": [False, False]})
    (tmp_path / "sft_s1").mkdir()
    _results(tmp_path / "sft_s1" / "results.jsonl", {"a": [False, False], "b": [False, True]})
    after = _results(tmp_path / "rl.jsonl", {"a": [True, True], "b": [False, True]})
    out = tmp_path / "change.json"
    assert (
        cli(["compare", "--before", str(seed0), str(tmp_path / "sft_s1"), "--after", str(after), "--out", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    change = json.loads(out.read_text())
    assert change["rollouts"] == [4, 2] and (change["gained"], change["lost"]) == (2, 0)
    assert change["delta_pass_at_1"] == pytest.approx(3 / 4 - 2 / 8)  # pooled before: 2 of 8 right
    assert printed.startswith(
        "2 questions, 4 rollouts a question before (2 evals pooled), 2 after (1 eval): "
        "2 questions gained, 0 lost, 0 unchanged; pass@1 +50.0 points"
    )
    assert "  level 2 (1 questions): 1 questions gained" in printed
    assert json.loads(out.read_text())["by_level"]["1"]["delta_pass_at_1"] == pytest.approx(1.0 - 0.25)
    assert cli(["compare", "--before", str(seed0), "--after", str(after), "--k", "1"]) == 0
    assert "1 rollouts a question before (1 eval)" in capsys.readouterr().out


def test_compare_names_a_missing_eval_and_other_questions(tmp_path):
    a = _results(tmp_path / "a.jsonl", {"a": [True], "b": [False]})
    other = _results(tmp_path / "other.jsonl", {"a": [True], "c": [False]})
    with pytest.raises(SystemExit, match="nowhere is neither a results JSONL nor an eval directory"):
        cli(["compare", "--before", str(tmp_path / "nowhere"), "--after", str(a)])
    with pytest.raises(SystemExit, match="other.jsonl holds other questions than .*a.jsonl"):
        cli(["compare", "--before", str(a), str(other), "--after", str(a)])
    with pytest.raises(SystemExit, match="before and after hold different questions"):
        cli(["compare", "--before", str(a), "--after", str(other)])


def test_eval_on_a_data_by_tensor_mesh_writes_what_one_device_writes(tmp_path):
    """A random policy, greedy: sharded over 4 fake CPU devices (`--mesh`), every rollout is token for token
    the one-device rollout."""
    texts = [prompts.SYSTEM_INTRO, prompts.TOOLS_SECTION] + [q["question"] for q in QUESTIONS] * 4
    tokenizer = train_tokenizer(texts + [p["text"] for p in PAGES] * 4, 500)
    cfg = model.ModelConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        initializer_range=0.3,
    )
    policy = tmp_path / "policy"
    model.save_hf(model.init_params(cfg, jax.random.PRNGKey(0)), cfg, policy)
    tokenizer.save_pretrained(str(policy))
    questions, pages = tmp_path / "questions.jsonl", tmp_path / "pages.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    pages.write_text("".join(json.dumps(p) + "\n" for p in PAGES))
    common = [
        "eval",
        "--model",
        str(policy),
        "--questions",
        str(questions),
        "--corpus",
        str(pages),
        "--temperature",
        "0",
        "--slots",
        "2",
        "--max-context",
        "512",
        "--max-turn-tokens",
        "48",
        "--max-tool-calls",
        "2",
        "--prompt",
        "compact",
        "--no-progress",
    ]

    assert cli([*common, "--out", str(tmp_path / "one")]) == 0
    sharded = subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxseeker.cli",
            *common,
            "--out",
            str(tmp_path / "mesh"),
            "--mesh",
            "data=2,fsdp=1,tensor=2",
        ],
        env=fake_cpu_devices_env(4),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    assert "on a data=2,fsdp=1,tensor=2,expert=1 mesh of 4 devices" in sharded.stdout

    def rollouts(name):
        rows = [json.loads(line) for line in (tmp_path / name / "results.jsonl").read_text().splitlines()]
        return sorted((r["question_id"], r["termination"], r["tokens"], r["messages"]) for r in rows)

    one = rollouts("one")
    assert len(one) == 2 and all(tokens > 0 for _, _, tokens, _ in one)
    assert rollouts("mesh") == one


def test_eval_refuses_a_mesh_it_cannot_read(capsys):
    with pytest.raises(SystemExit):
        cli(["eval", "--model", "m", "--mesh", "tensor=2,pipeline=4"])
    assert (
        "argument --mesh: 'tensor=2,pipeline=4': expected axis=size with axes ['data', 'fsdp', 'tensor', "
        "'expert', 'context'], got 'pipeline=4'" in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        cli(["eval", "--model", "m", "--mesh", f"fsdp=1,tensor={jax.device_count() + 1}"])
    assert f"argument --mesh: 'fsdp=1,tensor={jax.device_count() + 1}': MeshConfig " in capsys.readouterr().err


def test_eval_names_a_bad_questions_file_and_baseline(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "a", "answer": "b"}\n{"question": "c"}\n')
    common = [
        "eval",
        "--model",
        str(tmp_path),
        "--questions",
        str(questions),
        "--out",
        str(tmp_path / "out"),
        "--corpus",
        str(tmp_path / "pages.jsonl"),
    ]
    with pytest.raises(SystemExit, match=r"^jaxseeker eval: .*q\.jsonl:2: no answer field"):
        main(common)  # the console script's entry point ends a bad file's run in one line
    with pytest.raises(SystemExit, match=r"^jaxseeker eval: .*nowhere is neither a results JSONL nor an eval dir"):
        cli([*common, "--baseline", str(tmp_path / "nowhere")])  # before the model loads and the rollouts run


EVAL_ARGS = ["eval", "--model", "m", "--questions", "q.jsonl", "--out", "o", "--corpus", "p.jsonl"]


@pytest.mark.parametrize(
    "argv, message",
    [
        ([*EVAL_ARGS, "--k", "0"], "--k: must be an integer >= 1, got 0"),
        ([*EVAL_ARGS, "--temperature", "-1"], "--temperature: must be a number >= 0, got -1"),
        ([*EVAL_ARGS, "--top-p", "0"], "--top-p: must be a number > 0 and <= 1, got 0"),
        ([*EVAL_ARGS, "--top-p", "1.01"], "--top-p: must be a number > 0 and <= 1, got 1.01"),
        ([*EVAL_ARGS, "--seed", "-1"], "--seed: must be an integer >= 0 and <= 2147483647, got -1"),
        ([*EVAL_ARGS, "--slots", "0"], "--slots: must be an integer >= 1, got 0"),
        ([*EVAL_ARGS, "--max-context", "1"], "--max-context: must be an integer >= 2, got 1"),
        ([*EVAL_ARGS, "--max-turn-tokens", "0"], "--max-turn-tokens: must be an integer >= 1, got 0"),
        ([*EVAL_ARGS, "--max-tool-calls", "0"], "--max-tool-calls: must be an integer >= 1, got 0"),
        ([*EVAL_ARGS, "--limit", "-1"], "--limit: must be an integer >= 0, got -1"),
        ([*EVAL_ARGS, "--f1-threshold", "0"], "--f1-threshold: must be a number > 0 and <= 1, got 0"),
        ([*EVAL_ARGS, "--f1-threshold", "1.5"], "--f1-threshold: must be a number > 0 and <= 1, got 1.5"),
        ([*EVAL_ARGS, "--submit-threshold", "0"], "--submit-threshold: must be a number > 0 and <= 1, got 0"),
        ([*EVAL_ARGS, "--submit-threshold", "1.5"], "--submit-threshold: must be a number > 0 and <= 1, got 1.5"),
        (
            [*EVAL_ARGS, "--tools", "search,answer"],
            ("--tools: unknown 'answer' in 'search,answer'; known: search, visit, python, answer_submit"),
        ),
        (["compare", "--before", "a", "--after", "b", "--k", "0"], "--k: must be an integer >= 1, got 0"),
    ],
)
def test_eval_and_compare_flags_out_of_range_are_usage_errors(argv, message, capsys):
    assert usage_error(argv, capsys) == f"jaxseeker {argv[0]}: error: argument {message}"


def test_eval_dry_run_prints_what_it_would_use_and_writes_nothing(tmp_path, monkeypatch, capsys):
    """`--dry-run` resolves the pipeline recipe's paths and settings, as a run would, with no model there to load."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "tiny.yaml"
    config.write_text("name: tiny\nworld: {source: synthetic, size: 600}\neval: {k: 1, slots: 2, max_context: 1024}\n")
    assert cli(["eval", "--config", str(config), "--temperature", "0.5", "--k", "3", "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == (
        "would evaluate runs/tiny/sft/hf on runs/tiny/qa/test.jsonl in synthetic:600:0: k=3, temperature 0.5, "
        "top-p 1, 1024 context tokens, 2 slots, judge em; results in runs/tiny/eval_sft_t0.5"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.yaml"]
