"""The compiler's count of one training step's FLOPs, beside the analytic one, for any model.

JAX: XLA's cost analysis of the compiled step (`jax.jit(step).lower(...).compile().cost_analysis()`).
One step, never the steps_per_loop loop: XLA counts a while-loop body once, whatever its trip count.
TensorFlow: the graph profiler (`tf.compat.v1.profiler`, float_operation) over a concrete function
of one step; TF 2.19 gives XLA's HLO only as text, with no cost analysis.

Both count what their op tables cover: the matmuls and convolutions, and elementwise work (one FLOP
an element) that the analytic counts leave out. Neither sees into a loop body more than once (an
LSTM's recurrence, XLA's while; TF's While body is a function the profiler does not open), nor into
custom calls (Pallas, cuDNN). A count that fails or is empty is None: the run keeps its analytic
count and is never lost to this.
"""

from __future__ import annotations

from typing import Optional


def jax_step(step, state, x, y, examples: int) -> Optional[float]:
    """XLA's FLOPs per example of `step(state, x, y)`, compiled alone for the shapes of its
    arguments (no device memory taken: they are abstract), or None."""
    import jax

    try:
        abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (state, x, y))
        return per_example(xla_cost(jax.jit(step).lower(*abstract).compile()), examples)
    except Exception:  # a count beside the run's, never a reason to lose the run
        return None


def xla_cost(compiled) -> Optional[float]:
    """The `flops` of a compiled JAX executable's cost analysis: a dict from JAX 0.4.38, a
    one-element list before, and None where the backend gives none."""
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    flops = cost.get("flops") if isinstance(cost, dict) else None
    return float(flops) if flops is not None else None


def tf_step(tf, step, specs, examples: int) -> Optional[float]:
    """The TF graph profiler's FLOPs per example of the concrete function of `step(*specs)` (one
    training step, traced here and never run), or None."""
    try:
        graph = tf.function(step).get_concrete_function(*specs).graph
        options = (tf.compat.v1.profiler.ProfileOptionBuilder(tf.compat.v1.profiler.ProfileOptionBuilder.float_operation())
                   .with_empty_output().build())
        profile = tf.compat.v1.profiler.profile(graph=graph, run_meta=tf.compat.v1.RunMetadata(), cmd="op",
                                                options=options)
        return per_example(float(profile.total_float_ops), examples)
    except Exception:  # a count beside the run's, never a reason to lose the run
        return None


def per_example(flops: Optional[float], examples: int) -> Optional[float]:
    return flops / examples if flops and flops > 0 and examples > 0 else None
