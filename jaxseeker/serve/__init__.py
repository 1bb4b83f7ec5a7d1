"""An OpenAI-compatible server for a policy: HTTP app, engine scheduler thread, text streaming, benchmark."""

import lazy_loader

# Submodules import on first use, so `jaxseeker --help` and light commands do not pay for jax and torch.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
