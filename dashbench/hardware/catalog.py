"""The hardware catalog: one sourced row per accelerator variant (data/hardware.csv).

Each row holds dense peaks per precision (datasheets often quote 2:4-sparse figures, twice these),
memory size and bandwidth, the chip-to-chip link and topology, TDP, its source and the date it was
read. A row's `name` is the variant ("H100 SXM", "H100 PCIe"); its `family` is what runs, prices and
--devices call it ("H100"), and a family name selects every variant. MFU reads its peaks (peaks.py)
and the predictor its bandwidths. No framework here.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
HARDWARE_CSV = Path(__file__).parent.parent / "data" / "hardware.csv"
# Another catalog in place of the shipped one (a test's planted row; a site's own table).
HARDWARE_CSV_ENV = "DASHBENCH_HARDWARE_CSV"
# A family's row when only the family is known (a run records "H100"): the part the figures of
# published tables and of the price catalog's rows are for.
DEFAULT_VARIANT = {
    "H100": "H100 SXM",
    "A100": "A100 SXM 40GB",
    "P100": "P100 SXM2",
    "V100": "V100 SXM2",
    "H200": "H200 SXM",
}
# A run's precision (RunSpec) → the catalog's.
RUN_PRECISION = {"float32": "fp32", "mixed_bfloat16": "bf16", "mixed_float16": "fp16"}


@dataclass(frozen=True)
class Chip:
    name: str
    family: str
    kind: str  # "tpu" | "gpu" (a planted "cpu" row in tests)
    peaks: dict = field(hash=False)  # dense TFLOP/s per chip; a precision the chip lacks is absent
    memory_gb: float
    memory_bw_gbs: float
    link_gbs: Optional[float]  # chip-to-chip, per chip, bidirectional
    topology: str
    tdp_w: Optional[float]
    source: str
    as_of: str
    note: str = ""

    @property
    def unconfirmed(self) -> bool:
        return "unconfirmed" in self.source.lower()


def _number(text: str) -> Optional[float]:
    return float(text) if text and text.strip() else None


def _chip(row: dict) -> Chip:
    peaks = {p: float(row[p]) for p in PRECISIONS if _number(row.get(p, ""))}
    return Chip(
        name=row["name"].strip(),
        family=(row.get("family") or row["name"]).strip(),
        kind=(row.get("kind") or "gpu").strip(),
        peaks=peaks,
        memory_gb=_number(row.get("memory_gb", "")) or 0.0,
        memory_bw_gbs=_number(row.get("memory_bw_gbs", "")) or 0.0,
        link_gbs=_number(row.get("link_gbs", "")),
        topology=(row.get("topology") or "").strip(),
        tdp_w=_number(row.get("tdp_w", "")),
        source=(row.get("source") or "").strip(),
        as_of=(row.get("as_of") or "").strip(),
        note=(row.get("note") or "").strip(),
    )


def path() -> str:
    return os.environ.get(HARDWARE_CSV_ENV) or str(HARDWARE_CSV)


@lru_cache(maxsize=4)
def _chips(csv_path: str) -> tuple[Chip, ...]:
    with open(csv_path, newline="") as handle:
        return tuple(_chip(row) for row in csv.DictReader(handle))


def chips() -> tuple[Chip, ...]:
    return _chips(path())


def names() -> list[str]:
    return [c.name for c in chips()]


def families() -> list[str]:
    return list(dict.fromkeys(c.family for c in chips()))


def _key(text: str) -> str:
    return re.sub(r"[\s_-]+", "", text).lower()


def find(name: str) -> Optional[Chip]:
    """The variant named, or a family's default variant (its only one, or DEFAULT_VARIANT's);
    case- and space-blind. None when nothing matches."""
    key = _key(name or "")
    for chip in chips():
        if _key(chip.name) == key:
            return chip
    members = [c for c in chips() if _key(c.family) == key]
    if not members:
        return None
    default = DEFAULT_VARIANT.get(members[0].family)
    return next((c for c in members if c.name == default), members[0])


def get(name: str) -> Chip:
    chip = find(name)
    if chip is None:
        raise LookupError(
            f"device: unknown {name!r}; known: {', '.join(names())} (or a family: {', '.join(families())})"
        )
    return chip


def select(wanted: list[str]) -> list[Chip]:
    """Chips for these names in catalog order: a variant selects itself, a family all its variants."""
    picked: set[str] = set()
    for name in wanted:
        key = _key(name)
        members = [c.name for c in chips() if _key(c.family) == key]
        picked.update(members or [get(name).name])
    return [c for c in chips() if c.name in picked]


def resolve(device_name: str) -> Optional[Chip]:
    """A device as discovery or a run names it ("NVIDIA H100 80GB HBM3", "Tesla P100-PCIE-16GB",
    "H100", "TPU v6e") → its row, or None. A PCIe part gets the family's PCIe row; an 80 GB A100
    its 80 GB row."""
    chip = find(device_name)
    if chip is not None:
        return chip
    for family in sorted(families(), key=len, reverse=True):
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(family)}(?![0-9A-Za-z])", device_name or "", re.IGNORECASE):
            return _variant(family, device_name)
    return None


def _variant(family: str, device_name: str) -> Chip:
    members = [c for c in chips() if c.family == family]
    text = _key(device_name)
    for chip in members:
        distinct = _key(chip.name[len(family) :])
        if "pcie" in text and "pcie" in distinct:
            return chip
        if "80gb" in text and "80gb" in distinct:
            return chip
    return get(family)


def peak(chip: Chip, precision: str) -> Optional[float]:
    """Dense TFLOP/s per chip at a catalog precision (or a run's: float32, mixed_bfloat16, …); None
    where the chip lacks it. A TPU runs float32 matmuls as bf16 passes, so its fp32 peak is bf16's."""
    precision = RUN_PRECISION.get(precision, precision)
    if precision not in PRECISIONS:
        raise ValueError(f"precision: unknown {precision!r}; known: {', '.join(PRECISIONS)}")
    if chip.kind == "tpu" and precision in ("fp32", "tf32"):
        return chip.peaks.get("bf16")
    return chip.peaks.get(precision)
