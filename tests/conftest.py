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
# (the default); both emit IEEE float arithmetic without fast-math. One LLVM module per program instead of up to
# 32 parts compiled on threads (the split only pays with idle cores; here every core runs a test): the same
# instructions, 7-12% less CPU on compile-bound test files.
_FAST_COMPILE = (
    "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true --xla_cpu_use_fusion_emitters=false"
    " --xla_cpu_parallel_codegen_split_count=1"
)
if _FAST_COMPILE not in os.environ.get("XLA_FLAGS", ""):  # pytest-xdist workers inherit the controller's
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_COMPILE}".strip()
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="jaxseeker-tests-xla-cache-")
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# No size limit (jax's default), so no eviction and no file lock: with a limit, every write lists the whole cache and
# reads each entry's access time (about 30 µs an entry here), which over the suite's thousands of programs grows
# as their square. xdist workers and the processes the tests start still share one cache: an entry read while
# another process writes it is a truncated zlib stream, which jax reports as a warning before it compiles the
# program itself (a recompile, never a wrong program).
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", "-1")


def pytest_collection_modifyitems(items) -> None:
    """The files marked `heavy` run first. `make test`'s workers take whole files in collection order
    (`--no-loadscope-reorder`: xdist would otherwise order files by their number of tests), so a file of a minute left
    for last runs alone while the other workers sit idle."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)
