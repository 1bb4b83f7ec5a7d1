"""Names `jaxseeker.pipeline` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .config import PipelineConfig
from .recipes import pipeline_config
from .run import run_pipeline

__all__ = [
    "PipelineConfig",
    "pipeline_config",
    "run_pipeline",
]
