"""Reference decoding for the generation tests: a tiny random Qwen3 model and argmax over `model.forward`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker import model

REF_LEN = 96  # every reference sequence (prompt + generated) fits in this fixed, once-compiled shape
CFG = model.ModelConfig.tiny(initializer_range=0.5)  # wide init: greedy outputs are not constant


def _is_shape(x) -> bool:
    return isinstance(x, tuple) and all(isinstance(d, int) for d in x)


def numpy_params(cfg: model.ModelConfig, seed: int) -> dict:
    """Random params drawn with numpy (instant, unlike compiling `model.init_params` on a busy CPU): normal
    matrices of std `initializer_range`, unit norms, zero biases."""
    rng = np.random.default_rng(seed)

    def leaf(path, shape):
        name = str(path[-1].key)
        if name.endswith("norm"):
            return jnp.ones(shape, jnp.float32)
        if name.endswith("bias"):
            return jnp.zeros(shape, jnp.float32)
        return jnp.asarray(rng.normal(0.0, cfg.initializer_range, shape), jnp.float32)

    shapes = model.param_shapes(cfg)
    return jax.tree_util.tree_map_with_path(leaf, shapes, is_leaf=_is_shape)


@jax.jit
def _logits(params, tokens, segment_ids):
    return model.forward(params, tokens, CFG, segment_ids=segment_ids)


def reference_logits(params, sequences: list[list[int]]) -> list[np.ndarray]:
    """`model.forward` logits `[len, vocab]` of each sequence (no cache; right-padded to REF_LEN)."""
    tokens = np.zeros((len(sequences), REF_LEN), np.int32)
    segments = np.zeros_like(tokens)
    for i, seq in enumerate(sequences):
        tokens[i, : len(seq)], segments[i, : len(seq)] = seq, 1
    out = np.asarray(_logits(params, jnp.asarray(tokens), jnp.asarray(segments)))
    return [out[i, : len(seq)] for i, seq in enumerate(sequences)]


def reference_greedy(params, prompts: list[list[int]], n: int) -> list[list[int]]:
    """Greedy continuations: argmax of `model.forward` at the last position, one full forward per token."""
    seqs = [list(p) for p in prompts]
    for _ in range(n):
        for seq, logits in zip(seqs, reference_logits(params, seqs)):
            seq.append(int(np.argmax(logits[-1])))
    return [seq[len(p) :] for seq, p in zip(seqs, prompts)]


def random_prompts(lengths: list[int], seed: int = 0, vocab: int = 512) -> list[list[int]]:
    """Random prompts of the given lengths (token ids ≥ 1)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(1, vocab, n).tolist() for n in lengths]


def engine_tokens(engine, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """Every prompt submitted at once, the engine stepped until done: each prompt's generated tokens, in order."""
    for i, prompt in enumerate(prompts):
        engine.submit(str(i), prompt, max_new_tokens=max_new_tokens)
    out = {}
    while engine.has_work():
        out.update({e.request_id: e.tokens for e in engine.step()})
    return [out[str(i)] for i in range(len(prompts))]
