"""The backends, by the spec's name for them (get), and which one a run process uses (select).
Keras reads KERAS_BACKEND once, when it is first imported, so the choice is made before that and
cannot change afterwards in the same process."""

from __future__ import annotations

import importlib
import os
import sys

from dashbench.core.spec import BACKENDS, SpecError
from dashbench.engine.base import Backend


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


# The backends a spec may name, each its folder's package: one that defines BACKEND (engine/base.py).
# Named, not imported, so that listing them starts no framework and a backend's modules may import
# the shared ones that look a backend up here.
IMPLEMENTATIONS = {"tensorflow": "dashbench.engine.tensorflow", "jax": "dashbench.engine.jax"}


def get(backend: str) -> Backend:
    """The implementation of `backend` (a spec's backend name)."""
    if backend not in IMPLEMENTATIONS:
        raise SpecError("backend", f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    return importlib.import_module(IMPLEMENTATIONS[backend]).BACKEND
