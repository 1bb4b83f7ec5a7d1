"""Which attention kernels run on which backend: a config's `attention_impl` checked against the backend a step is
built on, and whether a Pallas TPU kernel may run in interpret mode.

The splash kernel is Pallas written for TPU; elsewhere Pallas can only interpret it, one tile at a time in Python
loops, orders of magnitude slower than the alternatives. Off TPU it is therefore refused unless the environment
variable `JAXSEEKER_INTERPRET_KERNELS=1` asks for interpretation (the tests that check its numerics and sharding on
CPU set it).
"""

from __future__ import annotations

import os

import jax

from jaxseeker.model.config import ConfigError

INTERPRET_KERNELS_ENV = "JAXSEEKER_INTERPRET_KERNELS"
# attention_impl -> the backends (`jax.default_backend()`) that run it natively; impls not listed run anywhere.
NATIVE_BACKENDS = {"splash": ("tpu",), "cudnn": ("gpu",)}


def interpret_allowed() -> bool:
    """Whether the environment asks for Pallas TPU kernels to run interpreted off TPU (the variable set to 1)."""
    return os.environ.get(INTERPRET_KERNELS_ENV, "") == "1"


def attention_backend_error(impl: str, backend: str) -> str | None:
    """Why `attention_impl=impl` cannot run on `backend` ("cpu", "gpu", "tpu"), in one line; None where it can."""
    native = NATIVE_BACKENDS.get(impl)
    if native is None or backend in native:
        return None
    if impl == "splash":
        if interpret_allowed():
            return None
        return (
            f"attention_impl='splash' is the Pallas TPU kernel and this backend is {backend}: use attention_impl="
            f"cudnn (GPU) or blocked (any backend), or set {INTERPRET_KERNELS_ENV}=1 to interpret it (slow; for tests)"
        )
    return f"attention_impl={impl!r} runs on {'/'.join(native)} only and this backend is {backend}: use blocked or xla"


def check_attention_backend(impl: str, backend: str | None = None) -> None:
    """Raise a ConfigError when `attention_impl=impl` cannot run on `backend` (default: JAX's default backend), so a
    recipe fails before it loads weights rather than inside its first step."""
    message = attention_backend_error(impl, backend or jax.default_backend())
    if message is not None:
        raise ConfigError(message)


def pallas_interpret() -> bool:
    """The `interpret` argument of a Pallas TPU kernel built here: False on TPU, True off TPU where
    `JAXSEEKER_INTERPRET_KERNELS=1`, a ConfigError naming the alternatives otherwise."""
    backend = jax.default_backend()
    check_attention_backend("splash", backend)
    return backend != "tpu"
