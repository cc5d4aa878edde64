"""JAX's side of a training step's cost profile (dashbench.engine.profile.step_profile): with no device and no weights.

The model and its optimizer are built inside a Keras StatelessScope that defers every variable's
initialisation, so only their shapes exist: a 70B-shaped llama takes no more memory than a small one.
One step (the JAX run's own: engine/jax/loop.step_of) is lowered on jax.ShapeDtypeStruct arguments
and compiled by XLA for the host's CPU, never run; its cost analysis gives the FLOPs and bytes
accessed. A llama of more than two layers is compiled at one and at two layers of its full width and
sequence (the vocabulary, embedding and head included), and the per-layer difference extrapolated to
its layer count: exact for a stack of identical blocks, and a full-size 8B compiles in under a minute.
Parameter, optimizer and gradient bytes come from the whole model's variable shapes.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from dashbench.core import stats
from dashbench.core.spec import RunSpec, SpecError
from dashbench.engine import compiler_flops, measured
from dashbench.workloads import catalog, registry
from dashbench.workloads.profile import PRECISION, StepProfile


def step_profile(spec: RunSpec) -> StepProfile:
    """The profile of one training step of `spec` (its model, shapes, global batch and precision)."""
    from dashbench.engine import backends, workloads

    shapes = catalog.check_spec(spec)
    backends.select("jax")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # a count, not a run: no accelerator is started
    import keras

    keras_side = workloads.of(spec)
    unit = getattr(keras_side, "unit", None) or registry.get(spec.model).unit
    tokens = int(shapes.seq_len) if unit == "tokens" else None
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(spec.precision)
    try:
        model, optimizer = _abstract(keras, spec, keras_side, shapes)
        sizes = measured.variable_sizes(model, optimizer)
        layers = shapes.layers or 0
        if registry.get(spec.model).profile_by_layers and layers > 2:
            one, two = (_xla(keras, spec, keras_side, dataclasses.replace(shapes, layers=n)) for n in (1, 2))
            flops, accessed = (a + (layers - 1) * (b - a) if a and b else None for a, b in zip(one, two))
            note = f"FLOPs and bytes: XLA on 1 and 2 layers, extrapolated to {layers}; sizes: the whole model"
        else:
            flops, accessed = _xla(keras, spec, keras_side, shapes, built=(model, optimizer))
            note = "FLOPs and bytes: XLA on the whole step; sizes: the whole model"
    finally:
        keras.mixed_precision.set_global_policy(previous)
    flops_source = "xla"
    if not flops:
        flops, flops_source, note = _formula(spec, shapes, sizes["params"], tokens), "formula", "FLOPs: 6 × parameters"
    return StepProfile(
        model=spec.model,
        batch_size=spec.batch_size,
        precision=PRECISION[spec.precision],
        flops=float(flops),
        flops_source=flops_source,
        bytes_accessed=float(accessed) if accessed else None,
        bytes_source="xla" if accessed else None,
        tokens_per_example=tokens,
        unit="tokens" if tokens else "examples",
        note=note,
        **sizes,
    )


def _abstract(keras, spec: RunSpec, keras_side, shapes):
    """(model, built optimizer) whose variables have shapes and no values. A model file that cannot
    be built so (its builder computes with its weights) is built for real: a user's model is small."""
    optimizer = keras_side.make_optimizer(shapes)  # its scalars are made from values, not initialisers
    if spec.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    try:
        with keras.StatelessScope(initialize_variables=False):
            model = keras_side.build_model(shapes)
            optimizer.build(model.trainable_variables)
        return model, optimizer
    except Exception:
        if not registry.get(spec.model).is_file:
            raise
    model = keras_side.build_model(shapes)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _xla(keras, spec: RunSpec, keras_side, shapes, built=None) -> tuple[Optional[float], Optional[float]]:
    """(FLOPs, bytes accessed) of one step at the spec's global batch, from XLA's cost analysis of
    the step compiled for the host's CPU; (None, None) where XLA gives none."""
    import jax

    from dashbench.engine.jax.loop import step_of

    model, optimizer = built or _abstract(keras, spec, keras_side, shapes)
    step = step_of(model, optimizer, keras_side, spec.precision == "mixed_float16")
    abstract = lambda variables: [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in variables]
    state = (
        abstract(model.trainable_variables),
        abstract(model.non_trainable_variables),
        abstract(optimizer.variables),
    )
    x, y = keras_side.synthetic_batch(shapes, 1, spec.seed)
    batch = lambda tree: jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct((spec.batch_size, *a.shape[1:]), a.dtype), tree
    )
    try:
        lowered = jax.jit(step).lower(state, batch(x), batch(y))
        compiled = lowered.compile()
    except Exception as exc:
        raise SpecError("model", f"one training step does not compile: {str(exc).splitlines()[0][:200]}") from exc
    # The FLOPs as the run's own count reads them (the program before XLA's passes); the bytes the
    # executable moves, which only the compiled program knows.
    flops = compiler_flops.program_cost(lowered, lambda: compiled)
    return flops or None, compiler_flops.xla_cost(compiled, "bytes accessed") or None


def _formula(spec: RunSpec, shapes, params: int, tokens: Optional[int]) -> float:
    """6 × parameters per example (per token for an LM): a step's forward, backward and weight
    gradients, where XLA gave no count."""
    return 6.0 * params * spec.batch_size * stats.examples_per_item("tokens" if tokens else "", tokens or 1)
