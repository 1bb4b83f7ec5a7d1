"""Suite-wide set-up, before any test imports JAX: cheap XLA compiles (tests are compile-bound, not run-bound).

Subprocesses started by tests inherit the flags.
"""

import os

_FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_COMPILE}".strip()
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
