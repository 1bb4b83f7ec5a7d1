"""The offline demo run by `make demo`: a real round trip through the model stack.

Builds a small random Qwen3 policy, saves it as a Hugging Face checkpoint, loads it back both with
`jaxseeker.model.load_hf` and with transformers, checks that the two agree on logits and on greedy
decoding, and prints a summary table.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxseeker import model


def _greedy(params, cfg: model.ModelConfig, prompt: jnp.ndarray, n: int) -> np.ndarray:
    forward = jax.jit(model.forward, static_argnums=2)
    cache = model.init_cache(cfg, prompt.shape[0], prompt.shape[1] + n)
    logits, cache = forward(params, prompt, cfg, cache=cache)
    out = []
    for _ in range(n):
        token = jnp.argmax(logits[:, -1], axis=-1)[:, None]
        out.append(np.asarray(token))
        logits, cache = forward(params, token, cfg, cache=cache)
    return np.concatenate(out, axis=1)


def run_demo(out_dir: str | Path) -> int:
    """Run the demo under `out_dir`; 0 when JAX and transformers agree."""
    import torch
    import transformers

    rows: list[tuple[str, str]] = []
    t0 = time.perf_counter()
    cfg = model.ModelConfig.tiny("qwen3", vocab_size=1024, hidden_size=128, num_layers=4, intermediate_size=384,
                                 head_dim=32, initializer_range=0.1)
    params = model.init_params(cfg, jax.random.key(0))
    path = model.save_hf(params, cfg, Path(out_dir) / "tiny-qwen3")
    rows.append(("checkpoint", str(path)))
    rows.append(("parameters", f"{model.count_params(cfg):,}"))
    cfg2, params2 = model.load_hf(path)
    same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(params2)))
    rows.append(("load_hf(save_hf(p)) == p", str(same)))

    hf = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    prompt = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 16))
    ours = np.asarray(jax.jit(model.forward, static_argnums=2)(params2, jnp.asarray(prompt), cfg2))
    with torch.no_grad():
        theirs = hf(torch.tensor(prompt)).logits.numpy()
        hf_tokens = hf.generate(torch.tensor(prompt), max_new_tokens=24, do_sample=False, pad_token_id=0)[:, 16:].numpy()
    delta = float(np.abs(ours - theirs).max())
    rows.append(("max |Δlogits| vs transformers", f"{delta:.2e}"))
    tokens = _greedy(params2, cfg2, jnp.asarray(prompt), 24)
    agree = bool(np.array_equal(tokens, hf_tokens))
    rows.append(("greedy 24 tokens == HF generate", str(agree)))
    rows.append(("wall time", f"{time.perf_counter() - t0:.1f} s"))
    width = max(len(k) for k, _ in rows)
    print("\njaxseeker demo (offline)")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    return 0 if same and agree and delta <= 1e-4 else 1
