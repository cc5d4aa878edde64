"""Settings read from the environment."""

from __future__ import annotations

import math
import os


def positive_seconds(name: str, default: float) -> float:
    """Seconds from the environment variable `name`, above 0; unset, empty or anything else leaves
    `default` (a wait it tunes must stay a wait)."""
    try:
        value = float(os.environ.get(name) or default)
    except ValueError:
        return default
    return value if value > 0 and math.isfinite(value) else default
