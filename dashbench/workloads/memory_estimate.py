"""A run's memory need before it is launched: from its workload's counts (dashbench.workloads.registry: parameters,
their gradients and the optimizer's slots, the synthetic batch, the activations of one example times
the global batch, fixed allowances for the framework and the graph it builds), or from XLA's memory
analysis of the compiled step where the run's process recorded one. dashbench.workloads.memory checks it
against what the host or the device has. No TensorFlow here.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass

from dashbench.core.spec import RunSpec, SpecError
from dashbench.workloads import registry
from dashbench.workloads.memory_counts import FLOAT

GB = 1e9
# A run process's own footprint: 0.8-1.15 GB of a small model's peak under TensorFlow is neither its
# weights nor its batch, 0.9-1.2 GB under JAX (docs/MEMORY.md).
FRAMEWORK_BYTES = 1.25 * GB
BACKWARD_FACTOR = 1.5  # the activations kept for the backward pass, plus their transient gradients
# JAX on the CPU (XLA:CPU) grows by more per example than TensorFlow does (0.5-1.0× the activations'
# float32 bytes): 1.4-1.6× for ResNet-50, Inception-v3 and the BiLSTM, and 2.1× and 3.0× for the two
# small models' 5×5 convolutions over few channels (docs/MEMORY.md). On accelerators XLA's memory is
# not measured here; ACCELERATOR_MARGIN stands for it.
XLA_CPU_BACKWARD_FACTOR = 2.0  # a workload's own (its registry entry's xla_cpu_backward) where it has one
WARN_FRACTION = 0.5  # warn when a run's estimate passes this share of the available memory
# An accelerator's run is refused only past this many times its memory. There the estimate errs high
# (activations counted in float32 and unfused, where mixed precision halves them and XLA fuses them:
# the seeds' ResNet-50 at 256 a V100 or 128 a TPU v2 core is estimated at 2.5× memory that it fits
# in), and running out fails the run, not the host; the host is guarded by its own check below.
ACCELERATOR_MARGIN = 4.0
GIB = 2**30


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
    return registry.get(spec.model).memory is not None


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


def counts(spec: RunSpec) -> tuple[float, float, float]:
    """(parameters, activation values per example, input values per example) of the spec's model."""
    workload = registry.get(spec.model)
    if workload.memory is None:
        raise SpecError("model", f"no memory estimate for {spec.model!r}")
    return workload.memory(None if workload.is_file else workload.shapes(spec))


def estimate(spec: RunSpec) -> Estimate:
    if step_key(spec) in COMPILED_STEPS:
        return _compiled_estimate(spec)
    workload = registry.get(spec.model)
    params, activations, inputs = counts(spec)
    slots = workload.optimizer_slots
    replicas = spec.replicas or 1 if spec.device == "cpu" else 1  # logical CPUs each hold a copy
    weights = params * FLOAT * (2 + slots) * replicas
    factor = BACKWARD_FACTOR
    if spec.backend == "jax" and on_host_cpu(spec):
        factor = workload.xla_cpu_backward or XLA_CPU_BACKWARD_FACTOR
    per_example = (activations * factor + 2 * inputs) * FLOAT
    # What the framework holds for this model beyond its weights and the batch.
    graph = workload.graph_bytes(workload.shapes(spec), spec.backend) if workload.graph_bytes else 0.0
    return Estimate(
        params=int(params),
        per_example=per_example,
        fixed=FRAMEWORK_BYTES + graph + weights,
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
