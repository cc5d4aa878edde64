"""Everything the dashboard pages compute, testable without Streamlit and without TensorFlow.

Pages are thin: they draw widgets and call these functions. The app process must never import
TensorFlow (libtpu allows one process per TPU host, and a browsing user should not pay for it),
so the device list comes from `python -m dashbench devices --json` in a subprocess.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

from dashbench.spec import SPEC_DEFAULTS, RunSpec, SpecError

# Exact flag strings from the engine, with what the user must read next to a figure.
FLAG_TEXT = {
    "above_peak": "above peak: faster than the hardware's peak, so the measurement is invalid",
    "non_finite_loss": "loss became NaN/inf",
    "loss_not_falling": "did not converge: the loss did not fall",
    "placement_mismatch": "not on the chosen device: ops ran elsewhere",
}
FLAG_SHORT = {
    "above_peak": "above peak",
    "non_finite_loss": "NaN loss",
    "loss_not_falling": "did not converge",
    "placement_mismatch": "placement mismatch",
}

EMPTY_STORE_TEXT = """\
**No runs stored yet.** dashbench measures training throughput on this machine and keeps every
run next to the published figures.

1. Open **Run** and launch a quick run, e.g. *fashion_mnist_cnn* at batch 32 on the CPU with
   image size 28 and 10 steps (a few seconds), or pick one of the seed presets.
2. Or measure from a shell: `python -m dashbench run --model fashion_mnist_cnn --batch-size 32 --steps 10`,
   or a sweep: `python -m dashbench sweep --model resnet50 --batch-sizes 32,64,128`.
3. Or bring results measured elsewhere: `python -m dashbench import results.json`
   (bundles made with `python -m dashbench export`).

