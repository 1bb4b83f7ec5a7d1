"""The end-to-end pipeline that `make demo` runs on the embedded world."""

from jaxseeker.pipeline.config import PipelineConfig, pipeline_config
from jaxseeker.pipeline.run import run_pipeline

__all__ = ["PipelineConfig", "pipeline_config", "run_pipeline"]
