"""QA synthesisers over a world: SailorFog-QA, E2HQA, CrawlQA, OpenSeeker graph QA, WebExplorer evolution.

Each recipe drafts structured constraints (`jaxseeker.world.Query`) with the true assignment, and the
shared checks keep a draft only if it is unique, does not leak its answer and is new; a kept question
is a `QARecord` {question, answer, tag, level, meta} with its evidence in `meta`.
"""

import lazy_loader

# Submodules import on first use, so `jaxseeker --help` and light commands do not pay for jax and torch.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
