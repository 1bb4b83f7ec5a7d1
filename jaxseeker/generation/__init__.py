"""Batched generation: a continuous-batching engine over a fixed KV cache, and a simple `generate`."""

from jaxseeker.generation.engine import Engine, Event
from jaxseeker.generation.generate import GenerationResult, generate
from jaxseeker.generation.sampling import SamplingConfig, sample

__all__ = ["Engine", "Event", "GenerationResult", "SamplingConfig", "generate", "sample"]
