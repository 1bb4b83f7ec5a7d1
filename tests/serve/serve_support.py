"""What the serve tests share: a tiny random HF policy (transformers config classes) and the engine shape."""

from __future__ import annotations

import random
from pathlib import Path

from jaxseeker.data import train_tokenizer
from jaxseeker.serve import EngineShape

MODEL_NAME = "tiny-policy"
# One engine shape for every test (and for generate's reference engine): compiled once per process.
SHAPE = EngineShape(slots=4, max_len=128, steps_per_call=4, prefill_chunk=128, max_queue=64)
WORDS = (
    "river town bridge arches founded weaver glass village chapel north south long short blue "
    "question answer search visit page year people water stone"
).split()


def sentences(n: int, seed: int = 0) -> list[str]:
    """Deterministic pseudo-sentences over WORDS."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))).capitalize() + "." for _ in range(n)]


def save_tiny_policy(out: Path) -> Path:
    """A random Qwen3 checkpoint (512 tokens of vocabulary, 2 layers of width 64) and a 400-token BPE with the
    Qwen chat template, saved as an HF directory."""
    import torch
    import transformers
    from hf_support import tiny_qwen3_config

    torch.manual_seed(0)
    config = tiny_qwen3_config()
    transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").save_pretrained(out)
    train_tokenizer(sentences(200), 400, out)
    return out
