"""The engine's entry: RunSpec in, RunResult out, on the spec's Keras backend (engine/tensorflow/,
engine/jax/). The measuring rules both backends keep are in each backend's loop.py."""

from __future__ import annotations

from typing import Callable, Optional

from dashbench.engine import backends
from dashbench.results.result import RunResult
from dashbench.core.spec import RunSpec

Event = Callable[[dict], None]


def run(spec: RunSpec, on_event: Optional[Event] = None) -> RunResult:
    """Train `spec.model` as the spec says, on the spec's Keras backend, and return the measured result."""
    backends.select(spec.backend)
    if spec.to_accuracy:  # train to a target (or for fixed epochs), evaluating a held-out split
        if spec.backend == "jax":
            from dashbench.engine.jax import accuracy as jax_accuracy

            return jax_accuracy.run(spec, on_event)
        from dashbench.engine.tensorflow import accuracy as tf_accuracy

        return tf_accuracy.run(spec, on_event)
    if spec.backend == "jax":
        from dashbench.engine.jax import loop as jax_loop

        return jax_loop.run(spec, on_event)
    from dashbench.engine.tensorflow import loop as tf_loop

    return tf_loop.run(spec, on_event)
