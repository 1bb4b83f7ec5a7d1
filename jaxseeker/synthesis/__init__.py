"""Synthesis: QA over the world (`synthesis.qa`), then teacher trajectories through the real tools and loop.

Teachers (embedded expert, OpenAI-compatible LLM, the policy) write episodes that rejection sampling
runs through the papers' filters; short-CoT, self-reflection and denoised contexts are variants of
the same pipeline; the output is SFT chatml JSONL with provenance.
"""

import lazy_loader

# Submodules import on first use, so `jaxseeker --help` and light commands do not pay for jax and torch.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
