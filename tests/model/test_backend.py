"""`attention_impl` against the backend: splash (the Pallas TPU kernel) off TPU is refused in one line naming the
kernels that run there, unless `JAXSEEKER_INTERPRET_KERNELS=1` asks for interpretation (as the numerics tests do)."""

import jax
import jax.numpy as jnp
import pytest

from jaxseeker import model
from jaxseeker.model.backend import attention_backend_error, pallas_interpret
from jaxseeker.model.layers import attention_mask, dot_attention

SEQ = 128  # one splash tile


@pytest.fixture
def no_interpret(monkeypatch):
    monkeypatch.delenv("JAXSEEKER_INTERPRET_KERNELS", raising=False)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_splash_off_tpu_names_cudnn_and_blocked_in_one_line(no_interpret, backend):
    message = attention_backend_error("splash", backend)
    assert message.startswith(f"attention_impl='splash' is the Pallas TPU kernel and this backend is {backend}:")
    assert "cudnn (GPU)" in message and "blocked (any backend)" in message and "\n" not in message
    assert "JAXSEEKER_INTERPRET_KERNELS=1" in message


def test_each_kernel_runs_on_its_own_backend_and_the_portable_ones_anywhere(no_interpret):
    assert attention_backend_error("splash", "tpu") is None
    assert attention_backend_error("cudnn", "gpu") is None
    assert "runs on gpu only and this backend is tpu" in attention_backend_error("cudnn", "tpu")
    for impl in ("xla", "jax_xla", "blocked"):
        assert all(attention_backend_error(impl, backend) is None for backend in ("cpu", "gpu", "tpu"))


def test_interpretation_is_opt_in(monkeypatch):
    monkeypatch.setenv("JAXSEEKER_INTERPRET_KERNELS", "1")
    assert attention_backend_error("splash", "gpu") is None
    assert pallas_interpret() is (jax.default_backend() != "tpu")
    monkeypatch.setenv("JAXSEEKER_INTERPRET_KERNELS", "0")
    assert attention_backend_error("splash", "gpu") is not None


@pytest.mark.skipif(jax.default_backend() == "tpu", reason="splash runs natively on TPU")
def test_the_splash_kernel_is_refused_where_it_would_be_interpreted(no_interpret):
    q = k = v = jnp.zeros((1, SEQ, 2, 16), jnp.float32)  # [batch, seq, heads, head_dim]
    seg = jnp.ones((1, SEQ), jnp.int32)
    mask = attention_mask(jnp.arange(SEQ)[None], seg, seg)
    with pytest.raises(model.ConfigError, match=r"^attention_impl='splash' is the Pallas TPU kernel"):
        dot_attention(q, k, v, mask, "splash", segment_ids=seg)
