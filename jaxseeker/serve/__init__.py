"""An OpenAI-compatible server for a policy: HTTP app, engine scheduler thread, text streaming, benchmark."""

from jaxseeker.serve.app import Served, create_app
from jaxseeker.serve.scheduler import (
    Choice,
    Job,
    QueueFull,
    Scheduler,
    SchedulerDown,
    Update,
)
from jaxseeker.serve.server import (
    Background,
    EngineShape,
    build_served,
    eos_ids,
    load_policy,
    serve_forever,
)
from jaxseeker.serve.text import TextStream

__all__ = [
    "Background", "Choice", "EngineShape", "Job", "QueueFull", "Scheduler", "SchedulerDown", "Served", "TextStream",
    "Update", "build_served", "create_app", "eos_ids", "load_policy", "serve_forever",
]
