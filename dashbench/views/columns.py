"""How the dashboard's tables show their columns: a readable label, a number format and a hint.

Plain data, no Streamlit: `dashbench.ui.column_config` turns these into `st.column_config` objects.
The tables keep machine-readable column names (the CSV download uses them as its header).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    label: str
    kind: str = "text"  # text | number | datetime | checkbox
    format: str | None = None  # a Streamlit number/datetime format: printf-style or a preset name
    help: str | None = None
    pinned: bool = False


MS = "%.2f ms"
USD = "$%.3f"

COLUMNS: dict[str, Column] = {
    "run": Column("run", pinned=True, help="model · device · batch · precision (label #id)"),
    "label": Column("run / published row", pinned=True),
    "name": Column("published row", pinned=True),
    "kind": Column("kind", help="measured here, or a published figure"),
    "examples_per_sec": Column("examples/s", "number", "%.1f", "throughput, warm-up and compile excluded"),
    "speedup": Column("speed-up ×", "number", "%.2f×", "examples/s against the chosen baseline"),
    "step_time_median_ms": Column("step median", "number", MS),
    "step_time_p10_ms": Column("step p10", "number", MS),
    "step_time_p90_ms": Column("step p90", "number", MS),
    "mfu": Column("MFU", "number", "percent", "achieved FLOP/s over the device's peak"),
    "achieved_tflops": Column("TFLOP/s", "number", "%.3g"),
    "usd_per_million_examples": Column("$ / 1M examples", "number", USD, "on-demand price"),
    "usd_per_million_examples_spot": Column("$ / 1M (spot)", "number", USD),
    "examples_per_usd": Column("examples / $", "number", "%.0f"),
    "examples_per_usd_spot": Column("examples / $ (spot)", "number", "%.0f"),
    "flags": Column("flags", help="above peak, did not converge, not on the chosen device, NaN loss"),
    "status": Column("status"),
    "model": Column("model"),
    "backend": Column("backend", help="Keras backend that ran it: tensorflow or jax"),
    "backend_version": Column("backend version", help="that framework's version (TensorFlow or JAX)"),
    "accelerator": Column("device"),
    "accelerator_count": Column("chips", "number", "%d"),
    "batch_size": Column("batch", "number", "%d", "global batch size"),
    "precision": Column("precision"),
    "xla": Column("XLA", "checkbox"),
    "samples": Column("samples", "number", "%d", "measured host loops"),
    "compile_s": Column("compile", "number", "%.2f s", "compile and first step, not in the throughput"),
    "created_at": Column("created", "datetime", "YYYY-MM-DD HH:mm"),
    "run_label": Column("label"),
    "sweep_id": Column("sweep"),
    "host": Column("host"),
    "error": Column("error"),
    "run_id": Column("run id"),
    "price_key": Column("price row"),
    "price_note": Column("price note"),
    "source": Column("source"),
    # Prices page
    "origin": Column("origin", help="shipped with dashbench, or your override"),
    "device": Column("device"),
    "provider": Column("provider"),
    "unit": Column("billed per"),
    "chips_per_unit": Column("chips / unit", "number", "%d"),
    "on_demand_usd_per_hour": Column("on-demand $/h", "number", "$%.3f"),
    "spot_usd_per_hour": Column("spot $/h", "number", "$%.3f"),
    "region": Column("region"),
    "unconfirmed": Column("unconfirmed", "checkbox"),
    "as_of": Column("as of"),
    "note": Column("note"),
    "key": Column("key"),
    # Published rows
    "figure_text": Column("published figure"),
    "workload": Column("workload"),
    "ratio_claimed": Column("ratio claimed", "number", "%.2f×"),
    "ratio_computed": Column("ratio from raw figures", "number", "%.2f×"),
    "claim_differs": Column("claim differs", "checkbox"),
    "baseline": Column("baseline"),
    # Epochs table
    "time": Column("time"),
    "usd_on_demand": Column("cost on-demand", "number", "$%.2f"),
    "usd_spot": Column("cost spot", "number", "$%.2f"),
    "price": Column("price row"),
}
