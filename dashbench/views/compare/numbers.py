"""The Compare page's numbers: measured runs and published rows in one frame, speed-up, sweeps,
the table and CSV, and the time and cost of N epochs."""

from __future__ import annotations

import math

import pandas as pd

from dashbench.core.frames import records
from dashbench.results.result import short_id
from dashbench.views.common.format import (
    DEFAULT_BACKEND,
    FLAG_TEXT,
    PRECISION_SHORT,
    SHAPE_COLUMNS,
    backend_of,
    blank_text,
    duration_text,
    flag_list,
    flag_text,
    is_missing,
    is_number,
    md_text,
    mixed_backends,
    nullable_ints,
    run_label,
    run_shape,
    shape_text,
    with_ms,
    workload_text,
)
from dashbench.workloads import model_file

REFERENCE_PREFIX = "ref:"


def unpriced_labels(frame: pd.DataFrame) -> list[str]:
    """The labels of the measured rows that no price row matched."""
    return frame.loc[(frame["kind"] == "measured") & frame["usd_per_million_examples"].isna(), "label"].tolist()


def compare_frame(
    runs: pd.DataFrame, catalog: pd.DataFrame | None = None, reference: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Measured runs (with costs) and, if given, published reference rows in one frame.

    Every row has: id (run_id or "ref:<key>"), kind (measured|reference), label, model, accelerator,
    batch_size, examples_per_sec, step-time columns, cost columns, flags, flag_text.
    Built row by row as plain dicts and made a frame once: column by column in pandas it is paid
    on every change of Compare's choice (docs/history/performance.md).
    """
    match = None
    if catalog is not None:
        from dashbench.costs import run_cost

        match = run_cost.matcher(catalog)
    rows = measured_rows(runs, match)
    if reference is not None and not reference.empty:
        rows += reference_rows(reference, match)
    for row in rows:
        # The workload and shape of each row ("resnet50", "resnet50 · quick 32px"): charts, speed-up and
        # the epochs table never mix two of them. Published rows are full-size figures of their model.
        row["group"] = workload_text(row)
        shape = run_shape(row)
        for name in SHAPE_COLUMNS:
            row[name] = shape.get(name)
        row["flags"] = flag_list(row.get("flags"))
        row["flag_text"] = flag_text(row["flags"])
    extra = ["id", "kind", "label", "group", *SHAPE_COLUMNS, "flags", "flag_text"]
    columns = list(dict.fromkeys([*runs.columns, *(key for row in rows for key in row), *extra]))
    frame = pd.DataFrame(rows, columns=columns) if rows else pd.DataFrame(columns=columns)
    if not rows:
        frame["group"] = pd.Series(dtype=object)
    for name in SHAPE_COLUMNS:
        frame[name] = pd.array(frame[name].tolist(), dtype="Int64")
    for column in ("usd_per_million_examples", "usd_per_million_examples_spot", "examples_per_sec", *NUMBER_COLUMNS):
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
        elif column not in NUMBER_COLUMNS:
            frame[column] = float("nan")
    return frame


# Cost columns a run without a price leaves empty: numbers (NaN), not None, as in the store's frames.
NUMBER_COLUMNS = ("usd_per_hour", "usd_per_hour_spot", "examples_per_usd", "examples_per_usd_spot")


def measured_rows(runs: pd.DataFrame, match=None) -> list[dict]:
    """Stored runs as compare rows: kind, id, a chart label (the stored label kept as run_label_text)
    and, given a price matcher, the cost columns."""
    if runs.empty:
        return []
    # One workload on every row: the model goes in the chart title's place, not on every bar.
    # (A run's shape is part of its workload: a quick run names its shape in its label always.)
    with_model = runs["model"].nunique() > 1
    # TensorFlow and JAX runs side by side: every label names its backend, and each run of one
    # setup (model, device, batch, precision) sits next to the same setup on the other backend.
    both = mixed_backends(runs)
    rows = records(side_by_side(runs) if both else runs)
    from dashbench.costs import run_cost

    for row in rows:
        stored_label = row.pop("label", None)
        row.update(kind="measured", id=row["run_id"], run_label_text=stored_label)
        row["label"] = run_label(dict(row, label=stored_label), with_model, with_backend=True if both else None)
        if match is not None:
            row.update(
                run_cost.cost_values(
                    row.get("accelerator"),
                    row.get("accelerator_count"),
                    row.get("examples_per_sec"),
                    match,
                    row.get("host_cpus"),
                )
            )
    return rows


SETUP_COLUMNS = ("model", "accelerator", "accelerator_count", "batch_size", "precision", "xla")


def setup_key(row) -> tuple:
    """What was measured and where, without the backend: the runs to put side by side."""
    return tuple(None if _missing(row.get(c)) else row.get(c) for c in SETUP_COLUMNS)


def side_by_side(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with each setup's rows together (setups in the order they first appear, backends in
    BACKENDS order within one), so the same model/batch/device on TensorFlow and JAX are adjacent
    bars and rows, never one merged entry."""
    from dashbench.core.spec import BACKENDS

    keys = [setup_key(r) for r in runs.to_dict("records")]
    first = {}
    for key in keys:
        first.setdefault(key, len(first))
    rank = {name: i for i, name in enumerate(BACKENDS)}
    backends = (
        runs["backend"].fillna(DEFAULT_BACKEND) if "backend" in runs else pd.Series(DEFAULT_BACKEND, index=runs.index)
    )
    order = sorted(range(len(runs)), key=lambda i: (first[keys[i]], rank.get(backends.iloc[i], len(rank))))
    return runs.iloc[order]


def _missing(value) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def reference_rows(reference: pd.DataFrame, match=None) -> list[dict]:
    """Published rows as compare rows: kind=reference, labelled "published: …".

    A row the article priced keeps its own cost; the others are priced from today's catalog (`match`,
    a run_cost.matcher), and the note says so, so a 2018 throughput is never silently paired with a
    2018 price or vice versa.
    """
    from dashbench.costs import prices, run_cost

    rows = records(reference)
    for i, row in enumerate(rows):
        row["id"] = REFERENCE_PREFIX + str(row["key"] if "key" in row else i)
        row["kind"] = "reference"
        row["label"] = (
            "published: " + str(row["name"])
            if "name" in row
            else f"published: {row.get('model', '?')} · {row.get('accelerator', '?')}"
        )
        for column in ("examples_per_sec", "usd_per_million_examples"):
            row[column] = _number(row.get(column))
        if match is None or "accelerator" not in row:
            continue
        published = not math.isnan(row["usd_per_million_examples"])
        priced = run_cost.cost_values(
            row.get("accelerator"), row.get("accelerator_count"), row["examples_per_sec"], match
        )
        for column in prices.COST_COLUMNS:
            if column == "price_note":
                note = priced[column]
                row[column] = (
                    "price published with the figure"
                    if published
                    else note
                    if note == prices.NO_PRICE
                    else "today's catalog price" + (f"; {note}" if note else "")
                )
            elif column != "usd_per_million_examples":
                row[column] = None if published else priced[column]
            elif not published:
                row[column] = _number(priced[column])
    return rows


def _number(value) -> float:
    return float(value) if is_number(value) else float("nan")


RATIO_COLUMNS = ("name", "ratio_claimed", "ratio_computed", "claim_differs", "baseline", "source")


def published_ratios(reference: pd.DataFrame) -> pd.DataFrame:
    """Rows that publish only a ratio: the claim next to the ratio computed from raw figures."""
    return published_ratios_for(reference, [])


def published_ratios_for(reference: pd.DataFrame, models: list[str]) -> pd.DataFrame:
    """published_ratios of these models' rows (of every row when no model is given)."""
    if reference is None or reference.empty or "ratio" not in reference:
        return pd.DataFrame()
    columns = [c for c in RATIO_COLUMNS if c in reference]
    wanted = set(models)
    read = list(dict.fromkeys([*columns, "ratio", *(["model"] if "model" in reference else [])]))
    rows = [
        row
        for row in records(reference[read])
        if not is_missing(row["ratio"]) and (not wanted or row.get("model") in wanted)
    ]
    return pd.DataFrame([{c: row[c] for c in columns} for row in rows], columns=columns)


def flag_lines(frame: pd.DataFrame) -> list[str]:
    """One markdown bullet per flagged row, the flag explained, for the box next to the charts."""
    lines = []
    for row in records(frame[["label", "flags", "flag_text"]]):
        if not row["flag_text"]:
            continue
        notes = "; ".join(md_text(FLAG_TEXT.get(f, f)) for f in row["flags"])
        lines.append(f"- **{md_text(row['label'])}**: {notes}")
    return lines


def version_notes(frame: pd.DataFrame) -> list[str]:
    """One line per model file whose compared runs come from more than one version of the file: its
    file and builder, and each version's hash. Its runs share a section (workload_text groups a file's
    builder across edits), and a difference between them may be the edit's."""
    if frame.empty or "model" not in frame:
        return []
    measured = frame[frame["kind"] == "measured"] if "kind" in frame else frame
    versions: dict[str, list[str]] = {}
    for model in dict.fromkeys(measured["model"].dropna()):
        version = model_file.version(model)
        if version is not None:
            versions.setdefault(model_file.family(model), []).append(version)
    return [
        f"{name}: these runs come from {len(found)} versions of the file (sha256 "
        + ", ".join(f"{v}…" for v in found)
        + "); the file changed between them, so a difference may be the edit's."
        for name, found in versions.items()
        if len(found) > 1
    ]


def group_of(frame: pd.DataFrame) -> pd.Series:
    """The workload-and-shape group of each row (compare_frame's `group`, computed if absent)."""
    if "group" in frame:
        return frame["group"]
    return pd.Series([workload_text(r) for r in frame.to_dict("records")], index=frame.index, dtype=object)


def workload_groups(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The rows split by workload and shape, groups in the order they first appear: one section of
    charts each, since throughput of different workloads (or shapes) on one axis means nothing."""
    groups = group_of(frame)
    return [(name, frame[groups == name]) for name in dict.fromkeys(groups)]


def group_baseline(frame: pd.DataFrame, chosen: str | None) -> str | None:
    """The speed-up baseline of one workload group: the chosen row if it is in the group, else the
    group's first measured throughput run (else measured row, else row) with a throughput."""
    columns = [c for c in ("id", "kind", "examples_per_sec", "seeds") if c in frame]
    return baseline_of(records(frame[columns]), chosen)


def baseline_of(rows: list[dict], chosen: str | None) -> str | None:
    """group_baseline over rows as dicts (id, examples_per_sec, and kind and seeds if known)."""
    rows = [r for r in rows if not is_missing(r.get("examples_per_sec"))]
    if chosen in {r["id"] for r in rows}:
        return chosen
    if not rows:
        return None
    measured = [r for r in rows if r.get("kind", "measured") == "measured"]
    # A throughput run before a to-accuracy one (with_memory's `seeds`): its examples/s are what it measured.
    throughput = [r for r in measured if is_missing(r.get("seeds"))]
    return (throughput or measured or rows)[0]["id"]


def speedup_vs(frame: pd.DataFrame, baseline_id: str) -> pd.DataFrame:
    """Add `speedup` = examples_per_sec / the baseline's, from raw figures; only for the baseline's
    workload and shape (compare_frame's `group`).

    A throughput ratio between different workloads, or a quick-shape and a full-size run of one
    model, means nothing, so the other rows get NaN.
    """
    out = frame.copy()
    out["speedup"] = float("nan")
    base = out[out["id"] == baseline_id]
    if base.empty:
        return out
    base_row = base.iloc[0]
    base_eps = base_row.get("examples_per_sec")
    if not is_number(base_eps) or base_eps <= 0:
        return out
    groups = group_of(out)
    same = groups.eq(groups.loc[base.index[0]])
    has = out["examples_per_sec"].notna()
    out.loc[has & same, "speedup"] = out.loc[has & same, "examples_per_sec"] / float(base_eps)
    return out


def baseline_choices(frame: pd.DataFrame) -> dict[str, str]:
    """id → label of rows usable as a speed-up baseline (those with a throughput figure)."""
    rows = frame[frame["examples_per_sec"].notna()] if "examples_per_sec" in frame else frame.iloc[0:0]
    if "seeds" in rows:  # throughput runs first, the default baseline among them (see baseline_of)
        rows = pd.concat([rows[rows["seeds"].isna()], rows[rows["seeds"].notna()]])
    return dict(zip(rows["id"], rows["label"]))


def sweep_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Measured rows that form a batch-size series: a stored sweep, or the same setup at ≥2 batch sizes."""
    if frame.empty or "examples_per_sec" not in frame:
        return frame.iloc[0:0].assign(series=pd.Series(dtype=str))
    rows = records(frame)
    measured = [
        row.get("kind", "measured") == "measured" and not is_missing(row.get("examples_per_sec")) for row in rows
    ]
    both = len({backend_of(row) for row, m in zip(rows, measured) if m}) > 1
    series = []
    for row, m in zip(rows, measured):
        if not m:
            series.append(None)
            continue
        sweep = row.get("sweep_id")
        backend = backend_of(row)
        # One line per backend: a TensorFlow and a JAX series of one setup are never joined into one.
        named = backend if both or backend != DEFAULT_BACKEND else None
        setup = " · ".join(
            str(x)
            for x in (
                row.get("group") or workload_text(row),
                row.get("accelerator"),
                PRECISION_SHORT.get(row.get("precision"), row.get("precision")),
                "XLA" if row.get("xla") is True else None,
                named,
            )
            if x
        )
        # A sweep's id (store.new_sweep_id) ends in its random part ("sweep-20261130-015846-66137e0a");
        # its head is only the date.
        series.append(f"sweep {short_id(sweep)} · {setup}" if isinstance(sweep, str) and sweep else setup)
    sizes: dict = {}
    for name, row in zip(series, rows):
        if name is not None:
            sizes.setdefault(name, set()).add(row.get("batch_size"))
    keep = [name is not None and len(sizes[name]) >= 2 for name in series]
    return frame[keep].assign(series=[name for name, k in zip(series, keep) if k])


# The figures first (columns.MUST_SEE: seen at a 1400 px window), what ran next, bookkeeping last; also the
# CSV's columns, in this order.
COMPARE_COLUMNS = [
    "label",
    "examples_per_sec",
    "speedup",
    "mfu",
    "usd_per_million_examples",
    "flag_text",
    "speedup_vs",
    "kind",
    "step_time_median_ms",
    "step_time_p10_ms",
    "step_time_p90_ms",
    "usd_per_million_examples_spot",
    "examples_per_usd",
    "examples_per_usd_spot",
    "model",
    "image_size",
    "seq_len",
    "width",
    "backend",
    "backend_version",
    "accelerator",
    "accelerator_count",
    "batch_size",
    "precision",
    "xla",
    "samples",
    "compile_s",
    "achieved_tflops",
    "peak_memory_bytes",
    "window_peak_memory_bytes",
    "memory_capacity_bytes",
    "memory_estimate_bytes",
    "memory_estimate_ratio",
    "target_accuracy",
    "target_loss",
    "reached",
    "seeds",
    "time_to_target_s",
    "time_to_target_min_s",
    "time_to_target_max_s",
    "epochs_to_target",
    "steps_to_target",
    "final_val_accuracy",
    "final_val_loss",
    "epochs_trained",
    "eval_share",
    "load_s",
    "price_key",
    "price_note",
    "source",
    "created_at",
    "run_id",
]


def compare_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The numbers behind the Compare charts, in a fixed column order (also the CSV); step times in ms."""
    # The columns shown, and the step times in seconds that become them, before any copy is made.
    wanted = [c for c in frame.columns if c in COMPARE_COLUMNS or (c.startswith("step_time_") and c.endswith("_s"))]
    table = with_ms(frame[wanted])
    columns = [c for c in COMPARE_COLUMNS if c in table]
    table = table[columns].rename(columns={"flag_text": "flags"})
    return blank_text(nullable_ints(table).reset_index(drop=True))


def csv_bytes(table: pd.DataFrame) -> bytes:
    """CSV for download; list cells (flags) joined so spreadsheets read one value per cell."""
    out = table.copy()
    for column in out.columns:
        if out[column].map(lambda v: isinstance(v, (list, tuple))).any():
            out[column] = out[column].map(lambda v: "; ".join(map(str, v)) if isinstance(v, (list, tuple)) else v)
    return out.to_csv(index=False).encode("utf-8")


def epochs_table(frame: pd.DataFrame, catalog: pd.DataFrame, dataset_size: int, epochs: float) -> pd.DataFrame:
    """Time and cost (on-demand and spot) of `epochs` passes over `dataset_size` examples, per row.
    Quick-shape runs are left out (epochs_left_out names them): their time is not the full-size model's."""
    from dashbench.costs import prices, run_cost

    rows = []
    match = run_cost.matcher(catalog)
    for row in records(frame):
        if not is_number(row.get("examples_per_sec")) or shape_text(row):
            continue
        price = match(row.get("accelerator"), row.get("accelerator_count"), row.get("host_cpus"))
        out = run_cost.epochs_cost(float(row["examples_per_sec"]), dataset_size, epochs, price)
        rows.append(
            {
                "label": row["label"],
                "examples_per_sec": row["examples_per_sec"],
                "time": duration_text(out["seconds"]),
                "usd_on_demand": out["usd_on_demand"],
                "usd_spot": out["usd_spot"],
                "price": price["key"] if price else prices.NO_PRICE,
            }
        )
    return pd.DataFrame(rows, columns=["label", "examples_per_sec", "time", "usd_on_demand", "usd_spot", "price"])


def epochs_left_out(frame: pd.DataFrame) -> list[str]:
    """Labels of the rows with a throughput that epochs_table leaves out: runs not at full size."""
    if frame.empty or "examples_per_sec" not in frame:
        return []
    return [r["label"] for r in records(frame) if is_number(r.get("examples_per_sec")) and shape_text(r)]
