"""The roofline: one training step of a profile on `chips` chips of one kind, and the bound.

    compute       = flops / (chips × peak × efficiency)
    memory        = bytes accessed / (chips × HBM bandwidth × efficiency)
    communication = 2 (n − 1) / n × grad_bytes / chip-to-chip bandwidth    (a ring all-reduce; 0 for one chip)
    step          = overhead + max(compute, memory, communication)

The max is the overlap rule: the three run at once and the slowest sets the step (XLA overlaps
the gradient all-reduce with the backward pass; a step that is not overlapped is slower than this).
One fitted efficiency scales compute and memory alike; the overhead (the host's per-step cost,
seconds) matters only for small steps and is fitted only where several measured runs allow it.
The chip and the profile are read by attribute (dashbench.hardware.catalog.Chip and
dashbench.workloads.profile.StepProfile), so nothing here imports the engine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

BOUNDS = ("compute", "memory", "communication")
# What a run's precision computes at, per the catalog's precisions.
RUN_PRECISIONS = {"float32": "fp32", "mixed_bfloat16": "bf16", "mixed_float16": "fp16"}
CHIP_PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


class PredictError(ValueError):
    """Bad input to a prediction, worded as one line naming the field (as SpecError)."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


@dataclass(frozen=True)
class Efficiency:
    """What the roofline's ideal times are scaled by, and where that came from."""

    compute: float
    overhead_s: float = 0.0
    source: str = ""
    # The leave-one-out relative errors of step time (predicted / measured − 1) of the group the
    # efficiency was fitted on; empty when nothing gives a band, with `no_band` saying why.
    errors: tuple = ()
    no_band: str = ""


@dataclass(frozen=True)
class FormulaStep:
    """A step known only by its counts (a published row's, by formula; a run stored before runs
    carried their profile, by its result's FLOPs): the fields the roofline reads of a StepProfile
    (dashbench.workloads.profile), with no bytes accessed."""

    model: str
    batch_size: int
    precision: str
    flops: float
    params: int
    grad_bytes: float
    unit: str
    tokens_per_example: Optional[int] = None
    bytes_accessed: Optional[float] = None
    flops_source: str = "formula"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Prediction:
    device: str
    family: str
    chips: int
    precision: str
    step_s: float
    compute_s: float
    memory_s: Optional[float]
    communication_s: Optional[float]
    bound: str
    throughput: float  # per second, all chips, in `unit`
    throughput_per_chip: float
    unit: str
    mfu: Optional[float]
    step_low_s: Optional[float]
    step_high_s: Optional[float]
    throughput_low: Optional[float]
    throughput_high: Optional[float]
    calibration: str
    band_note: str = ""
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"kind": "prediction"}


def chip_precision(chip, precision: str) -> str:
    """The catalog precision a run at `precision` computes at on `chip`: float32 on a GPU with TF32
    runs its matmuls in TF32 (TensorFlow's and JAX's default there), on a TPU in bf16 passes (XLA's
    default precision there). A precision the chip lacks is a PredictError naming the field."""
    wanted = RUN_PRECISIONS.get(precision, precision)
    if wanted not in CHIP_PRECISIONS:
        known = ", ".join((*CHIP_PRECISIONS, *RUN_PRECISIONS))
        raise PredictError("precision", f"unknown {precision!r}; one of: {known}")
    peaks = chip.peaks or {}
    if wanted == "fp32" and chip.kind == "tpu" and "fp32" not in peaks and "bf16" in peaks:
        return "bf16"
    if wanted == "fp32" and chip.kind == "gpu" and "tf32" in peaks:
        return "tf32"
    if wanted not in peaks:
        has = ", ".join(p for p in CHIP_PRECISIONS if p in peaks) or "none"
        raise PredictError("precision", f"{chip.name} has no {wanted} peak; it has: {has}")
    return wanted


def ideal_times(profile, chip, chips: int, precision: str) -> tuple[float, Optional[float], Optional[float]]:
    """Compute, memory and communication seconds at full efficiency (memory None without bytes,
    communication None where the catalog has no chip-to-chip figure)."""
    if isinstance(chips, bool) or not isinstance(chips, int) or chips < 1:
        raise PredictError("chips", f"must be an integer >= 1, got {chips!r}")
    peak = chip.peaks[chip_precision(chip, precision)] * 1e12
    compute = profile.flops / (chips * peak)
    memory = None
    if profile.bytes_accessed and chip.memory_bw_gbs:
        memory = profile.bytes_accessed / (chips * chip.memory_bw_gbs * 1e9)
    return compute, memory, communication_s(profile.grad_bytes, chip.link_gbs, chips)


def communication_s(grad_bytes: float, link_gbs: Optional[float], chips: int) -> Optional[float]:
    """A ring all-reduce of the gradients: each chip sends and receives 2 (n − 1) / n of them over its
    link (the catalog's bidirectional figure: a ring runs both ways at once)."""
    if chips <= 1 or not grad_bytes:
        return 0.0
    if not link_gbs:
        return None  # the catalog has no figure for the link: the term is left out, and said
    return 2.0 * (chips - 1) / chips * grad_bytes / (link_gbs * 1e9)


def roofline_s(profile, chip, chips: int, precision: str) -> float:
    """The step at full efficiency and no overhead: what a calibration point's efficiency divides."""
    compute, memory, _ = ideal_times(profile, chip, chips, precision)
    return max(compute, memory or 0.0)


def predict(profile, chip, chips: int, calib, precision: Optional[str] = None) -> Prediction:
    """One prediction. `calib` is an Efficiency, or anything with `.efficiency(profile, chip)`
    returning one (calibration.Calibration)."""
    precision = precision or profile.precision
    eff = calib if isinstance(calib, Efficiency) else calib.efficiency(profile, chip)
    compute0, memory0, comm = ideal_times(profile, chip, chips, precision)
    compute = compute0 / eff.compute
    memory = None if memory0 is None else memory0 / eff.compute
    times = {"compute": compute, "memory": memory or 0.0, "communication": comm or 0.0}
    bound = max(BOUNDS, key=lambda b: times[b])
    step = eff.overhead_s + times[bound]
    work = profile.batch_size * (profile.tokens_per_example or 1) if profile.unit == "tokens" else profile.batch_size
    peak = chip.peaks[chip_precision(chip, precision)] * 1e12
    low, high = band(step, eff.errors)
    return Prediction(
        device=chip.name,
        family=chip.family,
        chips=chips,
        precision=precision,
        step_s=step,
        compute_s=compute,
        memory_s=memory,
        communication_s=comm,
        bound=bound,
        throughput=work / step,
        throughput_per_chip=work / step / chips,
        unit=profile.unit,
        mfu=profile.flops / step / (chips * peak),
        step_low_s=low,
        step_high_s=high,
        throughput_low=None if high is None else work / high,
        throughput_high=None if low is None else work / low,
        calibration=eff.source,
        band_note="; ".join(n for n in (eff.no_band, _link_note(chip, comm)) if n),
    )


def _link_note(chip, comm: Optional[float]) -> str:
    if comm is not None:
        return ""
    return f"no chip-to-chip bandwidth for {chip.name} in the catalog: communication left out"


def band(step: float, errors) -> tuple[Optional[float], Optional[float]]:
    """The step times the measured one would have been, by the leave-one-out errors seen: a
    prediction `e` too high (predicted / measured − 1) means the truth is step / (1 + e)."""
    if not errors:
        return None, None
    # The band always holds the prediction itself, however one-sided the errors were.
    return step / (1 + max(max(errors), 0.0)), step / (1 + min(min(errors), 0.0))
