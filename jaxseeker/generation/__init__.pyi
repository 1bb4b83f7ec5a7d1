"""Names `jaxseeker.generation` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .engine import Engine
from .generate import GenerationResult, generate
from .hf_engine import HFEngine
from .requests import Event
from .sampling import SamplingConfig, sample

__all__ = [
    "Engine",
    "Event",
    "GenerationResult",
    "HFEngine",
    "SamplingConfig",
    "generate",
    "sample",
]
