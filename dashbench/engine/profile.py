"""A training step's cost profile (dashbench.workloads.profile.StepProfile), with no device and no
weights: counted by XLA through the JAX backend (engine/jax/profile.py says how), whatever backend
the workload will run on."""

from __future__ import annotations

from dashbench.core.spec import RunSpec
from dashbench.workloads.profile import StepProfile


def step_profile(spec: RunSpec) -> StepProfile:
    from dashbench.engine import backends

    return backends.get("jax").step_profile(spec)
