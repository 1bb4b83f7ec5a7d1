"""Names `jaxseeker.eval` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .loaders import LoadError, decrypt_browsecomp, decrypt_xbench, load_questions
from .metrics import (
    avg_at_k, best_pass_at_1, cons_at_k, evidence_rate, group_rollouts, invalid_rate, judge_failures,
    judgement_table, mean_of, paired_change, pass_at_1, pass_at_1_by_round, pass_at_k, summarize, termination_mix,
    tool_calls_per_rollout,
)
from .report import (
    compare_question_sets, compare_results, plot_pass_at_1_by_level, plot_termination_mix, plot_tool_calls,
    read_results, summary_table, write_report, write_results,
)

__all__ = [
    "LoadError", "avg_at_k", "best_pass_at_1", "compare_question_sets", "compare_results", "cons_at_k",
    "decrypt_browsecomp", "decrypt_xbench", "evidence_rate", "group_rollouts", "invalid_rate", "judge_failures",
    "judgement_table", "load_questions", "mean_of", "paired_change", "pass_at_1", "pass_at_1_by_round", "pass_at_k",
    "plot_pass_at_1_by_level", "plot_termination_mix", "plot_tool_calls", "read_results", "summarize",
    "summary_table", "termination_mix", "tool_calls_per_rollout", "write_report", "write_results",
]