Then come back to **Compare** to see throughput, step time, cost and speed-up side by side.
"""

EMPTY_STORE_TEXT_READ_ONLY = """\
**No runs in this database yet.** This dashboard is read-only: measure on a machine with the
accelerator (`python -m dashbench run ...` or `sweep ...`), then copy the database here or
import a bundle (`python -m dashbench import bundle.json`) and reload.
"""

PRECISION_SHORT = {"float32": "fp32", "mixed_float16": "fp16", "mixed_bfloat16": "bf16"}
FILTER_COLUMNS = ("model", "accelerator", "precision", "batch_size", "status", "label")
REFERENCE_PREFIX = "ref:"

# ------------------------------------------------------------------------------------------ flags


def flag_list(flags: Any) -> list[str]:
    if flags is None or (isinstance(flags, float) and math.isnan(flags)):
        return []
    if isinstance(flags, str):
        try:
            flags = json.loads(flags)
        except ValueError:
            flags = [f for f in flags.replace(";", ",").split(",") if f.strip()]
    return [str(f).strip() for f in flags if str(f).strip()]


def flag_text(flags: Any, short: bool = True) -> str:
    names = FLAG_SHORT if short else FLAG_TEXT
    return "; ".join(names.get(f, f) for f in flag_list(flags))


# ------------------------------------------------------------------------------------------ labels


def run_label(row: dict | pd.Series, with_model: bool = True) -> str:
    """Short, unique name for a run on a chart axis: what ran, where, and its id."""
    acc = str(row.get("accelerator") or row.get("device") or "?")
    count = row.get("accelerator_count")
    if _num(count) and count > 1:
        acc = f"{int(count)}×{acc}"
    parts = ([str(row.get("model") or "?")] if with_model else []) + [acc, f"b{_int_text(row.get('batch_size'))}"]
    precision = row.get("precision")
    if precision:
        parts.append(PRECISION_SHORT.get(precision, str(precision)))
    if bool(row.get("xla")) and not _is_nan(row.get("xla")):
        parts.append("XLA")
    label = row.get("label")
    tail = f"#{str(row.get('run_id', ''))[-6:]}"
    if isinstance(label, str) and label:
        tail = f"{label} {tail}"
    return " · ".join(parts) + f" ({tail})"


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not _is_nan(value)


def _is_nan(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _int_text(value: Any) -> str:
    return str(int(value)) if _num(value) else "?"


# ------------------------------------------------------------------------------------------ filters


def filter_options(runs: pd.DataFrame) -> dict[str, list]:
    """Distinct values per filterable column, in a stable order for multiselects."""
    options = {}
    for column in FILTER_COLUMNS:
        if column in runs:
            values = [v for v in runs[column].dropna().unique().tolist() if v != ""]
            options[column] = sorted(values, key=lambda v: (str(type(v)), v))
    return options


def apply_filters(runs: pd.DataFrame, selections: dict[str, Iterable] | None, text: str = "") -> pd.DataFrame:
    """Keep rows matching every non-empty selection (an empty selection means 'all') and a free-text search."""
    out = runs
    for column, chosen in (selections or {}).items():
        chosen = list(chosen or [])
        if chosen and column in out:
            out = out[out[column].isin(chosen)]
    text = (text or "").strip().lower()
    if text and not out.empty:
        hits = [text in " ".join(map(str, row)).lower() for row in out.itertuples(index=False)]
        out = out[hits]
    return out


# ------------------------------------------------------------------------------------------ compare


def compare_frame(runs: pd.DataFrame, catalog: pd.DataFrame | None = None,
                  reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """Measured runs (with costs) and, if given, published reference rows in one frame.

    Every row has: id (run_id or "ref:<key>"), kind (measured|reference), label, model, accelerator,
    batch_size, examples_per_sec, step-time columns, cost columns, flags, flag_text.
    """
    measured = runs.copy()
    if measured.empty:
        measured = pd.DataFrame(columns=list(runs.columns) + ["id", "kind", "label"])
    else:
        measured["kind"] = "measured"
        measured["id"] = measured["run_id"]
        if "label" in measured:
            measured = measured.rename(columns={"label": "run_label_text"})
        # One workload on every row: the model goes in the chart title's place, not on every bar.
        with_model = measured["model"].nunique() > 1
        measured["label"] = [run_label(_row_with_label(r), with_model) for _, r in measured.iterrows()]
    if catalog is not None and not measured.empty:
        from dashbench import costs

        measured = costs.add_cost_columns(measured, catalog)
    frames = [measured]
    if reference is not None and not reference.empty:
        frames.append(reference_frame(reference, catalog))
    frame = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(
        not f.empty for f in frames) else measured
    if "flags" not in frame:
        frame["flags"] = [[] for _ in range(len(frame))]
    frame["flags"] = [flag_list(f) for f in frame["flags"]]
    frame["flag_text"] = [flag_text(f) for f in frame["flags"]]
    for column in ("usd_per_million_examples", "usd_per_million_examples_spot", "examples_per_sec"):
        if column not in frame:
            frame[column] = float("nan")
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def _row_with_label(row: pd.Series) -> pd.Series:
    row = row.copy()
    row["label"] = row.get("run_label_text")
    return row


def reference_frame(reference: pd.DataFrame, catalog: pd.DataFrame | None = None) -> pd.DataFrame:
    """Published rows in the compare frame's shape, kind=reference, labelled "published: …".

    A row the article priced keeps its own cost; the others are priced from today's catalog, and
    the note says so, so a 2018 throughput is never silently paired with a 2018 price or vice versa.
    """
    ref = reference.copy().reset_index(drop=True)
    key = ref["key"] if "key" in ref else pd.Series([str(i) for i in range(len(ref))])
    ref["id"] = [REFERENCE_PREFIX + str(k) for k in key]
    ref["kind"] = "reference"
    if "name" in ref:
        ref["label"] = ["published: " + str(name) for name in ref["name"]]
    else:
        ref["label"] = [f"published: {row.get('model', '?')} · {row.get('accelerator', '?')}"
                        for _, row in ref.iterrows()]
    for column in ("examples_per_sec", "usd_per_million_examples"):
        if column not in ref:
            ref[column] = float("nan")
        ref[column] = pd.to_numeric(ref[column], errors="coerce")
    if catalog is not None and "accelerator" in ref:
        from dashbench import costs

        published = ref["usd_per_million_examples"].notna()
        priced = costs.add_cost_columns(ref.drop(columns=["usd_per_million_examples"]), catalog)
        for column in costs.COST_COLUMNS:
            if column == "usd_per_million_examples":
                ref[column] = ref[column].where(published, priced[column])
            elif column != "price_note":
                ref[column] = priced[column].where(~published)
        notes = []
        for pub, note in zip(published, priced["price_note"]):
            if pub:
                notes.append("price published with the figure")
            elif note == costs.NO_PRICE:
                notes.append(note)
            else:
                notes.append("today's catalog price" + (f"; {note}" if note else ""))
        ref["price_note"] = notes
    return ref


def published_ratios(reference: pd.DataFrame) -> pd.DataFrame:
    """Rows that publish only a ratio: the claim next to the ratio computed from raw figures."""
    if reference is None or reference.empty or "ratio" not in reference:
        return pd.DataFrame()
    rows = reference[reference["ratio"].notna()]
    columns = [c for c in ("name", "ratio_claimed", "ratio_computed", "claim_differs", "baseline", "source")
               if c in rows]
    return rows[columns].reset_index(drop=True)


def reference_for_models(reference: pd.DataFrame, models: Iterable[str], labels: Iterable[Any] = ()) -> list[str]:
    """Keys of published rows with a throughput figure for these models, plus those of the presets the
    runs were made from (all rows with a figure when no model is given)."""
    rows = reference[pd.to_numeric(reference["examples_per_sec"], errors="coerce").notna()]
    models = [m for m in models if m]
    wanted = set(preset_reference_keys(labels))
    if models:
        keep = rows["model"].isin(models) | rows["key"].isin(wanted)
        rows = rows[keep]
    return rows["key"].tolist()


def flag_lines(frame: pd.DataFrame) -> list[str]:
    """One markdown bullet per flagged row, the flag explained, for the box next to the charts."""
    lines = []
    for _, row in frame[frame["flag_text"] != ""].iterrows():
        lines.append(f"- **{row['label']}**: " + "; ".join(FLAG_TEXT.get(f, f) for f in row["flags"]))
    return lines


def speedup_vs(frame: pd.DataFrame, baseline_id: str) -> pd.DataFrame:
    """Add `speedup` = examples_per_sec / the baseline's, from raw figures; only for the baseline's model.

    A throughput ratio between different workloads means nothing, so other models get NaN.
    """
    out = frame.copy()
    out["speedup"] = float("nan")
    base = out[out["id"] == baseline_id]
    if base.empty:
        return out
    base_row = base.iloc[0]
    base_eps = base_row.get("examples_per_sec")
    if not _num(base_eps) or base_eps <= 0:
        return out
    same = out["model"].eq(base_row.get("model")) if "model" in out and base_row.get("model") else True
    has = out["examples_per_sec"].notna()
    out.loc[has & same, "speedup"] = out.loc[has & same, "examples_per_sec"] / float(base_eps)
    return out


def baseline_choices(frame: pd.DataFrame) -> dict[str, str]:
    """id → label of rows usable as a speed-up baseline (those with a throughput figure)."""
    rows = frame[frame["examples_per_sec"].notna()] if "examples_per_sec" in frame else frame.iloc[0:0]
    return dict(zip(rows["id"], rows["label"]))


def sweep_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Measured rows that form a batch-size series: a stored sweep, or the same setup at ≥2 batch sizes."""
    rows = frame[frame.get("kind", pd.Series("measured", index=frame.index)).eq("measured")]
    rows = rows[rows["examples_per_sec"].notna()] if "examples_per_sec" in rows else rows.iloc[0:0]
    if rows.empty:
        return rows.assign(series=pd.Series(dtype=str))
    series = []
    for _, row in rows.iterrows():
        sweep = row.get("sweep_id")
        setup = " · ".join(
            str(x) for x in (row.get("model"), row.get("accelerator"), PRECISION_SHORT.get(row.get("precision"),
                             row.get("precision")), "XLA" if row.get("xla") is True else None) if x
        )
        series.append(f"sweep {str(sweep)[:8]} · {setup}" if isinstance(sweep, str) and sweep else setup)
    rows = rows.assign(series=series)
    sizes = rows.groupby("series")["batch_size"].nunique()
    return rows[rows["series"].isin(sizes[sizes >= 2].index)]


