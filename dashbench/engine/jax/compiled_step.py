"""XLA's own account of one JAX training step: the memory its executable needs (`memory_analysis()`:
argument, output, alias and temporary bytes) and its FLOPs (`cost_analysis()`), from one compile of
one step on abstract arguments, so no device memory is taken.

A JAX run on the host's CPU compiles its step so in its own process before its memory check
(`engine/jax/loop.before_run`): the guard (dashbench/workloads/memory.py) then checks XLA's bytes instead of the counts, for a
built-in and a user's model alike, and the run reuses the analysis for its compiler FLOPs instead of
compiling the step again; where the run's loop is that one step on one device, the step compiled is
the run's own loop, which the run then calls without compiling it again. On an accelerator nothing is
compiled before the run (the device is not yet the run's: another run may hold it); the step compiled
after the run for its FLOPs gives the result's estimate there. A compile that fails leaves the counts
standing: never a lost run.
"""

from __future__ import annotations

from typing import Optional

from dashbench.engine import compiler_flops
from dashbench.workloads import memory_estimate

_analysed: dict[tuple, dict] = {}


def analyse(step, state, x, y, examples: int, jitted=None) -> Optional[dict]:
    """{flops_per_example, memory} of `step(state, x, y)` compiled once for the shapes of its
    arguments, with the state donated as the run's loop donates it; None where the compile fails.
    `jitted`: the run's own jitted loop of this one step, compiled for its arguments' shardings as
    well, so that the run's first call finds it compiled (JAX keeps what it compiled per jitted function)."""
    import jax

    try:
        if jitted is None:
            jitted = jax.jit(step, donate_argnums=0)
            described = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype)
        else:
            described = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding)
        abstract = jax.tree_util.tree_map(described, (state, x, y))
        lowered = jitted.lower(*abstract)
        compiled = lowered.compile()
    except Exception:  # an analysis beside the run's, never a reason to lose the run
        return None
    out: dict = {"flops_per_example": None, "memory": None, "bytes_accessed": None}
    try:
        out["flops_per_example"] = compiler_flops.per_example(
            compiler_flops.program_cost(lowered, lambda: compiled), examples
        )
        out["bytes_accessed"] = compiler_flops.xla_cost(compiled, "bytes accessed")
    except Exception:
        pass
    try:
        out["memory"] = memory_facts(compiled.memory_analysis(), abstract)
    except Exception:
        pass
    return out


def memory_facts(stats, abstract) -> Optional[dict]:
    """What dashbench.workloads.memory keeps of a compiled step's memory analysis (bytes on its device).

    Live during the step: its arguments (the donated state and the batch), its outputs that alias no
    argument, and its temporaries. The state does not grow with the batch, nor do the gradients (as
    many bytes as the trainable weights, counted in the temporaries); the batch and the rest of the
    temporaries (the activations) do, so another batch scales per example from the compiled one."""
    if stats is None:
        return None
    state, x, y = abstract
    state_bytes, trainable = _bytes(state), _bytes(state[0])
    batch = _leading(x)
    if not batch:
        return None
    temp = float(stats.temp_size_in_bytes)
    gradients = min(temp, trainable)
    batch_bytes = max(0.0, float(stats.argument_size_in_bytes) - state_bytes)
    kept_outputs = max(0.0, float(stats.output_size_in_bytes) - float(stats.alias_size_in_bytes))
    return {
        "fixed_bytes": state_bytes + kept_outputs + gradients,
        "per_example_bytes": (batch_bytes + temp - gradients) / batch,
        "batch_bytes_per_example": batch_bytes / batch,
        "state_bytes": state_bytes,
        "parameters": int(sum(_count(a) for a in _leaves(state[0]))),
        "compiled_batch": batch,
        "analysis": {
            name: int(getattr(stats, f"{name}_size_in_bytes"))
            for name in ("argument", "output", "alias", "temp", "generated_code")
        },
    }


def remember(spec, found: Optional[dict]) -> None:
    """Keep an analysis for the run to reuse, and give the memory guard its bytes."""
    if not found:
        return
    _analysed[(memory_estimate.step_key(spec), spec.batch_size)] = found
    if found.get("memory"):
        memory_estimate.know_compiled(spec, found["memory"])


def reused(spec) -> Optional[dict]:
    """The analysis made of this run's step before it (jax_loop.before_run), if one was made."""
    return _analysed.get((memory_estimate.step_key(spec), spec.batch_size))


def _leaves(tree) -> list:
    import jax

    return jax.tree_util.tree_leaves(tree)


def _count(array) -> int:
    count = 1
    for size in array.shape:
        count *= int(size)
    return count


def _bytes(tree) -> float:
    import numpy as np

    return float(sum(_count(a) * np.dtype(a.dtype).itemsize for a in _leaves(tree)))


def _leading(tree) -> int:
    leaves = _leaves(tree)
    return int(leaves[0].shape[0]) if leaves and leaves[0].shape else 0
