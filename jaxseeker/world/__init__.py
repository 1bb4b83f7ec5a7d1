"""The embedded offline web: an entity graph, pages written from its facts, and a BM25 index over them."""

import lazy_loader

# Submodules import on first use, so `jaxseeker --help` and light commands do not pay for jax and torch.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
