"""Which Keras backend a run process uses. Keras reads KERAS_BACKEND once, when it is first
imported, so the choice is made before that and cannot change afterwards in the same process."""

from __future__ import annotations

import os
import sys

from dashbench.core.spec import BACKENDS, SpecError


def select(backend: str) -> None:
    """Point Keras at `backend`, or say why this process cannot (Keras already runs another)."""
    if backend not in BACKENDS:
        raise SpecError("backend", f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    keras = sys.modules.get("keras")
    if keras is not None:
        loaded = keras.backend.backend()
        if loaded != backend:
            raise SpecError(
                "backend",
                f"Keras is already loaded with the {loaded} backend in this process; a {backend} run needs "
                f"its own process (dashbench run ... --backend {backend})",
            )
        return
    os.environ["KERAS_BACKEND"] = backend
