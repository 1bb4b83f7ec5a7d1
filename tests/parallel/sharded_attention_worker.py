"""`shard_attention` on 8 fake CPU devices against the unsharded kernel; prints one JSON line.

Run by `test_sharded_attention.py` in a subprocess whose `XLA_FLAGS` asks for 8 host devices (the flag
must be set before JAX starts). The kernel is the model's XLA attention (`layers.dot_attention` with the
mask of `segment_ids`), so the sharded result can be compared to the same function on whole arrays. Per
case: the largest output and gradient differences, the block shapes the kernel was traced with, the
partition specs used, and the collective ops in the compiled program. One more case runs the Pallas splash
kernel (interpreted) blockwise against itself on whole arrays.
"""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from jaxseeker.model import layers
from jaxseeker.parallel import MeshConfig, logical_sharding, make_mesh
from jaxseeker.parallel.rules import DEFAULT_RULES
from jaxseeker.parallel.sharded_attention import attention_specs, shard_attention

# name: (mesh, batch, heads, kv_heads, whether the mesh is given as the context mesh instead of an argument)
CASES = {
    "data2_fsdp2_tensor2": (MeshConfig(2, 2, 2, 1), 4, 4, 2, False),
    "fsdp8": (MeshConfig(1, 8, 1, 1), 8, 4, 2, False),
    "tensor4_kv2": (MeshConfig(1, 2, 4, 1), 4, 8, 2, False),  # kv heads do not split 4 ways: heads stay whole
    "context_mesh": (MeshConfig(2, 1, 4, 1), 2, 8, 4, True),
}
SEQ, HEAD_DIM = 16, 8
traced: list[list[int]] = []  # q block shapes seen by the kernel, appended while tracing


def xla_attention(q, k, v, segment_ids):
    """Causal attention within segments with the model's XLA reference (records its q block shape)."""
    traced.append(list(q.shape))
    q_index = jnp.broadcast_to(jnp.arange(q.shape[1])[None, :], segment_ids.shape)
    return layers.dot_attention(q, k, v, layers.attention_mask(q_index, segment_ids, segment_ids), "xla")


def inputs(batch: int, heads: int, kv_heads: int) -> tuple[np.ndarray, ...]:
    """Random q, k, v and two packed segments then padding per row."""
    rng = np.random.default_rng(batch * 100 + heads)
    q = rng.standard_normal((batch, SEQ, heads, HEAD_DIM), np.float32)
    k, v = (rng.standard_normal((batch, SEQ, kv_heads, HEAD_DIM), np.float32) for _ in range(2))
    segment_ids = np.zeros((batch, SEQ), np.int32)
    for row in range(batch):
        first = 4 + row % 5
        segment_ids[row, :first], segment_ids[row, first:SEQ - 2] = 1, 2
    return q, k, v, segment_ids


def loss(attention, q, k, v, segment_ids, weights):
    """A scalar of the output on real query rows (padding rows are arbitrary in every kernel)."""
    out = attention(q, k, v, segment_ids)  # [batch, seq, heads, head_dim]
    return jnp.sum(out * weights * (segment_ids > 0)[:, :, None, None])


def run_case(mesh_cfg: MeshConfig, batch: int, heads: int, kv_heads: int, in_context: bool) -> dict:
    """Sharded against whole-array attention: output and gradient differences, block shapes, specs, collectives."""
    mesh = make_mesh(mesh_cfg)
    q, k, v, segment_ids = inputs(batch, heads, kv_heads)
    weights = np.random.default_rng(1).standard_normal(q.shape, np.float32)
    want = xla_attention(q, k, v, segment_ids)
    want_grads = jax.grad(loss, argnums=(1, 2, 3))(xla_attention, q, k, v, segment_ids, weights)

    def place(x, axes):
        return jax.device_put(x, logical_sharding(axes, DEFAULT_RULES, mesh, x.shape))

    args = (place(q, ("batch", "seq", "heads", "head_dim")), place(k, ("batch", "seq", "kv_heads", "head_dim")),
            place(v, ("batch", "seq", "kv_heads", "head_dim")), place(segment_ids, ("batch", "seq")))
    sharded = shard_attention(xla_attention, None if in_context else mesh)
    forward = jax.jit(sharded)
    backward = jax.jit(jax.grad(lambda *a: loss(sharded, *a, weights), argnums=(0, 1, 2)))
    traced.clear()
    if in_context:
        with jax.set_mesh(mesh):
            got, grads = forward(*args), backward(*args)
            hlo = forward.lower(*args).compile().as_text()
    else:
        got, grads = forward(*args), backward(*args)
        hlo = forward.lower(*args).compile().as_text()
    specs = attention_specs(mesh, q.shape, k.shape)
    return {
        "out_diff": float(np.max(np.abs(np.asarray(got) - np.asarray(want)))),
        "grad_diff": max(float(np.max(np.abs(np.asarray(g) - np.asarray(w)))) for g, w in zip(grads, want_grads)),
        "out_scale": float(np.max(np.abs(np.asarray(want)))),
        "block_shapes": sorted({tuple(s) for s in traced}),
        "specs": {name: str(spec) for name, spec in specs._asdict().items()},
        "out_spec": str(got.sharding.spec) if isinstance(got.sharding, NamedSharding) else None,
        "collectives": sorted(set(re.findall(r"\b(all-gather|all-reduce|all-to-all|collective-permute)\b", hlo))),
    }


def splash_case() -> float:
    """Largest difference on real query rows between the Pallas splash kernel (interpreted on CPU) on whole arrays
    and blockwise on a (data=2, tensor=4) mesh: the kernel `layers.splash_attention` would route through this."""
    mesh = make_mesh(MeshConfig(2, 1, 4, 1))
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 128, 4, 64), np.float32) for _ in range(3))  # [batch, seq, heads, head_dim]
    segment_ids = np.ones((2, 128), np.int32)
    segment_ids[:, 100:] = 0
    want = np.asarray(layers.splash_attention(q, k, v, segment_ids))
    got = np.asarray(jax.jit(shard_attention(layers.splash_attention, mesh))(q, k, v, segment_ids))
    return float(np.max(np.abs(got - want)[:, :100]))


def main() -> None:
    """Every case; one JSON line."""
    assert jax.device_count() == 8, jax.devices()
    report = {name: run_case(*case) for name, case in CASES.items()}
    report["splash"] = splash_case()
    report["no_mesh"] = float(np.max(np.abs(np.asarray(shard_attention(xla_attention)(*inputs(2, 4, 2)))
                                            - np.asarray(xla_attention(*inputs(2, 4, 2))))))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
