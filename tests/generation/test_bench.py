"""`jaxseeker bench generate` on a tiny shape: it runs end to end and both sides produce the same tokens."""

import json

from jaxseeker.cli import build_parser

TINY = ["--hidden-size", "32", "--num-layers", "2", "--num-heads", "4", "--num-kv-heads", "2",
        "--intermediate-size", "64", "--vocab-size", "256", "--batch", "2", "--prompt-len", "8",
        "--new-tokens", "8", "--steps-per-call", "4", "--repeats", "1"]


def test_bench_generate_command_reports_both_rates(capsys):
    args = build_parser().parse_args(["bench", "generate", *TINY, "--json"])
    assert args.func(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["batch"], result["new_tokens"], result["generated_tokens"]) == (2, 8, 16)
    assert result["hf_tok_s"] > 0 and result["ours_tok_s"] > 0
    assert abs(result["speedup"] - result["ours_tok_s"] / result["hf_tok_s"]) < 1e-9
    assert result["rows_equal"] == 1.0
