"""Names `jaxseeker.synthesis` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .denoise import DenoisedTeacher, denoised_context, extractive_summary, llm_summarizer
from .expert import ExpertConfig, ExpertRun
from .filters import (
    Stage,
    Verdict,
    correctness,
    exact_judge,
    llm_answer_judge,
    llm_quality_check,
    quality,
    rft,
    run_funnel,
    validity,
    webdancer_funnel,
    websailor_funnel,
)
from .reflection import (
    ExpertVerifier,
    ReflectionConfig,
    RolloutVerifier,
    psi,
    reflection_funnel,
    reflection_registry,
    reflection_rollout_config,
)
from .report import format_report, plot_report, trajectory_stats
from .shortcot import llm_rewriter, rewrite_thoughts, short_cot, template_rewriter
from .teachers import ExpertTeacher, OpenAITeacher, PolicyTeacher, Teacher, TextTeacher
from .trajectories import SynthStats, read_records, synthesize, write_records
from .turn_engine import TurnEngine

__all__ = [
    "DenoisedTeacher",
    "ExpertConfig",
    "ExpertRun",
    "ExpertTeacher",
    "ExpertVerifier",
    "OpenAITeacher",
    "PolicyTeacher",
    "ReflectionConfig",
    "RolloutVerifier",
    "Stage",
    "SynthStats",
    "Teacher",
    "TextTeacher",
    "TurnEngine",
    "Verdict",
    "correctness",
    "denoised_context",
    "exact_judge",
    "extractive_summary",
    "format_report",
    "llm_answer_judge",
    "llm_quality_check",
    "llm_rewriter",
    "llm_summarizer",
    "plot_report",
    "psi",
    "quality",
    "read_records",
    "reflection_funnel",
    "reflection_registry",
    "reflection_rollout_config",
    "rewrite_thoughts",
    "rft",
    "run_funnel",
    "short_cot",
    "synthesize",
    "template_rewriter",
    "trajectory_stats",
    "validity",
    "webdancer_funnel",
    "websailor_funnel",
    "write_records",
]
