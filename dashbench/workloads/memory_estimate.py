"""A run's memory need before it is launched: from the shapes in dashbench.workloads.catalog (parameters,
their gradients and the optimizer's slots, the synthetic batch, the activations of one example times
the global batch, fixed allowances for the framework and the graph it builds), or from XLA's memory
analysis of the compiled step where the run's process recorded one. dashbench.workloads.memory checks it
against what the host or the device has. No TensorFlow here.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass

from dashbench.core.spec import RunSpec, SpecError
from dashbench.workloads import catalog, lm_shape

GB = 1e9
FLOAT = 4  # bytes: float32, also under mixed precision (master weights, and an estimate that errs high)
# A run process's own footprint: 0.8-1.15 GB of a small model's peak under TensorFlow is neither its
# weights nor its batch, 0.9-1.2 GB under JAX (docs/MEMORY.md).
FRAMEWORK_BYTES = 1.25 * GB
BACKWARD_FACTOR = 1.5  # the activations kept for the backward pass, plus their transient gradients
# JAX on the CPU (XLA:CPU) grows by more per example than TensorFlow does (0.5-1.0× the activations'
# float32 bytes): 1.4-1.6× for ResNet-50, Inception-v3 and the BiLSTM, and 2.1× and 3.0× for the two
# small models' 5×5 convolutions over few channels (docs/MEMORY.md). On accelerators XLA's memory is
# not measured here; ACCELERATOR_MARGIN stands for it.
XLA_CPU_BACKWARD_FACTOR = 2.0
XLA_CPU_BACKWARD_FACTORS = {"conv2d": 3.5, "fashion_mnist_cnn": 3.5}
WARN_FRACTION = 0.5  # warn when a run's estimate passes this share of the available memory
# An accelerator's run is refused only past this many times its memory. There the estimate errs high
# (activations counted in float32 and unfused, where mixed precision halves them and XLA fuses them:
# the seeds' ResNet-50 at 256 a V100 or 128 a TPU v2 core is estimated at 2.5× memory that it fits
# in), and running out fails the run, not the host; the host is guarded by its own check below.
ACCELERATOR_MARGIN = 4.0
GIB = 2**30
OPTIMIZER_SLOTS = {"resnet50": 1, "inception_v3": 1}  # momentum SGD; the rest use Adam (2 slots)
# A user's model file is counted from the model itself, built in the run's own process (the only one
# that imports it: engine/workloads/user.py `facts`): identity → {parameters, slots, activations, inputs}.
# Elsewhere (a sweep's parent, the queue, the page) its estimate is unknown and each run process checks.
USER_MODEL_FACTS: dict[str, dict] = {}


def know(model: str, facts: dict) -> None:
    """The counts of a user's model, from the process that built it."""
    USER_MODEL_FACTS[model] = dict(facts)


# XLA's memory analysis of a compiled JAX training step, from the run's own process (engine/jax/compiled_step.py):
# step_key(spec) → {fixed_bytes, per_example_bytes, batch_bytes_per_example, state_bytes, parameters}.
COMPILED_STEPS: dict[tuple, dict] = {}
SOURCES = {"xla": "XLA's memory analysis of the compiled step", "counts": "parameter, slot and activation counts"}


def step_key(spec: RunSpec) -> tuple:
    """What one training step's compiled memory depends on, the batch aside (it scales with that)."""
    return (
        spec.model,
        spec.model_sha256,
        spec.backend,
        spec.device,
        spec.precision,
        spec.image_size,
        spec.seq_len,
        spec.width,
        spec.layers,
        spec.data,
    )


def know_compiled(spec: RunSpec, facts: dict) -> None:
    COMPILED_STEPS[step_key(spec)] = dict(facts)


def estimable(spec: RunSpec) -> bool:
    return spec.model in catalog.WORKLOADS or spec.model in USER_MODEL_FACTS


# keras.applications' models at their default shapes: parameters, and forward activations per
# example (values kept for the backward pass: conv and activation outputs, ~25M for ResNet-50 at
# 224 px, about as many for Inception-v3 at 299 px), which scale with the image area.
APPLICATIONS = {
    "resnet50": {"params": 25_636_712, "activations": 25_000_000, "image_size": 224},
    "inception_v3": {"params": 23_851_784, "activations": 25_000_000, "image_size": 299},
}
# The graph of a model of hundreds of layers, beyond FRAMEWORK_BYTES: the fixed part of ResNet-50's
# and Inception-v3's peak is 1.3-1.7 GB beyond their weights over two passes (docs/MEMORY.md).
APPLICATIONS_GRAPH_BYTES = 0.5 * GB
BILSTM_EMBEDDING = 256  # as dashbench.engine.workloads.text (the catalog's notes say so too)
# TensorFlow's while-loop LSTM holds about this many copies of its weights around its first step,
# whatever the batch and sequence length (measured at widths 256-1024, lengths 50-200: 1.4 GB at
# width 1024, where the weights are 42 MB; docs/MEMORY.md).
LSTM_WEIGHT_COPIES = 32