def step_samples(store, frame: pd.DataFrame) -> pd.DataFrame:
    """Per-step times of every measured sample of the measured rows, labelled for the chart."""
    parts = []
    for _, row in frame.iterrows():
        if row.get("kind") != "measured":
            continue
        samples = prepare_samples(store.samples(row["run_id"]))
        samples = samples[~samples["warmup"]]
        if not samples.empty:
            parts.append(samples.assign(label=row["label"], run_id=row["run_id"]))
    if not parts:
        return pd.DataFrame(columns=["label", "run_id", "index", "steps", "duration_s", "loss", "warmup",
                                     "step_time_s"])
    return pd.concat(parts, ignore_index=True)


def prepare_samples(samples: pd.DataFrame | list | None) -> pd.DataFrame:
    """Samples (engine events or store rows) → a frame with step_time_s = duration / steps."""
    df = samples.copy() if isinstance(samples, pd.DataFrame) else pd.DataFrame(samples or [])
    for column, default in (("index", 0), ("steps", 1), ("duration_s", float("nan")), ("loss", float("nan")),
                            ("warmup", False)):
        if column not in df:
            df[column] = default
    df["warmup"] = df["warmup"].fillna(False).astype(bool)
    steps = pd.to_numeric(df["steps"], errors="coerce").where(lambda s: s > 0)
    df["step_time_s"] = pd.to_numeric(df["duration_s"], errors="coerce") / steps
    df["loss"] = pd.to_numeric(df["loss"], errors="coerce")
    return df.sort_values("index").reset_index(drop=True)


