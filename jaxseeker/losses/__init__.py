"""Pure loss functions of arrays: masked NLL, group advantages (GRPO, Dr. GRPO, RLOO), clipped policy objectives
(PPO-clip, GSPO) and their aggregations, KL and entropy; the registries that resolve the objective and advantage a
config names."""

import lazy_loader

# Submodules import on first use, so `jaxseeker --help` and light commands do not pay for jax and torch.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
