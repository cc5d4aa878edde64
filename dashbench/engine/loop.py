"""The engine's entry: RunSpec in, RunResult out, on the spec's Keras backend (engine/backends.py).
The measuring rules every backend keeps are in each backend's loop.py."""

from __future__ import annotations

from typing import Callable, Optional

from dashbench.core.spec import RunSpec
from dashbench.engine import backends
from dashbench.results.result import RunResult

Event = Callable[[dict], None]


def run(spec: RunSpec, on_event: Optional[Event] = None) -> RunResult:
    """Train `spec.model` as the spec says, on the spec's Keras backend, and return the measured result."""
    backends.select(spec.backend)
    backend = backends.get(spec.backend)
    if spec.to_accuracy:  # train to a target (or for fixed epochs), evaluating a held-out split
        return backend.run_to_accuracy(spec, on_event)
    return backend.run(spec, on_event)
