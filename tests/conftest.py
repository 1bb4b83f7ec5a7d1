"""Suite-wide set-up, before any test imports JAX: cheap XLA compiles (tests are compile-bound, not run-bound),
and one persistent compilation cache for the session. Subprocesses started by tests inherit both.

The cache pays where a test compiles a program another run compiled before it (jax keys the cache by the
program, not by the Python function): the pipeline's fine-tunes of one shape, a run resumed after a kill, the
notebooks' kernels. It lives in a temporary directory removed when the session ends, so every session starts
cold, as CI does. Under pytest-xdist (`make test` runs two or more workers) the controller creates both and the
workers inherit them.
"""

import atexit
import os
import shutil
import tempfile

# The legacy elemental emitter compiles a fusion several times faster than XLA:CPU's MLIR fusion emitters
# (the default); both emit IEEE float arithmetic without fast-math.
_FAST_COMPILE = (
    "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true --xla_cpu_use_fusion_emitters=false"
)
if _FAST_COMPILE not in os.environ.get("XLA_FLAGS", ""):  # pytest-xdist workers inherit the controller's
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_COMPILE}".strip()
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="jaxseeker-tests-xla-cache-")
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# A size limit turns on jax's file lock around cache reads and writes: xdist workers and the processes the
# tests start write to one cache at once.
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(8 << 30))