COMPARE_COLUMNS = [
    "kind", "label", "run_id", "model", "accelerator", "accelerator_count", "batch_size", "precision", "xla",
    "examples_per_sec", "speedup", "step_time_median_s", "step_time_p10_s", "step_time_p90_s", "samples",
    "compile_s", "achieved_tflops", "mfu", "usd_per_million_examples", "usd_per_million_examples_spot",
    "examples_per_usd", "examples_per_usd_spot", "price_key", "price_note", "flag_text", "source", "created_at",
]


def compare_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The numbers behind the Compare charts, in a fixed column order (also the CSV)."""
    columns = [c for c in COMPARE_COLUMNS if c in frame]
    table = frame[columns].rename(columns={"flag_text": "flags"})
    return table.reset_index(drop=True)


def csv_bytes(table: pd.DataFrame) -> bytes:
    """CSV for download; list cells (flags) joined so spreadsheets read one value per cell."""
    out = table.copy()
    for column in out.columns:
        if out[column].map(lambda v: isinstance(v, (list, tuple))).any():
            out[column] = out[column].map(lambda v: "; ".join(map(str, v)) if isinstance(v, (list, tuple)) else v)
    return out.to_csv(index=False).encode("utf-8")


# ------------------------------------------------------------------------------------------ results


RESULTS_COLUMNS = [
    "run_id", "created_at", "status", "model", "accelerator", "accelerator_count", "batch_size", "precision", "xla",
    "examples_per_sec", "step_time_median_s", "step_time_p10_s", "step_time_p90_s", "samples", "compile_s", "mfu",
    "flags", "label", "sweep_id", "host", "error",
]


def results_table(runs: pd.DataFrame) -> pd.DataFrame:
    columns = [c for c in RESULTS_COLUMNS if c in runs]
    table = runs[columns].copy()
    if "flags" in table:
        table["flags"] = [flag_text(f) for f in table["flags"]]
    return table.reset_index(drop=True)


def run_detail(run: dict) -> dict:
    """What the detail view shows for one stored run: headline numbers, flags explained, environment."""
    result = run.get("result") or {}
    flags = flag_list(result.get("flags"))
    return {
        "title": run_label({**(run.get("spec") or {}), **result, "run_id": run.get("run_id"),
                            "label": run.get("label"), "batch_size": result.get("global_batch_size")
                            or (run.get("spec") or {}).get("batch_size")}),
        "status": run.get("status"),
        "error": run.get("error"),
        "headline": headline(result) if result else [],
        "flags": [(f, FLAG_TEXT.get(f, f)) for f in flags],
        "env": result.get("env") or {},
        "placement": result.get("placement") or {},
        "spec": run.get("spec") or {},
    }


def headline(result: dict) -> list[tuple[str, str, str]]:
    """(label, value, detail) triples for st.metric: the figures a finished run is judged by."""
    unit = result.get("unit") or "examples"
    out = []
    eps = result.get("examples_per_sec")
    if _num(eps):
        ci = result.get("examples_per_sec_ci95") or []
        detail = f"95% CI {ci[0]:,.1f}–{ci[1]:,.1f}" if len(ci) == 2 and all(_num(c) for c in ci) else ""
        out.append((f"{unit}/s", f"{eps:,.1f}", detail))
    med = result.get("step_time_median_s")
    if _num(med):
        p10, p90 = result.get("step_time_p10_s"), result.get("step_time_p90_s")
        detail = f"p10 {p10 * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms" if _num(p10) and _num(p90) else ""
        samples = result.get("samples")
        if _num(samples):
            detail += f"{', ' if detail else ''}{int(samples)} samples"
        out.append(("step time, median", f"{med * 1000:.1f} ms", detail))
    if _num(result.get("compile_s")):
        out.append(("compile + first step", f"{result['compile_s']:.2f} s", "not in the throughput"))
    tflops = result.get("achieved_tflops")
    if _num(tflops):
        value = f"{tflops:.3g} TFLOP/s" if tflops >= 1 else f"{tflops * 1000:.3g} GFLOP/s"
        mfu = result.get("mfu")
        peak = result.get("peak_tflops")
        detail = (f"MFU {mfu:.1%}" if _num(mfu) else "") + (
            f" of {peak:.3g} TFLOP/s peak ({result.get('peak_source', 'datasheet')})" if _num(peak) else "")
        out.append(("achieved", value, detail.strip()))
    where = result.get("accelerator") or result.get("device")
    if where:
        count = result.get("accelerator_count")
        names = result.get("device_names") or []
        out.append(("ran on", f"{int(count)}× {where}" if _num(count) and count > 1 else str(where),
                    ", ".join(map(str, names))))
    return out


# ------------------------------------------------------------------------------------------ run page


def parse_batch_sizes(text: str) -> list[int]:
    """'32, 64,128' → [32, 64, 128]; errors name the field like every other bad input."""
    sizes = []
    for part in (text or "").replace(";", ",").replace(" ", ",").split(","):
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise SpecError("batch_sizes", f"{part!r} is not an integer; write e.g. 32, 64, 128") from None
        if value < 1:
            raise SpecError("batch_sizes", f"must be integers >= 1, got {value}")
        if value not in sizes:
            sizes.append(value)
    if not sizes:
        raise SpecError("batch_sizes", "give at least one batch size, e.g. 32, 64, 128")
    return sizes


def build_spec(values: dict) -> RunSpec:
    """Form values → RunSpec; empty shape overrides mean full size; RunSpec validates everything."""
    clean = {}
    for name, value in values.items():
        if name not in SPEC_DEFAULTS and name not in ("model", "batch_size"):
            continue
        if value is None or value == "" or (name in ("image_size", "seq_len", "width") and value == 0):
            continue
        clean[name] = value
    return RunSpec.from_dict(clean)


def new_sweep_id() -> str:
    return time.strftime("sweep-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


@dataclass
class LiveView:
    """What the live fragment draws for one run, computed from jobs.progress()."""

    status: str
    fraction: float
    text: str
    samples: pd.DataFrame
    finished: bool
    error: str | None = None


FINISHED = ("done", "failed", "cancelled", "interrupted")


def live_view(progress: dict | None) -> LiveView:
    """Plain function behind the refreshing fragment (AppTest has no timer, so it is tested directly)."""
    progress = progress or {}
    status = str(progress.get("status") or "unknown")
    fraction = progress.get("fraction")
    fraction = min(1.0, max(0.0, float(fraction))) if _num(fraction) else 0.0
    if status == "done":
        fraction = 1.0
    samples = prepare_samples(progress.get("samples"))
    measured = samples[~samples["warmup"]]
    if status == "queued":
        text = "queued: waiting for the device to be free"
        position = progress.get("queue_position")
        if _num(position):
            text += f" (position {int(position)} in the queue)"
    elif status == "running":
        phase = progress.get("phase")
        text = f"running ({phase})" if phase else "running"
        done, total = progress.get("steps_done"), progress.get("steps_total")
        if _num(done) and _num(total):
            text += f": step {int(done)} of {int(total)}"
        if not measured.empty:
            text += f", last step {measured['step_time_s'].iloc[-1] * 1000:.1f} ms"
            if _num(measured["loss"].iloc[-1]):
                text += f", loss {measured['loss'].iloc[-1]:.4g}"
        live = progress.get("examples_per_sec_live")
        if _num(live):
            text += f", {live:,.1f} examples/s so far"
    else:
        text = status
    return LiveView(status=status, fraction=fraction, text=text, samples=samples, finished=status in FINISHED,
                    error=progress.get("error"))


# ------------------------------------------------------------------------------------------ devices

_DEVICE_CACHE: dict[str, tuple[float, "DeviceInfo"]] = {}
_DEVICE_LOCK = threading.Lock()
# A failed discovery is retried after this long; a successful one holds for the process (devices
# do not come and go under a running server; restart it after changing hardware).
DEVICE_RETRY_S = 60.0


@dataclass
class DeviceInfo:
    """What `python -m dashbench devices --json` reported; `kinds` are RunSpec device values."""

    kinds: list[str]
    description: dict[str, str] = field(default_factory=dict)
    raw: Any = None
    error: str | None = None


def device_info(python: str | None = None, timeout: float = 180.0, refresh: bool = False) -> DeviceInfo:
    """Devices on this machine, discovered in a subprocess (TF stays out of the app) and cached per process."""
    python = python or sys.executable
    with _DEVICE_LOCK:
        cached = _DEVICE_CACHE.get(python)
        stale = cached is not None and cached[1].error and time.monotonic() - cached[0] > DEVICE_RETRY_S
        if refresh or cached is None or stale:
            _DEVICE_CACHE[python] = (time.monotonic(), _discover(python, timeout))
        return _DEVICE_CACHE[python][1]


def _discover(python: str, timeout: float) -> DeviceInfo:
    try:
        import os
        from pathlib import Path

        env = dict(os.environ)
        # The child must import this dashbench even from a source checkout that is not installed.
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        proc = subprocess.run([python, "-m", "dashbench", "devices", "--json"], capture_output=True, text=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return DeviceInfo(kinds=["cpu"], error=f"device discovery failed ({exc}); offering the CPU only")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return DeviceInfo(kinds=["cpu"], error=f"device discovery failed: {last}; offering the CPU only")
    try:
        raw = json.loads(proc.stdout)
    except ValueError:
        return DeviceInfo(kinds=["cpu"], error="device discovery printed no JSON; offering the CPU only")
    return parse_devices(raw)


def parse_devices(raw: Any) -> DeviceInfo:
    """The `devices --json` report (dashbench.devices.discover) → the device kinds a run may ask for.

    The CPU is always there; a GPU only if TensorFlow lists one; a TPU only with evidence of one.
    The kind `auto` would pick comes first.
    """
    if not isinstance(raw, dict):
        return DeviceInfo(kinds=["cpu"], description={"cpu": "CPU"}, raw=raw,
                          error="device discovery printed an unexpected report; offering the CPU only")
    kinds, description = [], {}
    tpu = raw.get("tpu") or {}
    if isinstance(tpu, dict) and tpu.get("evidence"):
        kinds.append("tpu")
        description["tpu"] = "TPU" + (f": {tpu['accelerator_type']}" if tpu.get("accelerator_type") else "")
    gpus = raw.get("gpus") or []
    if gpus:
        kinds.append("gpu")
        names = sorted({str(g.get("accelerator") or g.get("device_name") or "GPU") for g in gpus})
        description["gpu"] = f"GPU: {len(gpus)}× {', '.join(names)}"
    kinds.append("cpu")
    cpu = raw.get("cpu") or {}
    description["cpu"] = "CPU" + (f": {cpu['model']}" if isinstance(cpu, dict) and cpu.get("model") else "")
    default = raw.get("default_device")
    if default in kinds:
        kinds.remove(default)
        kinds.insert(0, default)
    return DeviceInfo(kinds=kinds, description=description, raw=raw)


# ------------------------------------------------------------------------------------------ app plumbing


@dataclass
class AppContext:
    """What app.py hands the pages for one script run."""

    settings: Any
    store: Any
    store_error: str | None = None


def open_store(settings) -> tuple[Any, str | None]:
    """(store, None) or (None, message): a missing read-only database is a message, not a traceback."""
    from pathlib import Path

    from dashbench.store import Store

    if settings.read_only and not Path(settings.db_path).exists():
        return None, (f"No database at `{settings.db_path}`. Set DASHBENCH_DB (or pass `-- --db PATH`) to a "
                      "dashbench database, or copy one there.")
    try:
        return Store(settings.db_path, read_only=settings.read_only), None
    except Exception as exc:  # a broken or foreign file: say which and why instead of crashing every page
        return None, f"Cannot open the database `{settings.db_path}`: {exc}"


def pump_jobs(settings) -> None:
    from dashbench import jobs

    jobs.pump(settings.db_path)


def bundle_bytes(db_path: str, run_ids: list[str]) -> bytes:
    """An export bundle of these runs as bytes, through a read-only connection of its own."""
    import tempfile
    from pathlib import Path

    from dashbench.store import Store

    with tempfile.TemporaryDirectory() as tmp, Store(db_path, read_only=True) as store:
        path = Path(tmp) / "bundle.json"
        store.export_bundle(path, run_ids=list(run_ids))
        return path.read_bytes()


def import_uploads(store, uploads: list[tuple[str, bytes]]) -> tuple[str, bool]:
    """Import uploaded bundle files; (message, ok). A bad file is named in the message, nothing half-done."""
    import tempfile
    from pathlib import Path

    from dashbench.store import BundleError

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, (name, data) in enumerate(uploads):
            path = Path(tmp) / f"{i}-{Path(name).name}"
            path.write_bytes(data)
            paths.append(path)
        try:
            counts = store.import_bundles(paths)
        except BundleError as exc:
            return f"Import failed: {exc}", False
    summary = ", ".join(f"{v} {k}" for k, v in counts.items()) if isinstance(counts, dict) else str(counts)
    return f"Imported: {summary}.", True


# ------------------------------------------------------------------------------------------ prices


CATALOG_COLUMNS = ["origin", "device", "provider", "unit", "chips_per_unit", "on_demand_usd_per_hour",
                   "spot_usd_per_hour", "region", "unconfirmed", "source", "as_of", "note", "key"]


def catalog_table(catalog: pd.DataFrame) -> pd.DataFrame:
    """The catalog with overrides first, so 'which price is mine' is the first thing read."""
    columns = [c for c in CATALOG_COLUMNS if c in catalog] + [c for c in catalog if c not in CATALOG_COLUMNS]
    table = catalog[columns].copy()
    order = table["origin"].ne("override") if "origin" in table else pd.Series(0, index=table.index)
    return table.assign(_o=order).sort_values(["_o", "device"], kind="stable").drop(columns="_o").reset_index(
        drop=True)


def reference_table(reference: pd.DataFrame) -> pd.DataFrame:
    table = reference.copy()
    if "flags" in table:
        table["flags"] = [flag_text(f) for f in table["flags"]]
    return table.reset_index(drop=True)


# ------------------------------------------------------------------------------------------ run form

FORM_FIELDS = ("model", "batch_size", "device", "precision", "xla", "steps", "warmup", "steps_per_loop", "label",
               "image_size", "seq_len", "width")


def run_form_defaults(kinds: list[str]) -> dict:
    """Session-state defaults of the Run form (keys run_<field>); 0 in a shape box means full size."""
    return {
        "run_model": "fashion_mnist_cnn", "run_batch_size": 32, "run_device": kinds[0] if kinds else "cpu",
        "run_precision": SPEC_DEFAULTS["precision"], "run_xla": SPEC_DEFAULTS["xla"],
        "run_steps": SPEC_DEFAULTS["steps"], "run_warmup": SPEC_DEFAULTS["warmup"],
        "run_steps_per_loop": SPEC_DEFAULTS["steps_per_loop"], "run_label": "",
        "run_image_size": 0, "run_seq_len": 0, "run_width": 0, "run_sweep": "", "run_preset": "", "run_quick": False,
    }


def specs_from_form(state, sweep: bool = False) -> tuple[list[RunSpec], str | None]:
    """The Run form's values → the specs to submit (one, or one per sweep batch size) and a sweep id."""
    values = {name: state.get(f"run_{name}") for name in FORM_FIELDS}
    values["batch_size"] = int(values["batch_size"]) if _num(values["batch_size"]) else values["batch_size"]
    values["label"] = (values.get("label") or "").strip() or None
    base = build_spec(values)
    if not sweep:
        return [base], None
    sizes = parse_batch_sizes(state.get("run_sweep") or "")
    return [base.replace(batch_size=size) for size in sizes], new_sweep_id()


