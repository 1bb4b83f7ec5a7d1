"""Masked next-token NLL and per-token log-probs, from full logits or computed chunk by chunk.

The chunked forms take the final hidden states and the unembedding matrix and build the logits
one sequence chunk at a time under `jax.checkpoint`, so neither the forward nor the backward pass
ever holds a `[batch, seq, vocab]` array (vocab is 151,936 for Qwen). `chunk_size` and `soft_cap`
are Python numbers (static under jit); `temperature` may also be a traced scalar.
"""

import jax
import jax.numpy as jnp

from jaxseeker.losses.masked import masked_mean, masked_sum


def _check_token_shapes(batch_seq: tuple[int, ...], **arrays: jax.Array) -> None:
    """Raise ValueError naming the argument whose shape is not `[batch, seq]`."""
    for name, array in arrays.items():
        if tuple(array.shape) != tuple(batch_seq):
            raise ValueError(f"{name} has shape {tuple(array.shape)}, expected [batch, seq] = {tuple(batch_seq)}")


def _target_stats(
    logits: jax.Array, targets: jax.Array, *, with_entropy: bool
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """log p(target), argmax == target and (optionally) entropy per position, in float32 or wider."""
    logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))  # [batch, seq, vocab]
    lse = jax.nn.logsumexp(logits, axis=-1)  # [batch, seq]
    target_logit = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]  # [batch, seq]
    logp = target_logit - lse  # [batch, seq]
    correct = jnp.argmax(logits, axis=-1) == targets  # [batch, seq]
    entropy = None
    if with_entropy:
        probs = jnp.exp(logits - lse[..., None])  # [batch, seq, vocab]
        entropy = lse - jnp.sum(probs * logits, axis=-1)  # H = logsumexp(z) - sum_v p_v z_v
    return logp, correct, entropy


