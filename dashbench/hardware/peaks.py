"""Peak dense throughput per accelerator, for MFU and the above-peak check.

Datasheet peaks (the hardware catalog, data/hardware.csv) are hard limits. A CPU has no datasheet figure that TensorFlow
reaches, so its peak is measured inside the run process (dashbench.engine.probe.cpu_peak_tflops).
That measurement is soft (oneDNN convolutions run at about the matmul rate), so a CPU figure is
flagged only when it is well above it (CPU_SOFT_MARGIN). No TensorFlow here.
"""

from __future__ import annotations

from typing import Optional

from dashbench.hardware import catalog

# The catalog's data file and its override (the peak table is the catalog's peaks now).
PEAKS_CSV = catalog.HARDWARE_CSV
PEAKS_CSV_ENV = catalog.HARDWARE_CSV_ENV
# A measured CPU peak is only an estimate of the attainable rate: flag only figures this far above it.
CPU_SOFT_MARGIN = 1.5
# Before `doctor` has calibrated a host, its CPU runs share the first probe taken there (peak_source
# PROVISIONAL), so that their MFUs compare; what a run's MFU then says about itself:
PROVISIONAL = "provisional"
PROVISIONAL_NOTE = "MFU against a first probe of this CPU, not calibrated: run `python -m dashbench doctor`"

_PRECISION_COLUMNS = {
    "float32": ("fp32",),
    "mixed_float16": ("fp16", "fp32"),
    "mixed_bfloat16": ("bf16", "fp32"),
}


def _row(chip: catalog.Chip) -> dict:
    row = {f"{p}_tflops": chip.peaks.get(p) for p in catalog.PRECISIONS}
    return row | {"accelerator": chip.name, "memory_gb": chip.memory_gb, "source": chip.source, "as_of": chip.as_of}


def table() -> dict[str, dict]:
    """Accelerator name → row (floats for figures, None where the datasheet has none): every family
    as runs and prices name it ("H100": its default variant) and every variant ("H100 PCIe")."""
    rows = {family: _row(catalog.get(family)) for family in catalog.families()}
    return rows | {chip.name: _row(chip) for chip in catalog.chips()}


def datasheet_peak_tflops(accelerator: str, precision: str, tf32: bool = False) -> Optional[float]:
    """Per-chip dense peak for this precision, or None when the accelerator is not in the catalog.

    TPUs run float32 matmuls as bf16 passes, so their bf16 figure is the peak for every precision.
    GPUs with TF32 enabled (TensorFlow's default on Ampere and later) use the TF32 figure for float32.
    """
    chip = catalog.resolve(accelerator)
    if chip is None:
        return None
    if chip.kind == "tpu":
        return chip.peaks.get("bf16")
    columns = _PRECISION_COLUMNS[precision]
    if precision == "float32" and tf32 and chip.peaks.get("tf32"):
        columns = ("tf32",)
    return next((chip.peaks[c] for c in columns if chip.peaks.get(c)), None)


def peak_source(accelerator: str) -> str:
    return "datasheet" if catalog.resolve(accelerator) is not None else "measured"


def compute_dtype(precision: str) -> str:
    return {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}[precision]