@dataclass(frozen=True)
class Estimate:
    """A run's memory in bytes: what grows with the batch (per example) and what does not."""

    params: int
    per_example: float
    fixed: float
    batch_size: int
    source: str = "counts"  # SOURCES: XLA's analysis of the compiled step, or the counts

    @property
    def total(self) -> float:
        return self.fixed + self.per_example * self.batch_size

    def max_batch(self, available: float) -> int:
        """The largest global batch whose estimate fits in `available` bytes (0: none)."""
        room = available - self.fixed
        return max(0, int(room // self.per_example)) if self.per_example > 0 else 0


def _graph_bytes(spec: RunSpec) -> float:
    """What the framework holds for this model beyond its weights and the batch (see the constants)."""
    if spec.model in APPLICATIONS:
        return APPLICATIONS_GRAPH_BYTES
    if spec.model == "bilstm" and spec.backend == "tensorflow":  # JAX's scan holds no such copies
        h, e = catalog.get(spec.model).shapes(spec).width, BILSTM_EMBEDDING
        return LSTM_WEIGHT_COPIES * _lstm_params(h, e) * FLOAT
    return 0.0


def _lstm_params(width: int, embedding: int) -> int:
    """The bidirectional LSTM's weights: two directions, four gates, each over input, state and bias."""
    return 2 * 4 * width * (embedding + width + 1)


def counts(spec: RunSpec) -> tuple[float, float, float]:
    """(parameters, activation values per example, input values per example) of the spec's model."""
    if spec.model in USER_MODEL_FACTS:
        facts = USER_MODEL_FACTS[spec.model]
        return float(facts["parameters"]), float(facts["activations"]), float(facts["inputs"]) + 1
    shapes = catalog.get(spec.model).shapes(spec)
    s, c, w = shapes.image_size, shapes.channels, shapes.width
    if spec.model == "conv2d":
        out = -(-s // 2)
        params = 25 * c * w
        activations = s * s * c + out * out * w + 2 * w
        return params, activations, s * s * c + w
    if spec.model == "fashion_mnist_cnn":
        params, activations, side, c_in = 0.0, 0.0, s, c
        for filters in (w, 2 * w, 4 * w):
            pooled = (side // 2) ** 2 * filters
            params += 4 * c_in + 25 * c_in * filters + filters  # BatchNorm, conv kernel and bias
            # BatchNorm out, conv out and its ELU, pooled, dropout out and its mask
            activations += side * side * c_in + 2 * side * side * filters + 3 * pooled
            side, c_in = side // 2, filters
        flat = side * side * c_in
        params += flat * 4 * w + 4 * w + 4 * w * shapes.classes + shapes.classes
        activations += flat + 4 * 4 * w + 3 * shapes.classes
        return params, activations, s * s * c + 1
    if spec.model in APPLICATIONS:
        app = APPLICATIONS[spec.model]
        area = (s / app["image_size"]) ** 2
        return app["params"], app["activations"] * max(area, 0.05), s * s * c + 1
    if spec.model == "bilstm":
        h, e, length = w, BILSTM_EMBEDDING, shapes.seq_len
        params = shapes.vocab * e + _lstm_params(h, e) + 2 * h * shapes.classes + shapes.classes
        # per step and direction: 4 gates, cell, tanh(cell), hidden (Keras keeps them for backprop)
        activations = length * e + 2 * length * 7 * h + 2 * h + 2 * shapes.classes
        return params, activations, length + 1
    if spec.model == "llama":
        return lm_shape.memory_counts(lm_shape.dims(w, shapes.layers, shapes.seq_len))
    raise SpecError("model", f"no memory estimate for {spec.model!r}")


def estimate(spec: RunSpec) -> Estimate:
    if step_key(spec) in COMPILED_STEPS:
        return _compiled_estimate(spec)
    params, activations, inputs = counts(spec)
    slots = (
        USER_MODEL_FACTS[spec.model]["slots"] if spec.model in USER_MODEL_FACTS else OPTIMIZER_SLOTS.get(spec.model, 2)
    )
    replicas = spec.replicas or 1 if spec.device == "cpu" else 1  # logical CPUs each hold a copy
    weights = params * FLOAT * (2 + slots) * replicas
    factor = BACKWARD_FACTOR
    if spec.backend == "jax" and on_host_cpu(spec):
        factor = XLA_CPU_BACKWARD_FACTORS.get(spec.model, XLA_CPU_BACKWARD_FACTOR)
    per_example = (activations * factor + 2 * inputs) * FLOAT
    return Estimate(
        params=int(params),
        per_example=per_example,
        fixed=FRAMEWORK_BYTES + _graph_bytes(spec) + weights,
        batch_size=spec.batch_size,
    )


def _compiled_estimate(spec: RunSpec) -> Estimate:
    """From the compiled step where this process has it; on the host's CPU plus the framework, the numpy
    batch the device copy was made from, and a copy of the state on each logical CPU device."""
    facts = COMPILED_STEPS[step_key(spec)]
    fixed, per_example = facts["fixed_bytes"], facts["per_example_bytes"]
    if on_host_cpu(spec):
        fixed += FRAMEWORK_BYTES + ((spec.replicas or 1) - 1) * facts["state_bytes"]
        per_example += facts["batch_bytes_per_example"]
    return Estimate(facts["parameters"], per_example, fixed, spec.batch_size, source="xla")


def on_host_cpu(spec: RunSpec) -> bool:
    """Whether the run computes on the host's CPU: asked for, or `auto` on a host with no accelerator."""
    return spec.device == "cpu" or (spec.device == "auto" and not _has_accelerator())


def _has_accelerator() -> bool:
    return bool(glob.glob("/dev/nvidia[0-9]*") or glob.glob("/dev/accel[0-9]*") or glob.glob("/dev/vfio/[0-9]*"))
