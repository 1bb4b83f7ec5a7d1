"""Greedy tokens of the engine equal Hugging Face `generate` on the same tiny random Qwen3 checkpoint."""

import numpy as np
import torch
import transformers
from hf_support import tiny_qwen3_config

from jaxseeker import model
from jaxseeker.generation import generate

from .reference import random_prompts


def test_greedy_tokens_equal_transformers_generate(tmp_path):
    torch.manual_seed(0)
    config = tiny_qwen3_config()
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    hf.save_pretrained(tmp_path)
    cfg, params = model.load_hf(tmp_path)
    prompts = random_prompts([7, 7, 12], seed=11)  # more prompts than slots, two lengths
    ours = generate(params, cfg, prompts, max_new_tokens=24, slots=2, steps_per_call=4, prefill_chunk=8)
    for prompt, result in zip(prompts, ours):
        with torch.no_grad():
            theirs = hf.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False, pad_token_id=0)
        assert len(set(result.tokens)) > 4, "a constant continuation would make the comparison vacuous"
        np.testing.assert_array_equal(result.tokens, theirs[0, len(prompt) :].numpy())
