"""Peak dense throughput per accelerator, for MFU and the above-peak check.

Datasheet peaks (data/peaks.csv, from FIGURES.md) are hard limits. A CPU has no datasheet
figure that TensorFlow reaches, so its peak is measured: the best of several large float matmuls
on this host. That measurement is soft (oneDNN convolutions run at about the matmul rate), so a
CPU figure is flagged only when it is well above it (CPU_SOFT_MARGIN).

No TensorFlow at import time: the probe imports it inside the function.
"""

from __future__ import annotations

import csv
import os
import time
from functools import lru_cache
from pathlib import Path
from typing import Optional

PEAKS_CSV = Path(__file__).parent / "data" / "peaks.csv"
# A measured CPU peak is only an estimate of the attainable rate: flag only figures this far above it.
CPU_SOFT_MARGIN = 1.5
# Side of the square probe matrices; 4096 reaches the attainable rate where 1024 does not (DESIGN.md).
CPU_PROBE_SIZE = int(os.environ.get("DASHBENCH_CPU_PROBE_SIZE", "4096"))
CPU_PROBE_REPEATS = 3

_PRECISION_COLUMNS = {
    "float32": ("fp32_tflops",),
    "mixed_float16": ("fp16_tflops", "fp32_tflops"),
    "mixed_bfloat16": ("bf16_tflops", "fp32_tflops"),
}


@lru_cache(maxsize=1)
def table() -> dict[str, dict]:
    """Canonical accelerator name → row (floats for figures, None where the datasheet has none)."""
    rows = {}
    with open(PEAKS_CSV, newline="") as handle:
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


_cpu_peaks: dict[tuple, float] = {}


def cpu_peak_tflops(dtype: str = "float32", size: Optional[int] = None, repeats: int = CPU_PROBE_REPEATS) -> float:
    """Attainable CPU matmul rate in TFLOP/s: best of `repeats` timed products after one warm-up.

    Cached per process: the host does not change between runs, and the probe costs seconds.
    """
    size = size or CPU_PROBE_SIZE
    key = (dtype, size, repeats)
    if key not in _cpu_peaks:
        _cpu_peaks[key] = _probe(dtype, size, repeats)
    return _cpu_peaks[key]


def _probe(dtype: str, size: int, repeats: int) -> float:
    from dashbench.devices import import_tensorflow

    tf = import_tensorflow()
    with tf.device("/cpu:0"):
        a = tf.random.stateless_normal([size, size], seed=[1, 2], dtype=dtype)
        b = tf.random.stateless_normal([size, size], seed=[3, 4], dtype=dtype)
        matmul = tf.function(lambda x, y: tf.matmul(x, y)[0, 0])
        matmul(a, b).numpy()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            matmul(a, b).numpy()  # fetching a scalar waits for the product
            best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best / 1e12


def compute_dtype(precision: str) -> str:
    return {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}[precision]