def finished_runs(store, run_ids: list[str], limit: int = 6) -> list[dict]:
    """The most recent of this session's runs that have ended, newest first."""
    out = []
    for run_id in reversed(run_ids):
        run = store.get_run(run_id)
        if run and run["status"] in FINISHED:
            out.append(run)
        if len(out) >= limit:
            break
    return out


def preset_choices() -> dict[str, str]:
    """slug → display name of the seed presets."""
    from dashbench import presets

    return {slug: preset.name for slug, preset in presets.PRESETS.items()}


def preset_description(slug: str) -> str:
    from dashbench import presets

    preset = presets.get(slug)
    return f"{preset.description} — {preset.source}"


def preset_form_values(slug: str, device_class: str, quick: bool = False) -> dict:
    """What choosing a preset puts in the Run form: the article's model, batch size and steps for this
    device class, or (quick) its tiny shapes that run in seconds on a CPU."""
    from dashbench import presets

    spec = presets.quick_spec(slug, device_class) if quick else presets.spec_for(slug, device_class)
    values = {f"run_{name}": getattr(spec, name) for name in FORM_FIELDS if name != "device"}
    for shape in ("image_size", "seq_len", "width"):
        values[f"run_{shape}"] = values[f"run_{shape}"] or 0
    values["run_label"] = spec.label or ""
    return values


