"""`bench sft`'s jaxseeker side on a tiny model: blocked attention, the trained-tokens-only loss and the YNNPACK
option train like the reference step; XLA options this jaxlib rejects are dropped with a note."""

import numpy as np
import pytest
from cli_support import usage_error

from jaxseeker import model
from jaxseeker.cli import build_parser
from jaxseeker.data import tokenize_chat, train_tokenizer
from jaxseeker.train.sft.bench import SHAPES, YNN_DOT, TooFewSteps, bench_jax, run_bench, synthetic_trajectories


def examples(n: int = 12) -> list[tuple[np.ndarray, np.ndarray]]:
    """`n` synthetic agent trajectories, tokenized with a small tokenizer trained on them."""
    convs = synthetic_trajectories(n)
    tok = train_tokenizer([m["content"] for c in convs for m in c], 400)
    return [tokenize_chat(c, tok) for c in convs]


def test_bench_options_train_like_the_reference_and_rejected_options_are_dropped(capsys):
    data = examples()
    cfg = model.ModelConfig.tiny("qwen2")
    run = dict(seq_len=256, rows=2, num_bins=8, chunk_size=64)
    bogus = {"xla_cpu_experimental_ynn_fusion_type": "NOT_A_FUSION_TYPE"}
    ref = bench_jax(data, cfg, **run, compiler_options=bogus)
    assert ref["compiler_options"] == {}
    assert "rejects compiler options" in capsys.readouterr().out
    fast = bench_jax(data, cfg.replace(attention_impl="blocked"), **run, compiler_options=YNN_DOT)
    assert fast["compiler_options"] == YNN_DOT  # jax 0.10's XLA:CPU knows the option
    assert ref["steps"] >= 3
    np.testing.assert_allclose(fast["loss"], ref["loss"], rtol=1e-5)  # the loss after the last AdamW step


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--trajectories", "1"], "--trajectories: must be an integer >= 2, got 1"),
        (["--seq-len", "0"], "--seq-len: must be an integer >= 1, got 0"),
        (["--rows", "0"], "--rows: must be an integer >= 1, got 0"),
        (["--hf-batch", "-1"], "--hf-batch: must be an integer >= 1, got -1"),
        (["--bins", "0"], "--bins: must be an integer >= 1, got 0"),
        (["--loss-chunk", "0"], "--loss-chunk: must be an integer >= 1, got 0"),
        (["--lora-rank", "-1"], "--lora-rank: must be an integer >= 0, got -1"),
        (["--lora-alpha", "0"], "--lora-alpha: must be a number > 0, got 0"),
    ],
)
def test_bench_sft_flags_out_of_range_are_usage_errors(argv, message, capsys):
    assert usage_error(["bench", "sft", *argv], capsys) == f"jaxseeker bench sft: error: argument {message}"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--trajectories", "10"], "--trajectories (10) must be at least twice --hf-batch (8)"),
        (["--trajectories", "20", "--rows", "12"], "--trajectories (20) must be at least twice --rows (12)"),
    ],
)
def test_bench_sft_too_few_trajectories_for_two_steps_end_before_the_run(argv, message):
    args = build_parser().parse_args(["bench", "sft", *argv])
    with pytest.raises(SystemExit, match="^jaxseeker bench sft: ") as exit_:
        args.func(args)
    assert message in str(exit_.value.code)


def test_bench_jax_needs_two_steps_of_packed_rows():
    with pytest.raises(TooFewSteps, match="make 0 step"):
        bench_jax(examples(4), model.ModelConfig.tiny("qwen2"), seq_len=100_000, rows=2)


def test_bench_sft_runs_full_and_lora_fine_tuning_on_both_sides(capsys):
    tiny = model.ModelConfig.tiny("llama", vocab_size=2048, tie_word_embeddings=True)  # the tokenizer's 2,000 ids
    result = run_bench(
        n_trajectories=8,
        seq_len=512,
        rows=2,
        hf_batch=2,
        num_bins=8,
        chunk_size=64,
        shape=tiny,
        lora_rank=4,
        lora_alpha=8.0,
    )
    for side in ("jaxseeker", "jaxseeker_lora", "hf_torch", "hf_peft_lora"):
        assert result[side]["steps"] >= 1 and result[side]["useful_tok_s"] > 0, side
    assert result["jaxseeker_lora"]["loss"] != result["jaxseeker"]["loss"]  # a different model trained
    table = capsys.readouterr().out.splitlines()
    labels = [
        line[:18].strip() for line in table[table.index(next(row for row in table if "useful tok/s" in row)) + 1 :][:4]
    ]
    assert labels == ["jaxseeker", "jaxseeker LoRA", "HF+torch", "HF+torch PEFT LoRA"]
    assert any(
        line.startswith("ratio LoRA: jaxseeker LoRA vs jaxseeker full") and "vs PEFT LoRA" in line for line in table
    )


def test_bench_sft_knows_the_smollm2_shape_and_names_unknown_ones():
    cfg = model.ModelConfig(**SHAPES["smollm2-135m"])
    assert 134e6 < model.count_params(cfg) < 135e6  # SmolLM2-135M: 134,515,008 parameters, embeddings tied
    args = build_parser().parse_args(["bench", "sft", "--shape", "gpt2"])
    with pytest.raises(SystemExit, match=r"--shape 'gpt2' is not one of \['qwen2-40m', 'smollm2-135m'\]"):
        args.func(args)
