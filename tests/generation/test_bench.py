"""`jaxseeker bench generate` on a tiny shape: it runs end to end and both sides produce the same tokens."""

import json

import pytest
from cli_support import usage_error

from jaxseeker.cli import build_parser

TINY = [
    "--hidden-size",
    "32",
    "--num-layers",
    "2",
    "--num-heads",
    "4",
    "--num-kv-heads",
    "2",
    "--intermediate-size",
    "64",
    "--vocab-size",
    "256",
    "--batch",
    "2",
    "--prompt-len",
    "8",
    "--new-tokens",
    "8",
    "--steps-per-call",
    "4",
    "--repeats",
    "1",
]


def test_bench_generate_command_reports_both_rates(capsys):
    args = build_parser().parse_args(["bench", "generate", *TINY, "--json"])
    assert args.func(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["batch"], result["new_tokens"], result["generated_tokens"]) == (2, 8, 16)
    assert result["hf_tok_s"] > 0 and result["ours_tok_s"] > 0
    assert abs(result["speedup"] - result["ours_tok_s"] / result["hf_tok_s"]) < 1e-9
    assert result["rows_equal"] == 1.0
    assert result["roofline_s"] > 0 and result["matmul_gflop_s"] > 0 and result["bandwidth_gb_s"] > 0
    assert abs(result["ours_of_roofline"] - result["roofline_s"] / result["ours_s"]) < 1e-9
    assert result["compiled_programs"] >= 2  # a prefill and a decode shape at least
    assert result["ours_decode_calls"] == 2  # 8 new tokens, 4 steps a call
    assert 0 < result["ours_host_s"] < result["ours_s"]


def test_bench_generate_times_a_group_of_rollouts_with_and_without_sharing_their_prompt(capsys):
    """Two prompts of 24 tokens, two rows each (an RL step's groups): the engine runs once copying each group's
    prompt from its first row and once prefilling every row, with the same tokens as HF."""
    args = build_parser().parse_args(
        ["bench", "generate", *TINY, "--batch", "4", "--group-size", "2", "--prompt-len", "24"]
    )
    assert args.func(args) == 0
    table = capsys.readouterr().out
    assert "batch 4 (2 a prompt), prompt 24" in table
    assert "Engine, no sharing" in table and "rows with identical greedy tokens: 100%" in table


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--hidden-size", "0"], "--hidden-size: must be an integer >= 1, got 0"),
        (["--num-layers", "-1"], "--num-layers: must be an integer >= 1, got -1"),
        (["--num-heads", "0"], "--num-heads: must be an integer >= 1, got 0"),
        (["--num-kv-heads", "0"], "--num-kv-heads: must be an integer >= 1, got 0"),
        (["--intermediate-size", "0"], "--intermediate-size: must be an integer >= 1, got 0"),
        (["--vocab-size", "1"], "--vocab-size: must be an integer >= 2, got 1"),
        (["--batch", "0"], "--batch: must be an integer >= 1, got 0"),
        (["--prompt-len", "0"], "--prompt-len: must be an integer >= 1, got 0"),
        (["--new-tokens", "0"], "--new-tokens: must be an integer >= 1, got 0"),
        (["--steps-per-call", "0"], "--steps-per-call: must be an integer >= 1, got 0"),
        (["--repeats", "0"], "--repeats: must be an integer >= 1, got 0"),
        (["--seed", "-1"], "--seed: must be an integer >= 0, got -1"),
        (["--batch", "two"], "--batch: must be an integer >= 1, got 'two'"),
    ],
)
def test_bench_generate_flags_out_of_range_are_usage_errors(argv, message, capsys):
    err = usage_error(["bench", "generate", *argv], capsys)
    assert err == f"jaxseeker bench generate: error: argument {message}"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--num-heads", "6", "--num-kv-heads", "4"], "--num-heads (6) must be a multiple of --num-kv-heads (4)"),
        (["--batch", "6", "--group-size", "4"], "--batch 6 is not a multiple of --group-size 4"),
        (
            ["--hidden-size", "24", "--num-heads", "8"],
            "the head size, rotated in halves by RoPE) must be even and >= 2, got 24 // 8 = 3",
        ),
    ],
)
def test_bench_generate_heads_that_make_no_model_end_before_the_run(argv, message):
    args = build_parser().parse_args(["bench", "generate", *argv])
    with pytest.raises(SystemExit, match="^jaxseeker bench generate: ") as exit_:
        args.func(args)
    assert message in str(exit_.value.code)


def test_bench_generate_runs_a_saved_checkpoint_on_both_sides(tmp_path, capsys):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    args = build_parser().parse_args(
        [
            "bench",
            "generate",
            "--hf-path",
            str(tmp_path),
            "--batch",
            "2",
            "--prompt-len",
            "8",
            "--new-tokens",
            "8",
            "--repeats",
            "1",
            "--json",
        ]
    )
    assert args.func(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["model"], result["vocab_size"], result["num_layers"]) == (str(tmp_path), 300, 2)
    shape = ("hidden_size", "num_heads", "num_kv_heads", "intermediate_size")
    assert tuple(result[k] for k in shape) == (32, 4, 2, 64)  # the model's, not the unused shape flags'
    assert result["rows_equal"] == 1.0  # the real checkpoint's greedy tokens, as transformers decodes them


def test_bench_generate_names_a_model_it_cannot_find(tmp_path):
    from jaxseeker.cli import main

    with pytest.raises(SystemExit, match=r"^jaxseeker bench: model '.*missing': neither a registered name"):
        main(["bench", "generate", "--model", str(tmp_path / "missing")])
