"""A tiny random Qwen3 configuration for tests that save a checkpoint in the Hugging Face layout."""

import transformers


def tiny_qwen3_config() -> transformers.Qwen3Config:
    """Qwen3 with 512 tokens of vocabulary, 2 layers of width 64, 4 query and 2 key-value heads of 16, tied
    embeddings and weights large enough (initializer range 0.15) that greedy continuations are not constant."""
    return transformers.Qwen3Config(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        initializer_range=0.15,
        rope_theta=1e6,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
