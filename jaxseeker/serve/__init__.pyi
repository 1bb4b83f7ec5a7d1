"""Names `jaxseeker.serve` exports, each imported from its module on first use (lazy_loader reads this stub)."""

from .app import Served, create_app
from .connections import ConnectionLimits
from .scheduler import Choice, Job, QueueFull, Scheduler, SchedulerDown, Update
from .server import Background, build_served, eos_ids, load_policy, serve_forever
from .shape import EngineShape
from .text import TextStream

__all__ = [
    "Background",
    "Choice",
    "ConnectionLimits",
    "EngineShape",
    "Job",
    "QueueFull",
    "Scheduler",
    "SchedulerDown",
    "Served",
    "TextStream",
    "Update",
    "build_served",
    "create_app",
    "eos_ids",
    "load_policy",
    "serve_forever",
]
