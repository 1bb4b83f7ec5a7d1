"""Synthesis: QA over the world (`synthesis.qa`), then teacher trajectories through the real tools and loop.

Teachers (embedded expert, OpenAI-compatible LLM, the policy) write episodes that rejection sampling
runs through the papers' filters; short-CoT, self-reflection and denoised contexts are variants of
the same pipeline; the output is SFT chatml JSONL with provenance.
"""

from jaxseeker.synthesis.denoise import (
                                         DenoisedTeacher,
                                         denoised_context,
                                         extractive_summary,
                                         llm_summarizer,
)
from jaxseeker.synthesis.expert import ExpertConfig, ExpertRun
from jaxseeker.synthesis.filters import (
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
from jaxseeker.synthesis.reflection import (
                                         ExpertVerifier,
                                         ReflectionConfig,
                                         RolloutVerifier,
                                         psi,
                                         reflection_funnel,
                                         reflection_registry,
                                         reflection_rollout_config,
)
from jaxseeker.synthesis.report import compute as trajectory_stats
from jaxseeker.synthesis.report import format_report, plot_report
from jaxseeker.synthesis.shortcot import (
                                         llm_rewriter,
                                         rewrite_thoughts,
                                         short_cot,
                                         template_rewriter,
)
from jaxseeker.synthesis.teachers import (
                                         ExpertTeacher,
                                         OpenAITeacher,
                                         PolicyTeacher,
                                         Teacher,
                                         TextTeacher,
)
from jaxseeker.synthesis.trajectories import (
                                         SynthStats,
                                         read_records,
                                         synthesize,
                                         write_records,
)
from jaxseeker.synthesis.turn_engine import TurnEngine

__all__ = [
    "DenoisedTeacher", "ExpertConfig", "ExpertRun", "ExpertTeacher", "ExpertVerifier", "OpenAITeacher",
    "PolicyTeacher", "ReflectionConfig", "RolloutVerifier", "Stage", "SynthStats", "Teacher", "TextTeacher",
    "TurnEngine", "Verdict", "correctness", "denoised_context", "exact_judge", "extractive_summary",
    "format_report", "llm_answer_judge", "llm_quality_check", "llm_rewriter", "llm_summarizer", "plot_report",
    "psi", "quality", "read_records", "reflection_funnel", "reflection_registry", "reflection_rollout_config",
    "rewrite_thoughts", "rft", "run_funnel", "short_cot", "synthesize", "template_rewriter", "trajectory_stats",
    "validity", "webdancer_funnel", "websailor_funnel", "write_records",
]
