"""The compiler's count of one training step's FLOPs, beside the analytic one, for any model.

JAX: XLA's cost analysis of the step as the program states it (`jax.jit(step).lower(...).cost_analysis()`,
before XLA's optimisation passes), the compiled executable's where that gives none. Not the compiled
one first: XLA:CPU rewrites a grouped convolution's kernel gradient (batch_group_count = channels, a
depthwise convolution's) into a dense convolution over every pair of channels and keeps the diagonal,
so the compiled count holds C× the work the model asks for (64× for a 64-channel ConvMixer).
One step, never the steps_per_loop loop: XLA counts a while-loop body once, whatever its trip count.
TensorFlow: the graph profiler (`tf.compat.v1.profiler`, float_operation) over a concrete function
of one step; TF 2.19 gives XLA's HLO only as text, with no cost analysis.

Both count what their op tables cover: the matmuls and convolutions, and elementwise work (one FLOP
an element) that the analytic counts leave out. Neither sees into a loop body more than once (an
LSTM's recurrence, XLA's while; TF's While body is a function the profiler does not open), nor into
custom calls (Pallas, cuDNN). A count that fails or is empty is None: the run keeps its analytic
count and is never lost to this.

TF's profiler has no statistic for `Einsum`, which Keras's TensorFlow attention uses for Q·Kᵀ and
the weighted sum (and their gradients are einsums too): `tf_step` registers one, once a process.
"""

from __future__ import annotations

from typing import Optional


def jax_step(step, state, x, y, examples: int) -> Optional[float]:
    """XLA's FLOPs per example of `step(state, x, y)`, compiled alone for the shapes of its
    arguments (no device memory taken: they are abstract), or None."""
    import jax

    try:
        abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (state, x, y))
        lowered = jax.jit(step).lower(*abstract)
        return per_example(program_cost(lowered, lowered.compile), examples)
    except Exception:  # a count beside the run's, never a reason to lose the run
        return None


def program_cost(lowered, compiled) -> Optional[float]:
    """The FLOPs of a lowered JAX step before XLA's passes (see the module's note), else those of
    the executable `compiled()` gives (a function: compiled only when needed)."""
    try:
        found = xla_cost(lowered)
    except Exception:  # a JAX without the lowered module's analysis: the executable's
        found = None
    return found if found else xla_cost(compiled())


def xla_cost(compiled, key: str = "flops") -> Optional[float]:
    """The `flops` (or another `key`: "bytes accessed") of a compiled JAX executable's cost analysis
    (or a lowered module's): a dict from JAX 0.4.38, a one-element list before, and None where the
    backend gives none."""
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    flops = cost.get(key) if isinstance(cost, dict) else None
    return float(flops) if flops is not None else None


def tf_step(tf, step, specs, examples: int) -> Optional[float]:
    """The TF graph profiler's FLOPs per example of the concrete function of `step(*specs)` (one
    training step, traced here and never run), or None."""
    try:
        register_einsum_flops()
        graph = tf.function(step).get_concrete_function(*specs).graph
        options = (
            tf.compat.v1.profiler.ProfileOptionBuilder(tf.compat.v1.profiler.ProfileOptionBuilder.float_operation())
            .with_empty_output()
            .build()
        )
        profile = tf.compat.v1.profiler.profile(
            graph=graph, run_meta=tf.compat.v1.RunMetadata(), cmd="op", options=options
        )
        return per_example(float(profile.total_float_ops), examples)
    except Exception:  # a count beside the run's, never a reason to lose the run
        return None


_einsum_registered = False


def register_einsum_flops() -> None:
    """Give TF's graph profiler a FLOP statistic for `Einsum`. Registered lazily (TF is only
    imported here) and at most once: TF's registry raises on a second registration, and one that a
    newer TF (or anyone else in the process) made first is kept."""
    global _einsum_registered
    if _einsum_registered:
        return
    from tensorflow.python.framework import graph_util, ops

    def einsum_flops(graph, node):
        shapes = [
            graph_util.tensor_shape_from_node_def_name(graph, name) for name in node.input if not name.startswith("^")
        ]
        for shape in shapes:
            shape.assert_is_fully_defined()  # a ValueError: the profiler skips the op, as for MatMul
        return ops.OpStats("flops", einsum_count(node.attr["equation"].s.decode(), [s.as_list() for s in shapes]))

    try:
        ops.RegisterStatistics("Einsum", "flops")(einsum_flops)
    except KeyError:
        pass
    _einsum_registered = True


def einsum_count(equation: str, shapes: list) -> Optional[int]:
    """FLOPs of one einsum: a two-operand contraction is a multiply and an add for every point of
    the space of all its distinct indices (2·M·N·K for a matmul, XLA's count of a dot); one operand
    that sums an index out is an add an input element, and one that only transposes is free. None
    for three or more operands (TF contracts them pairwise, in an order not known here)."""
    inputs, _, output = equation.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes) or len(terms) > 2:
        return None
    sizes: dict = {}
    for term, shape in zip(terms, shapes):
        if "..." in term:  # the dimensions the letters leave over, named from the right (they broadcast so)
            head, _, tail = term.partition("...")
            spare = len(shape) - len(head) - len(tail)
            term = head + "".join(chr(0x100 + spare - 1 - i) for i in range(spare)) + tail
        if len(term) != len(shape):
            return None
        for label, size in zip(term, shape):
            sizes[label] = max(sizes.get(label, 1), int(size))
    space = 1
    for size in sizes.values():
        space *= size
    if len(terms) == 2:
        return 2 * space
    kept = set(output.replace("...", "")) | {c for c in sizes if ord(c) >= 0x100}
    return space if set(sizes) - kept else 0


def per_example(flops: Optional[float], examples: int) -> Optional[float]:
    return flops / examples if flops and flops > 0 and examples > 0 else None
