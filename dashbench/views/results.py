"""The Results page: the table of stored runs, one run's detail, bundle export and import."""

from __future__ import annotations

import pandas as pd

from dashbench.views.format import FLAG_TEXT, flag_list, flag_text, is_number, run_label, with_ms

# The figures a user came for first, then what ran, then bookkeeping.
RESULTS_COLUMNS = [
    "run", "status", "examples_per_sec", "step_time_median_ms", "step_time_p10_ms", "step_time_p90_ms", "mfu",
    "usd_per_million_examples", "flags", "model", "accelerator", "accelerator_count", "batch_size",
    "precision", "xla", "samples", "compile_s", "created_at", "run_label", "sweep_id", "host", "error", "run_id",
]


def results_table(runs: pd.DataFrame, catalog: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every stored run, one row each, key figures first; step times in ms; cost if a catalog is given."""
    table = with_ms(runs).rename(columns={"label": "run_label"})
    table["run"] = [run_label(r) for r in runs.to_dict("records")]
    if "flags" in table:
        table["flags"] = [flag_text(f) for f in table["flags"]]
    if catalog is not None and not table.empty:
        table["usd_per_million_examples"] = usd_per_million(table, catalog)
    columns = [c for c in RESULTS_COLUMNS if c in table]
    return table[columns].reset_index(drop=True)


def usd_per_million(runs: pd.DataFrame, catalog: pd.DataFrame) -> list:
    """On-demand USD per million examples per run, matching a price once per (device, count) pair:
    the Results table may hold every stored run."""
    from dashbench.costs import prices

    hourly = {}
    out = []
    for acc, count, eps in zip(runs.get("accelerator", []), runs.get("accelerator_count", []),
                               runs.get("examples_per_sec", [])):
        key = (acc, None if pd.isna(count) else int(count)) if not pd.isna(acc) else None
        if key not in hourly:
            price = prices.match_price(acc, count, catalog) if key else None
            hourly[key] = price["usd_per_hour"] if price else None
        out.append(prices.usd_per_million_examples(eps, hourly[key]) if hourly[key] is not None else None)
    return pd.to_numeric(pd.Series(out, dtype=object), errors="coerce").tolist()


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
    if is_number(eps):
        from dashbench.stats import ci95_text

        detail = ci95_text(result.get("examples_per_sec_ci95"))
        out.append((f"{unit}/s", f"{eps:,.1f}", detail))
    med = result.get("step_time_median_s")
    if is_number(med):
        p10, p90 = result.get("step_time_p10_s"), result.get("step_time_p90_s")
        detail = f"p10 {p10 * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms" if is_number(p10) and is_number(p90) else ""
        samples = result.get("samples")
        if is_number(samples):
            detail += f"{', ' if detail else ''}{int(samples)} samples"
        out.append(("step time, median", f"{med * 1000:.1f} ms", detail))
    if is_number(result.get("compile_s")):
        out.append(("compile + first step", f"{result['compile_s']:.2f} s", "not in the throughput"))
    tflops = result.get("achieved_tflops")
    if is_number(tflops):
        mfu = result.get("mfu")
        peak = result.get("peak_tflops")
        detail = (f"MFU {mfu:.1%}" if is_number(mfu) else "") + (
            f" of {peak:.3g} TFLOP/s peak ({result.get('peak_source', 'datasheet')})" if is_number(peak) else "")
        # The unit sits in the label: a metric value longer than ~6 characters is cut off ("5.57 TFL…").
        out.append(("achieved TFLOP/s", f"{tflops:.3g}", detail.strip()))
    where = result.get("accelerator") or result.get("device")
    if where:
        count = result.get("accelerator_count")
        names = result.get("device_names") or []
        out.append(("ran on", f"{int(count)}× {where}" if is_number(count) and count > 1 else str(where),
                    ", ".join(map(str, names))))
    return out


def bundle_bytes(db_path: str, run_ids: list[str]) -> bytes:
    """An export bundle of these runs as bytes, through a read-only connection of its own."""
    import tempfile
    from pathlib import Path

    from dashbench.store import Store, bundle

    with tempfile.TemporaryDirectory() as tmp, Store(db_path, read_only=True) as store:
        path = Path(tmp) / "bundle.json"
        bundle.export_bundle(store, path, run_ids=list(run_ids))
        return path.read_bytes()


def import_uploads(store, uploads: list[tuple[str, bytes]]) -> tuple[str, bool]:
    """Import uploaded bundle files; (message, ok). A bad file is named in the message, nothing half-done."""
    import tempfile
    from pathlib import Path

    from dashbench.store import BundleError, bundle

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, (name, data) in enumerate(uploads):
            path = Path(tmp) / f"{i}-{Path(name).name}"
            path.write_bytes(data)
            paths.append(path)
        try:
            counts = bundle.import_bundles(store, paths)
        except BundleError as exc:
            return f"Import failed: {exc}", False
    return import_summary(counts), True


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def import_summary(counts: dict) -> str:
    """One readable line from bundle.import_bundles' counts (files, runs_added, runs_skipped, samples_added)."""
    text = (f"Imported {_count(counts.get('runs_added', 0), 'run')} with "
            f"{_count(counts.get('samples_added', 0), 'sample')} from {_count(counts.get('files', 0), 'file')}")
    skipped = counts.get("runs_skipped", 0)
    if skipped:
        text += f"; {_count(skipped, 'run')} already stored, kept once"
    return text + "."