def preset_reference_keys(labels: Iterable[Any]) -> list[str]:
    """Published rows of the presets these run labels came from ("preset:<slug>")."""
    from dashbench import presets

    keys = []
    for label in labels:
        preset = presets.for_run(label if isinstance(label, str) else None)
        for key in preset.references if preset else ():
            if key not in keys:
                keys.append(key)
    return keys


def epochs_table(frame: pd.DataFrame, catalog: pd.DataFrame, dataset_size: int, epochs: float) -> pd.DataFrame:
    """Time and cost (on-demand and spot) of `epochs` passes over `dataset_size` examples, per row."""
    from dashbench import costs

    rows = []
    for _, row in frame[frame["examples_per_sec"].notna()].iterrows():
        price = costs.match_price(row.get("accelerator"), row.get("accelerator_count"), catalog)
        out = costs.epochs_cost(float(row["examples_per_sec"]), dataset_size, epochs, price)
        rows.append({"label": row["label"], "examples_per_sec": row["examples_per_sec"],
                     "time": _duration(out["seconds"]), "usd_on_demand": out["usd_on_demand"],
                     "usd_spot": out["usd_spot"], "price": price["key"] if price else costs.NO_PRICE})
    return pd.DataFrame(rows, columns=["label", "examples_per_sec", "time", "usd_on_demand", "usd_spot", "price"])


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