def _nll_from_stats(
    logp: jax.Array, correct: jax.Array, loss_mask: jax.Array
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Mean NLL over kept tokens plus the metrics every NLL variant reports.

    A float `loss_mask` weights the tokens: loss = Σ |w|·ℓ / Σ |w| with ℓ = -log p on tokens of weight w > 0 and
    the unlikelihood ℓ = -log(1 - p) on tokens of weight w < 0 (Welleck et al. arXiv 1908.04319: a token the
    model should not write; `data.unlikelihood`). `n_tokens` is Σ |w| (0/1 masks: counts); `accuracy` counts
    the w > 0 tokens only, `rejected_p` is the mean p of the w < 0 ones."""
    weights = jnp.asarray(loss_mask).astype(logp.dtype)
    liked = weights > 0
    # -log(1 - p) = -log(-expm1(log p)), accurate near p = 1; the 1e-6 keeps it (and its gradient) finite at p = 1
    unlikely = -jnp.log(1e-6 - jnp.expm1(jnp.minimum(logp, 0.0)))
    token_loss = jnp.where(liked, -logp, unlikely)
    nll_sum = masked_sum(token_loss * jnp.abs(weights), loss_mask)
    n_tokens = jnp.sum(jnp.abs(weights))
    loss = nll_sum / jnp.maximum(n_tokens, 1.0)
    aux = {
        "n_tokens": n_tokens,
        "nll_sum": nll_sum,
        "accuracy": masked_mean(correct.astype(logp.dtype), liked),
        "rejected_p": masked_mean(jnp.exp(logp), weights < 0),
    }
    return loss, aux


def logprobs_from_logits(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """log softmax(logits)[target] per position, float32: `[batch, seq, vocab]` -> `[batch, seq]`."""
    _check_token_shapes(logits.shape[:-1], targets=targets)
    logp, _, _ = _target_stats(logits, targets, with_entropy=False)
    return logp


def masked_nll(logits: jax.Array, targets: jax.Array, loss_mask: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Mean negative log-likelihood over the unmasked tokens of the whole batch.

    L = -(1 / sum_i m_i) * sum_i m_i * log softmax(z_i)[y_i]   (WebDancer SFT loss with I[x_i != o]:
    observation, prompt and padding tokens have m_i = 0). Log-softmax runs in float32.

    Args:
      logits: `[batch, seq, vocab]`. targets: `[batch, seq]` int ids. loss_mask: `[batch, seq]`, non-zero = train.
    Returns:
      (loss, aux) with aux `n_tokens` (kept tokens), `nll_sum` (for accumulating a global mean) and
      `accuracy` (argmax == target over kept tokens).
    """
    _check_token_shapes(logits.shape[:-1], targets=targets, loss_mask=loss_mask)
    logp, correct, _ = _target_stats(logits, targets, with_entropy=False)
    return _nll_from_stats(logp, correct, loss_mask)


def _chunked_target_stats(
    hidden: jax.Array,
    unembed: jax.Array,
    targets: jax.Array,
    *,
    chunk_size: int,
    soft_cap: float | None,
    temperature: float,
    with_entropy: bool,
    n_valid: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """`_target_stats` of `hidden @ unembed`, built `chunk_size` positions at a time (rematerialised).

    With `n_valid` (a traced count), chunks that start at or after position `n_valid` are skipped,
    forward and backward, and their stats are zero (False for `correct`).
    """
    if hidden.ndim != 3:
        raise ValueError(f"hidden has shape {tuple(hidden.shape)}, expected [batch, seq, embed]")
    batch, seq, embed = hidden.shape
    if unembed.ndim != 2 or unembed.shape[0] != embed:
        raise ValueError(f"unembed has shape {tuple(unembed.shape)}, expected [embed={embed}, vocab]")
    _check_token_shapes((batch, seq), targets=targets)
    if not isinstance(chunk_size, int) or chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    if soft_cap is not None and soft_cap <= 0:
        raise ValueError(f"soft_cap must be positive or None, got {soft_cap!r}")
    if isinstance(temperature, int | float) and temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature!r}")

    compute_dtype = jnp.promote_types(jnp.promote_types(hidden.dtype, unembed.dtype), jnp.float32)
    chunk = min(chunk_size, seq)
    n_chunks = -(-seq // chunk)
    pad = n_chunks * chunk - seq
    hidden = jnp.pad(hidden, ((0, 0), (0, pad), (0, 0)))  # [batch, n_chunks * chunk, embed]
    targets = jnp.pad(targets, ((0, 0), (0, pad)))  # [batch, n_chunks * chunk]
    hidden_chunks = hidden.reshape(batch, n_chunks, chunk, embed).swapaxes(0, 1)  # [n_chunks, batch, chunk, embed]
    target_chunks = targets.reshape(batch, n_chunks, chunk).swapaxes(0, 1)  # [n_chunks, batch, chunk]

    starts = jnp.arange(n_chunks) * chunk  # [n_chunks]

    def compute(h: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        logits = jnp.einsum("bce,ev->bcv", h, unembed, preferred_element_type=compute_dtype)  # [batch, chunk, vocab]
        if soft_cap is not None:
            logits = soft_cap * jnp.tanh(logits / soft_cap)
        logits = logits / temperature
        return _target_stats(logits, t, with_entropy=with_entropy)

    def skip(h: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        zeros = jnp.zeros(t.shape, compute_dtype)  # [batch, chunk]
        return zeros, jnp.zeros(t.shape, bool), zeros if with_entropy else None

    @jax.checkpoint
    def one_chunk(h: jax.Array, t: jax.Array, start: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        if n_valid is None:
            return compute(h, t)
        return jax.lax.cond(start < n_valid, compute, skip, h, t)

    stats = jax.lax.map(
        lambda xs: one_chunk(*xs), (hidden_chunks, target_chunks, starts)
    )  # each [n_chunks, batch, chunk]

    def unchunk(x: jax.Array | None) -> jax.Array | None:
        if x is None:
            return None
        return x.swapaxes(0, 1).reshape(batch, n_chunks * chunk)[:, :seq]  # [batch, seq]

    logp, correct, entropy = stats
    return unchunk(logp), unchunk(correct), unchunk(entropy)


def _trained_first(
    hidden: jax.Array, targets: jax.Array, loss_mask: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Each row's trained positions moved to its front (a stable sort on the mask along `seq`): (hidden
    `[batch, seq, embed]`, targets `[batch, seq]`, the sort order `[batch, seq]`, the longest row's trained count).
    Rows are never mixed, so a batch split across devices stays split (a sort over the whole batch would gather it
    onto every device)."""
    order = jnp.argsort(loss_mask == 0, axis=1, stable=True)  # [batch, seq] each row's trained positions first
    kept_hidden = jnp.take_along_axis(hidden, order[..., None], axis=1)  # [batch, seq, embed]
    kept_targets = jnp.take_along_axis(targets, order, axis=1)  # [batch, seq]
    return kept_hidden, kept_targets, order, jnp.max(jnp.sum(loss_mask != 0, axis=1))


def chunked_masked_nll(
    hidden: jax.Array,
    unembed: jax.Array,
    targets: jax.Array,
    loss_mask: jax.Array,
    *,
    chunk_size: int = 512,
    soft_cap: float | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """`masked_nll(hidden @ unembed, ...)` without ever materialising `[batch, seq, vocab]` logits.

    z = soft_cap * tanh((h @ W) / soft_cap) when `soft_cap` is set (Gemma-style), else h @ W. Logits
    are built only where they count: each row's trained positions are moved to its front (a stable
    sort on the mask, along `seq`), the rows are split into chunks of `chunk_size` positions, each
    chunk's logits `[batch, chunk, vocab]` are built, reduced to per-token log-probs and dropped
    (`jax.checkpoint` recomputes them in the backward pass), and chunks past the longest row's
    trained count are skipped (`_trained_first`). In packed agent trajectories most tokens are observations, so
    this skips most of the `[embed, vocab]` work.

    Args:
      hidden: `[batch, seq, embed]` final hidden states. unembed: `[embed, vocab]`.
      targets: `[batch, seq]` int ids. loss_mask: `[batch, seq]`, non-zero = train.
    Returns:
      (loss, aux) exactly as `masked_nll`.
    """
    if hidden.ndim != 3:
        raise ValueError(f"hidden has shape {tuple(hidden.shape)}, expected [batch, seq, embed]")
    _check_token_shapes(hidden.shape[:2], loss_mask=loss_mask, targets=targets)
    hidden, targets, loss_mask = jnp.asarray(hidden), jnp.asarray(targets), jnp.asarray(loss_mask)
    kept_hidden, kept_targets, order, n_valid = _trained_first(hidden, targets, loss_mask)
    kept_mask = jnp.take_along_axis(loss_mask, order, axis=1)  # [batch, seq]
    logp, correct, _ = _chunked_target_stats(
        kept_hidden,
        unembed,
        kept_targets,
        chunk_size=chunk_size,
        soft_cap=soft_cap,
        temperature=1.0,
        with_entropy=False,
        n_valid=n_valid,
    )
    return _nll_from_stats(logp, correct, kept_mask)


def _masked_token_stats(
    hidden: jax.Array,
    unembed: jax.Array,
    targets: jax.Array,
    loss_mask: jax.Array | None,
    *,
    chunk_size: int,
    soft_cap: float | None,
    temperature: float,
    with_entropy: bool,
) -> tuple[jax.Array, jax.Array | None]:
    """(log-probs, entropy or None) `[batch, seq]` of `_chunked_target_stats`; with `loss_mask`, built only at the
    trained positions (sorted to the front of each row, chunks past the longest row's count skipped, forward and
    backward) and put back in place, 0 at every other position."""
    kwargs = dict(chunk_size=chunk_size, soft_cap=soft_cap, temperature=temperature, with_entropy=with_entropy)
    if loss_mask is None:
        logp, _, entropy = _chunked_target_stats(hidden, unembed, targets, **kwargs)
        return logp, entropy
    if hidden.ndim != 3:
        raise ValueError(f"hidden has shape {tuple(hidden.shape)}, expected [batch, seq, embed]")
    _check_token_shapes(hidden.shape[:2], loss_mask=loss_mask, targets=targets)
    kept_hidden, kept_targets, order, n_valid = _trained_first(hidden, targets, jnp.asarray(loss_mask))
    logp, _, entropy = _chunked_target_stats(kept_hidden, unembed, kept_targets, n_valid=n_valid, **kwargs)
    back = jnp.argsort(order, axis=1)  # [batch, seq] the inverse permutation: sorted slot of each position
    trained = jnp.asarray(loss_mask) != 0  # [batch, seq]

    def unsort(x: jax.Array | None) -> jax.Array | None:
        return None if x is None else jnp.where(trained, jnp.take_along_axis(x, back, axis=1), 0.0)

    return unsort(logp), unsort(entropy)


def token_logprobs(
    hidden: jax.Array,
    unembed: jax.Array,
    targets: jax.Array,
    *,
    chunk_size: int = 512,
    soft_cap: float | None = None,
    temperature: float = 1.0,
    loss_mask: jax.Array | None = None,
) -> jax.Array:
    """log pi(y_t | context) per position, `[batch, seq]` float32, computed in sequence chunks.

    logits = softcap(h @ W) / temperature (use the sampling temperature so old and new log-probs
    of RL match the distribution the rollouts were drawn from). With `loss_mask` (`[batch, seq]`, non-zero =
    trained) logits are built only where it is non-zero, as `chunked_masked_nll` builds them; the other positions
    are 0 and get no gradient.
    """
    logp, _ = _masked_token_stats(
        hidden,
        unembed,
        targets,
        loss_mask,
        chunk_size=chunk_size,
        soft_cap=soft_cap,
        temperature=temperature,
        with_entropy=False,
    )
    return logp


def token_logprobs_and_entropy(
    hidden: jax.Array,
    unembed: jax.Array,
    targets: jax.Array,
    *,
    chunk_size: int = 512,
    soft_cap: float | None = None,
    temperature: float = 1.0,
    loss_mask: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """`token_logprobs` plus the policy entropy H_t = -sum_v p_v log p_v per position, both `[batch, seq]` (with
    `loss_mask`, built at its trained positions only, 0 elsewhere)."""
    return _masked_token_stats(
        hidden,
        unembed,
        targets,
        loss_mask,
        chunk_size=chunk_size,
        soft_cap=soft_cap,
        temperature=temperature,
        with_entropy=True,
    )
