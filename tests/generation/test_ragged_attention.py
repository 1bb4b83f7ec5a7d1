"""`ragged_attention` over a paged cache against the reference dense attention over each row's whole context, masked
causally."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxseeker.generation.ragged_attention import ragged_attention
from jaxseeker.model.layers import grouped_attention

ROWS, KV_HEADS, HEADS, HEAD_DIM, LENGTH, PAGE = 4, 2, 4, 8, 32, 8
PAGES = 20  # more than the 4 rows × 4 pages: the tables skip some and point anywhere


def _pool(seed: int):
    """(rng, contexts' keys `[rows, kv, d, length]` and values `[rows, kv, length, d]`, the pools holding them
    scattered over pages `[1, pages, …]`, the tables `[rows, length / page]`)."""
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((ROWS, KV_HEADS, HEAD_DIM, LENGTH)).astype(np.float32)
    v = rng.standard_normal((ROWS, KV_HEADS, LENGTH, HEAD_DIM)).astype(np.float32)
    table = rng.permutation(PAGES)[: ROWS * (LENGTH // PAGE)].reshape(ROWS, LENGTH // PAGE).astype(np.int32)
    k_pool = rng.standard_normal((1, PAGES, KV_HEADS, HEAD_DIM, PAGE)).astype(np.float32)  # other pages: noise
    v_pool = rng.standard_normal((1, PAGES, KV_HEADS, PAGE, HEAD_DIM)).astype(np.float32)
    for r in range(ROWS):
        for j, at in enumerate(table[r]):
            k_pool[0, at] = k[r, :, :, j * PAGE : (j + 1) * PAGE]
            v_pool[0, at] = v[r, :, j * PAGE : (j + 1) * PAGE]
    return rng, jnp.asarray(k), jnp.asarray(v), jnp.asarray(k_pool), jnp.asarray(v_pool), jnp.asarray(table)


@pytest.mark.parametrize("tile", [1, 2, 3])
def test_rows_of_any_length_on_any_pages_match_dense_attention(tile):
    """Three queries a row at ends 20, 3, 9 and 0 (pages of 8: one row reads three pages, one reads one), in tiles
    that mix long and short rows: the dense reference over the whole length, masked causally."""
    rng, k, v, k_pool, v_pool, table = _pool(0)
    ends = jnp.array([20, 3, 9, 0], jnp.int32)
    q = jnp.asarray(rng.standard_normal((ROWS, 3, HEADS, HEAD_DIM)), jnp.float32)
    pos = ends[:, None] + jnp.arange(3)[None]  # [4, 3]
    out = ragged_attention(q, k_pool, v_pool, table, pos, ends + 3, tile=tile)
    mask = jnp.arange(LENGTH)[None, None] <= pos[:, :, None]  # [4, 3, length]
    np.testing.assert_allclose(out, grouped_attention(q, k, v, mask), atol=1e-6)  # f32 sums of ≤ 32 terms


def test_keys_past_the_limit_are_hidden_and_a_row_without_keys_reads_zeros():
    rng, k, v, k_pool, v_pool, table = _pool(1)
    q = jnp.asarray(rng.standard_normal((2, 1, HEADS, HEAD_DIM)), jnp.float32)
    pos = jnp.array([[30], [5]], jnp.int32)
    out = ragged_attention(q, k_pool, v_pool, table[:2], pos, jnp.array([12, 0], jnp.int32), tile=2)
    mask = jnp.arange(LENGTH)[None, None] < 12  # row 0 sees its first 12 keys only
    np.testing.assert_allclose(out[0], grouped_attention(q[:1], k[:1], v[:1], mask)[0], atol=1e-6)
    assert not np.asarray(out[1]).any()


def test_each_part_of_a_split_pool_serves_its_own_rows():
    """Two parts of the pool, two rows each, the tables numbering pages within a part: the same attention as each
    part alone."""
    rng, k, v, k_pool, v_pool, table = _pool(2)
    ends = jnp.array([17, 30, 2, 11], jnp.int32)
    q = jnp.asarray(rng.standard_normal((ROWS, 2, HEADS, HEAD_DIM)), jnp.float32)
    pos = ends[:, None] - 1 + jnp.arange(2)[None]  # [4, 2]
    other = jnp.roll(k_pool, 3, axis=1), jnp.roll(v_pool, 3, axis=1)  # the second part: its pages elsewhere
    split_k = jnp.concatenate([k_pool, other[0]])  # [2, pages, …]
    split_v = jnp.concatenate([v_pool, other[1]])
    split_table = jnp.concatenate([table[:2], (table[2:] + 3) % PAGES])
    out = ragged_attention(q, split_k, split_v, split_table, pos, ends + 1, tile=2)
    mask = jnp.arange(LENGTH)[None, None] <= pos[:, :, None]
    np.testing.assert_allclose(out, grouped_attention(q, k, v, mask), atol=1e-6)
