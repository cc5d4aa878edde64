"""Peak dense throughput per accelerator, for MFU and the above-peak check.

Datasheet peaks (data/peaks.csv) are hard limits. A CPU has no datasheet figure that TensorFlow
reaches, so its peak is measured inside the run process (dashbench.engine.probe.cpu_peak_tflops).
That measurement is soft (oneDNN convolutions run at about the matmul rate), so a CPU figure is
flagged only when it is well above it (CPU_SOFT_MARGIN). No TensorFlow here.
"""

from __future__ import annotations

import csv
import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

PEAKS_CSV = Path(__file__).parent.parent / "data" / "peaks.csv"
# Another peak table in place of the shipped one (a test's planted wrong row; a site's own table).
PEAKS_CSV_ENV = "DASHBENCH_PEAKS_CSV"
# A measured CPU peak is only an estimate of the attainable rate: flag only figures this far above it.
CPU_SOFT_MARGIN = 1.5
# Before `doctor` has calibrated a host, its CPU runs share the first probe taken there (peak_source
# PROVISIONAL), so that their MFUs compare; what a run's MFU then says about itself:
PROVISIONAL = "provisional"
PROVISIONAL_NOTE = "MFU against a first probe of this CPU, not calibrated: run `python -m dashbench doctor`"

_PRECISION_COLUMNS = {
    "float32": ("fp32_tflops",),
    "mixed_float16": ("fp16_tflops", "fp32_tflops"),
    "mixed_bfloat16": ("bf16_tflops", "fp32_tflops"),
}


def table() -> dict[str, dict]:
    """Canonical accelerator name → row (floats for figures, None where the datasheet has none)."""
    return _table(os.environ.get(PEAKS_CSV_ENV) or str(PEAKS_CSV))


@lru_cache(maxsize=4)
def _table(path: str) -> dict[str, dict]:
    rows = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            for key in ("bf16_tflops", "fp16_tflops", "tf32_tflops", "fp32_tflops", "memory_gb"):
                row[key] = float(row[key]) if row[key] else None
            rows[row["accelerator"]] = row
    return rows


def datasheet_peak_tflops(accelerator: str, precision: str, tf32: bool = False) -> Optional[float]:
    """Per-chip dense peak for this precision, or None when the accelerator is not in the table.

    TPUs run float32 matmuls as bf16 passes, so their bf16 figure is the peak for every precision.
    GPUs with TF32 enabled (TensorFlow's default on Ampere and later) use the TF32 figure for float32.
    """
    row = table().get(accelerator)
    if row is None:
        return None
    if accelerator.startswith("TPU"):
        return row["bf16_tflops"]
    columns = _PRECISION_COLUMNS[precision]
    if precision == "float32" and tf32 and row["tf32_tflops"]:
        columns = ("tf32_tflops",)
    for column in columns:
        if row[column]:
            return row[column]
    return None


def peak_source(accelerator: str) -> str:
    return "datasheet" if accelerator in table() else "measured"


def compute_dtype(precision: str) -> str:
    return {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}[precision]
