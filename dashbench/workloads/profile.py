"""A training step's cost profile: what one step of a workload at a batch size and precision costs,
counted with no device (dashbench.engine.profile computes it; the predictor and a stored run read it).
No framework here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Optional

# A run's precision (RunSpec) → the profile's.
PRECISION = {"float32": "fp32", "mixed_bfloat16": "bf16", "mixed_float16": "fp16"}


@dataclass
class StepProfile:
    model: str  # workload name or "file.py:builder"
    batch_size: int  # the global batch the counts are for
    precision: str  # "fp32" | "bf16" | "fp16"
    flops: float  # one training step (forward + backward + update), whole batch
    flops_source: str  # "xla" | "formula"
    bytes_accessed: Optional[float]  # XLA's "bytes accessed" for the step, or a formula's
    bytes_source: Optional[str]  # "xla" | "formula"
    params: int
    param_bytes: float  # parameters as stored (fp32 master weights)
    optimizer_bytes: float  # optimizer slots
    grad_bytes: float  # what a data-parallel step all-reduces (gradient bytes, one copy)
    tokens_per_example: Optional[int]  # sequence length for an LM, else None
    unit: str  # "examples" or "tokens": what throughput counts
    # How the figures were made, in words (e.g. "XLA on 1 and 2 layers, extrapolated to 32").
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "StepProfile":
        """From to_dict's output; keys it does not know (a newer writer's) are left out."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def flops_per_unit(self) -> float:
        """FLOPs per example, or per token for an LM."""
        return self.flops / (self.batch_size * (self.tokens_per_example or 1))
