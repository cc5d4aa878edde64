"""A builder's memory need before its weights exist: the builder runs once under Keras's
StatelessScope, where a variable made with an initializer (every layer's add_weight) keeps its shape
and no value, so a 10 B-parameter model costs its shapes, not 40 GB. Its counts go to the memory
check, which refuses a model the host cannot hold before the real build allocates anything.
A builder that computes with its weights while building cannot be built so: it is then built for
real, as before (the run's guard still watches its memory)."""

from __future__ import annotations

from typing import Optional

from dashbench.core.spec import SpecError
from dashbench.engine.workloads.user_import import Stopped


def facts(user, shapes) -> Optional[dict]:
    """The memory estimate's counts (UserWorkload.facts) from an abstract build, or None where the
    builder cannot be built without its weights. A builder stopped (its time, an exit) stays refused."""
    from keras.src.backend.common import global_state
    from keras.src.backend.common.stateless_scope import StatelessScope

    saved = (user.extras, user.meta, user.classes, getattr(user, "loss_fn", None), getattr(user, "kind", None))
    user.extras, user.meta = {}, None
    try:
        with StatelessScope(initialize_variables=False):
            model = user.build_model(shapes)
            return user.facts(model)
    except Stopped:
        raise
    except (SpecError, Exception):  # its real build says what is wrong, if anything is
        return None
    finally:
        # The abstract variables are dropped, never initialised later by Keras.
        global_state.set_global_attribute("uninitialized_variables", [])
        user.extras, user.meta, user.classes, user.loss_fn, user.kind = saved
