"""Constants shared by the trajectory-synthesis tests (a module of its own: `conftest` names clash across folders)."""

from jaxseeker.agent import RolloutConfig

DATE = "2025-01-01"
LOOP = RolloutConfig(date=DATE, max_context_tokens=16384)
