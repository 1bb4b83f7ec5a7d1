"""`bench sft`'s jaxseeker side on a tiny model: blocked attention, the trained-tokens-only loss and the YNNPACK
option train like the reference step; XLA options this jaxlib rejects are dropped with a note."""

import numpy as np

from jaxseeker import model
from jaxseeker.data import tokenize_chat, train_tokenizer
from jaxseeker.train.bench import YNN_DOT, bench_jax, synthetic_trajectories


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
