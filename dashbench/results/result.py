"""RunResult: what was measured. Built by the engine, stored as JSON by the store, loaded back by it,
put into words by results/result_text.py and checked by results/result_checks.py.

No TensorFlow here. The JSON keys are the stored format: `to_dict()` writes exactly the keys the
engine always wrote, and `from_dict()` reads any result JSON written since (missing keys get their
defaults, unknown ones are kept as they are).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, Optional

from dashbench.results.result_checks import _RULES

# Named here too, where their callers have always found them.
from dashbench.results.result_text import FLAG_SHORT, FLAG_TEXT, ResultText, phase_text, short_id  # noqa: F401


@dataclass(frozen=True)
class RunResult(ResultText):
    # Field order is the stored JSON's key order. Every field has a default so that results written
    # by older versions (or stand-in engines in tests) still load.
    model: Optional[str] = None
    unit: str = "examples"
    device: Optional[str] = None  # the resolved kind: cpu, gpu or tpu
    backend: Optional[str] = None  # Keras backend: tensorflow | jax (None: written before backends, tensorflow)
    backend_version: Optional[str] = None  # that framework's version, e.g. "2.19.1" or "0.10.2"
    accelerator: Optional[str] = None  # "CPU", "V100", "TPU v2", ...
    accelerator_count: Optional[int] = None
    device_names: list[str] = field(default_factory=list)
    replicas: Optional[int] = None
    global_batch_size: Optional[int] = None
    per_replica_batch_size: Optional[int] = None
    precision: Optional[str] = None
    xla: bool = False
    data: Optional[str] = None
    status: str = "done"
    examples_per_sec: Optional[float] = None
    examples_per_sec_ci95: list[Optional[float]] = field(default_factory=lambda: [None, None])  # hi None: unbounded
    repeats: Optional[list[float]] = None  # each repeat's throughput (--repeats > 1); examples_per_sec is their median
    repeat_cv: Optional[float] = None  # their coefficient of variation
    step_time_median_s: Optional[float] = None
    step_time_p10_s: Optional[float] = None
    step_time_p90_s: Optional[float] = None
    step_time_std_s: Optional[float] = None
    samples: Optional[int] = None  # measured host loops
    steps: Optional[int] = None
    steps_per_loop: Optional[int] = None
    compile_s: Optional[float] = None  # tracing + compilation + the first loop; not in the throughput
    flops_per_example: Optional[float] = None  # one training step (forward + backward)
    forward_flops_per_example: Optional[float] = None
    flops_source: Optional[str] = None  # what MFU used: "analytic" where a count exists, else "compiler"
    analytic_flops_per_example: Optional[float] = None
    compiler_flops_per_example: Optional[float] = None
    achieved_tflops: Optional[float] = None
    peak_tflops: Optional[float] = None  # all accelerators used together
    peak_source: Optional[str] = None  # "datasheet" | "measured" | "calibrated" | "provisional" | None (no peak)
    peak_as_of: Optional[float] = None  # a CPU's peak: when it was measured (epoch s), so MFUs say their denominator
    mfu: Optional[float] = None
    flags: list[str] = field(default_factory=list)
    losses: list[Optional[float]] = field(default_factory=list)  # one per host loop, warm-up included
    placement: dict[str, list[str]] = field(default_factory=dict)  # variables / ops → device strings
    shapes: dict[str, Any] = field(default_factory=dict)
    # A user's model (--model file.py:build or model.keras): its file, builder, sha256, parameters,
    # inputs and outputs [{name, shape, dtype}], loss, optimizer and synthetic task (model_file.INFO_KEYS).
    model_info: Optional[dict[str, Any]] = None
    env: dict[str, Any] = field(default_factory=dict)
    host_load: Optional[dict[str, Any]] = None  # the machine during the measured window (engine.hostload)
    # Measured peak memory beside the pre-run estimate (engine/peak_memory.py): kind host|device, source,
    # peak_bytes and window_peak_bytes (summed over devices), capacity_bytes (one device's memory or the
    # host's), devices [{name, peak_bytes, window_peak_bytes, capacity_bytes}], host_peak_bytes,
    # estimate_bytes, estimate_source (xla|counts), estimate_ratio (peak / estimate).
    memory: Optional[dict[str, Any]] = None
    # A to-accuracy run's curves, time to target and seeds (dashbench/core/accuracy.py holds its shape).
    accuracy: Optional[dict[str, Any]] = None
    # The store unreachable while the run went (jobs/store_buffer.py): seconds, outages, text.
    store_outage: Optional[dict[str, Any]] = None
    spec: dict[str, Any] = field(default_factory=dict)
    run_id: Optional[str] = None  # set once the run is stored; absent from the JSON while None
    # Keys this version does not know (a newer writer's): kept, and written back as they came.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in _json_fields()}
        for optional in _OMITTED_WHEN_NONE:  # absent from older results: kept absent
            if out[optional] is None:
                del out[optional]
        out.update(self.extra)
        return _copied(out)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunResult":
        if not isinstance(data, dict):
            raise TypeError(f"result: must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in _json_fields()}
        # A null where a field has a default (a list, an object, the unit) reads as that default.
        values = {k: v for k, v in _copied(data).items() if k in known and not (v is None and k in _DEFAULTED)}
        return cls(**values, extra={k: _copied(v) for k, v in data.items() if k not in known})

    @classmethod
    def check(cls, data: Any, finite: bool = True) -> None:
        """Does `data` hold only what the engine writes (types, finite numbers >= 0, known flags)?
        Raises ValueError "field: why". `finite=False` lets numbers be NaN, infinite or negative:
        a stored row may hold those and still be shown (as blanks). from_dict stays tolerant."""
        if not isinstance(data, dict):
            raise ValueError(f"must be a JSON object, got {type(data).__name__}")
        for name, value in data.items():
            rule = _RULES.get(name)
            if rule is not None and not (value is None and name in _DEFAULTED):
                rule(name, value, finite)

    def replace(self, **changes) -> "RunResult":
        return dataclasses.replace(self, **changes)


_OMITTED_WHEN_NONE = (
    "run_id",
    "backend",
    "backend_version",
    "repeats",
    "repeat_cv",
    "host_load",
    "memory",
    "accuracy",
    "store_outage",
    "model_info",
    "flops_source",
    "analytic_flops_per_example",
    "compiler_flops_per_example",
    "peak_as_of",
)


def _json_fields():
    return [f for f in fields(RunResult) if f.name != "extra"]


_DEFAULTED = {
    "unit",
    "device_names",
    "examples_per_sec_ci95",
    "flags",
    "losses",
    "placement",
    "shapes",
    "env",
    "spec",
    "xla",
    "status",
}


def _copied(value):
    """A deep copy of plain JSON data, so a RunResult never shares a list with its caller."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copied(v) for v in value]
    return value
