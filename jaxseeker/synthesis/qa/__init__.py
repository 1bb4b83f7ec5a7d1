"""QA synthesisers over a world: SailorFog-QA, E2HQA, CrawlQA, OpenSeeker graph QA, WebExplorer evolution.

Each recipe drafts structured constraints (`jaxseeker.world.Query`) with the true assignment, and the
shared checks keep a draft only if it is unique, does not leak its answer and is new; a kept question
is a `QARecord` {question, answer, tag, level, meta} with its evidence in `meta`.
"""

from jaxseeker.synthesis.qa.checks import level_of, same_answer
from jaxseeker.synthesis.qa.driver import SynthResult, run_recipe
from jaxseeker.synthesis.qa.plots import plot_stats
from jaxseeker.synthesis.qa.record import Draft, QARecord, read_jsonl, write_jsonl
from jaxseeker.synthesis.qa.recipes import RECIPES, get_recipe
from jaxseeker.synthesis.qa.render import render_question
from jaxseeker.synthesis.qa.solvers import (PromptSolver, RuleSolver, Solver, SolverTask, chat_completion,
                                            reference_solver)
from jaxseeker.synthesis.qa.stats import QAStats, compute_stats, summary

__all__ = [
    "RECIPES", "Draft", "PromptSolver", "QARecord", "QAStats", "RuleSolver", "Solver", "SolverTask", "SynthResult",
    "chat_completion", "compute_stats", "get_recipe", "level_of", "plot_stats", "read_jsonl", "reference_solver",
    "render_question", "run_recipe", "same_answer", "summary", "write_jsonl",
]
