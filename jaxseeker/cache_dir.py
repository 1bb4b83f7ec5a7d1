"""Where jaxseeker keeps what it can rebuild: imported models, built worlds, compiled XLA programs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """`$JAXSEEKER_CACHE`, else `~/.cache/jaxseeker`."""
    return Path(os.environ.get("JAXSEEKER_CACHE") or Path.home() / ".cache" / "jaxseeker")
