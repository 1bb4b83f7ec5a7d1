"""Names `jaxseeker.synthesis.qa` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .checks import level_of, same_answer
from .driver import SynthResult, run_recipe
from .plots import plot_stats
from .recipes import RECIPES, get_recipe
from .record import Draft, QARecord, read_jsonl, write_jsonl
from .render import render_question
from .solvers import PromptSolver, RuleSolver, Solver, SolverTask, chat_completion, reference_solver
from .stats import QAStats, compute_stats, summary
from .style import StyleFigures, style_figures, style_summary
from .webexplorer_llm import ExplorerConfig
from .writer import LLMWriter, read_prompt

__all__ = [
    "RECIPES",
    "Draft",
    "ExplorerConfig",
    "LLMWriter",
    "PromptSolver",
    "QARecord",
    "QAStats",
    "RuleSolver",
    "Solver",
    "SolverTask",
    "StyleFigures",
    "SynthResult",
    "chat_completion",
    "compute_stats",
    "get_recipe",
    "level_of",
    "plot_stats",
    "read_jsonl",
    "read_prompt",
    "reference_solver",
    "render_question",
    "run_recipe",
    "same_answer",
    "style_figures",
    "style_summary",
    "summary",
    "write_jsonl",
]
