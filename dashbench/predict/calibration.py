"""The efficiencies the roofline is scaled by, fitted per device family and kind of workload, and
their measured error.

A calibration point is one measured step: a profile, the chip and chip count it ran on, and the
seconds it took (a published row, or a run in the store). Its efficiency is the roofline at full
efficiency over the measured step. A group (family × kind of workload) is fitted as the median of
its points' efficiencies; a group of only measured runs (three or more) also fits a per-step
overhead, by least squares of step = overhead + roofline / efficiency. The band of a group is its
leave-one-out error: each point predicted from the others, as the predictor would have predicted it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Iterable, Optional

from dashbench.predict.roofline import Efficiency, roofline_s

KINDS = ("LM", "conv", "recurrent", "other")
_KIND_OF = {
    "llama": "LM",
    "conv2d": "conv",
    "fashion_mnist_cnn": "conv",
    "resnet50": "conv",
    "inception_v3": "conv",
    "bilstm": "recurrent",
}
# With nothing fitted anywhere: a middling efficiency, said as an assumption, never given a band.
ASSUMED_EFFICIENCY = 0.4


def workload_kind(model: str, unit: str = "examples") -> str:
    """LM, conv, recurrent or other (a model file, unless it counts tokens)."""
    base = str(model).split("@")[0]
    return _KIND_OF.get(base, "LM" if unit == "tokens" else "other")


def device_family(chip) -> str:
    """TPU, NVIDIA, AMD or CPU: the groups efficiencies are fitted over."""
    kind = str(getattr(chip, "kind", "")).lower()
    if kind == "tpu":
        return "TPU"
    if kind == "cpu":
        return "CPU"
    return "AMD" if str(chip.name).upper().startswith("MI") else "NVIDIA"


@dataclass(frozen=True)
class Point:
    """One measured step: `step_s` seconds for `profile` on `chips` of `chip` at `precision`."""

    key: str
    profile: object
    chip: object
    chips: int
    precision: str
    step_s: float
    origin: str  # "published" or "measured" (a run in the store)
    source: str = ""

    @property
    def group(self) -> tuple[str, str]:
        return device_family(self.chip), workload_kind(self.profile.model, self.profile.unit)

    @property
    def efficiency(self) -> float:
        return roofline_s(self.profile, self.chip, self.chips, self.precision) / self.step_s


class Calibration:
    """Points, fitted on demand: `efficiency(profile, chip)` walks from the most specific fit to the
    least (this workload on this device; the family and kind; the family; the kind on any family)."""

    def __init__(self, points: Iterable[Point] = ()):
        self.points = tuple(points)
        self._errors: dict[tuple, tuple] = {}

    def without(self, key: str) -> "Calibration":
        return Calibration(p for p in self.points if p.key != key)

    def plus(self, points: Iterable[Point]) -> "Calibration":
        return Calibration((*self.points, *points))

    def group_points(self, family: str, kind: str) -> list[Point]:
        return [p for p in self.points if p.group == (family, kind)]

    def efficiency(self, profile, chip, banded: bool = True) -> Efficiency:
        """`banded` False skips the band (predicting a left-out point needs none)."""
        family, kind = device_family(chip), workload_kind(profile.model, profile.unit)
        same = [
            p
            for p in self.points
            if p.origin == "measured" and p.profile.model == profile.model and p.chip.name == chip.name
        ]
        group = self.group_points(family, kind)
        errors, no_band = self._band(family, kind) if banded else ((), "")
        if same:
            fit = _fit(same)
            return replace(
                fit, source=f"your runs of this workload on {chip.name} ({len(same)})", errors=errors, no_band=no_band
            )
        if group:
            return replace(_fit(group), source=_fitted_on(group, f"{family} {kind}"), errors=errors, no_band=no_band)
        for points, what in (
            ([p for p in self.points if p.group[0] == family], f"{family}, other workloads"),
            ([p for p in self.points if p.group[1] == kind], f"{kind} on other families"),
        ):
            if points:
                why = f"nothing calibrates {kind} workloads on {family}: the efficiency is borrowed, no band"
                return replace(_fit(points), source=f"borrowed: {_fitted_on(points, what)}", no_band=why)
        why = f"nothing calibrates {family}: efficiency assumed {ASSUMED_EFFICIENCY:.0%}, no band"
        return Efficiency(compute=ASSUMED_EFFICIENCY, source="assumed", no_band=why)

    def _band(self, family: str, kind: str) -> tuple[tuple, str]:
        if (family, kind) not in self._errors:
            self._errors[(family, kind)] = tuple(e for _, e in self.leave_one_out(family, kind))
        errors = self._errors[(family, kind)]
        if errors:
            return errors, ""
        count = len(self.group_points(family, kind))
        return (
            (),
            f"{count} point{'s' if count != 1 else ''} calibrate {kind} on {family}: no leave-one-out error, no band",
        )

    def leave_one_out(self, family: Optional[str] = None, kind: Optional[str] = None) -> list[tuple[Point, float]]:
        """(point, predicted / measured − 1) for each point of a group of two or more, predicted from
        the others (every group when family and kind are None)."""
        out = []
        for point in self.points:
            if (family, kind) != (None, None) and point.group != (family, kind):
                continue
            if len(self.group_points(*point.group)) < 2:
                continue
            out.append((point, predicted_step(self.without(point.key), point) / point.step_s - 1))
        return out


def predicted_step(calib: Calibration, point: Point) -> float:
    eff = calib.efficiency(point.profile, point.chip, banded=False)
    return eff.overhead_s + roofline_s(point.profile, point.chip, point.chips, point.precision) / eff.compute


def _fitted_on(points: list[Point], what: str) -> str:
    origins = sorted({p.origin for p in points})
    return f"fitted to {len(points)} {' and '.join(origins)} point{'s' if len(points) != 1 else ''} ({what})"


def _fit(points: list[Point]) -> Efficiency:
    """The median efficiency; with three or more measured runs, an overhead too (least squares of
    step = overhead + roofline × slope, the overhead kept ≥ 0)."""
    if len(points) >= 3 and all(p.origin == "measured" for p in points):
        xs = [roofline_s(p.profile, p.chip, p.chips, p.precision) for p in points]
        ts = [p.step_s for p in points]
        mx, mt = statistics.fmean(xs), statistics.fmean(ts)
        sxx = sum((x - mx) ** 2 for x in xs)
        if sxx > 0:
            slope = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sxx
            overhead = mt - slope * mx
            if slope > 0 and overhead >= 0:
                return Efficiency(compute=1.0 / slope, overhead_s=overhead)
    return Efficiency(compute=statistics.median(p.efficiency for p in points))
