"""The planner: per-device memory, FLOPs and fit of a recipe's training stages on a mesh, from shapes alone."""

import lazy_loader

# Submodules import on first use, so `jaxseeker --help` and light commands do not pay for jax.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
