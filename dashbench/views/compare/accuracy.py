"""Compare's "Time and cost to target" and "Convergence parity" parts, built
from the chosen runs only (a page's memo keeps what they build per store version and choice).
No Streamlit and no TensorFlow here."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dashbench.core.accuracy import metric_of
from dashbench.core.frames import records
from dashbench.core.spec import has_held_out
from dashbench.views.common import accuracy_charts, charts
from dashbench.views.common.format import is_number
from dashbench.views.compare import headline, parity, to_target

TABLE_COLUMNS = {
    "device": "device",
    "source": "how",
    "target": "target",
    "seeds_reached": "seeds reached",
    "epochs_to_target": "epochs to target (median)",
    "time_to_target_s": "time to target (s, median)",
    "time_min_s": "min (s)",
    "time_max_s": "max (s)",
    "usd_to_target": "cost to target (USD, median)",
    "usd_min": "min (USD)",
    "usd_max": "max (USD)",
    "error_pct": "prediction error (%)",
    "examples_per_sec": "throughput (examples/s)",
    "run": "run",
}
# What the table is read for, first shown; the other columns are under "Every column" and, when every row
# holds the same there, said once in the caption line.
TARGET_HEADLINE = tuple(
    TABLE_COLUMNS[c] for c in ("device", "run", "epochs_to_target", "time_to_target_s", "usd_to_target")
)


@dataclass
class TargetSection:
    """What Compare shows of the chosen to-accuracy runs (figures None where nothing is to draw: an empty
    chart took ~300 px to say so, `note` says it in one line)."""

    table: pd.DataFrame  # every column
    time: object
    cost: object
    against_time: object
    against_cost: object
    caption: str
    note: str = ""
    shown: headline.Headline | None = None  # the table as first shown (target_headline)


def to_accuracy_chosen(runs: pd.DataFrame) -> bool:
    """Whether any chosen run can be a to-accuracy run (it read real data): a cheap look at the frame
    before any result is read."""
    if "data" not in runs:
        return False
    models = runs["model"] if "model" in runs else [None] * len(runs)
    return any(has_held_out(model, data) for model, data in zip(models, runs["data"]))


def target_section(store, run_ids, catalog) -> TargetSection | None:
    """Time and cost to target per device (measured and predicted), accuracy against time and cost, for
    the chosen runs; None when none of them is a to-accuracy run."""
    chosen, found, throughput = to_target.gather(store, run_ids)
    if not chosen:
        return None
    price_of = to_target.price_function(catalog)
    rows = to_target.target_rows(chosen, found, throughput, price_of)
    curves = []
    for run in chosen:
        name = f"{to_target.device_text(to_target.device_key(run))} #{run['run_id'][-6:]}"
        for seed_run in run["accuracy"]["runs"]:
            curves.append(
                {
                    "name": name,
                    "seed": int(seed_run.get("seed", 0)),
                    "target": run["accuracy"].get("target"),
                    "metric": metric_of(run["accuracy"]),
                    "usd_per_hour": price_of(run),
                    "points": seed_run.get("curve") or [],
                }
            )
    figures = dict(
        time=accuracy_charts.to_target_bars(rows, "time"),
        cost=accuracy_charts.to_target_bars(rows, "cost"),
        against_time=accuracy_charts.accuracy_against(curves, "wall_s"),
        against_cost=accuracy_charts.accuracy_against(curves, "usd"),
    )
    # Kept (ui.memo) and drawn by every session with this choice: each figure's dict made once.
    figures = {name: charts.shared(figure) if figure.data else None for name, figure in figures.items()}
    table = target_table(rows)
    return TargetSection(
        table=table,
        shown=target_headline(table),
        caption=caption(rows) if figures["time"] else "",
        note=missing_note(figures),
        **figures,
    )


def missing_note(figures: dict) -> str:
    """One line for the charts target_section leaves out, "" when it draws them all."""
    if figures["time"] is None:
        text = "No time or cost to target: no chosen run reached its target."
        return text + (" Its validation curve, below, shows how far it got." if figures["against_time"] else "")
    if figures["cost"] is None:
        return "No cost to target: no price for the device it ran on."  # where to set one is said above
    return ""


def target_table(rows: list[dict]) -> pd.DataFrame:
    """target_rows as the page's table: plain-word headers, an error in percent, the run's short id."""
    shown = []
    for row in rows:
        shown.append(
            {
                **row,
                "seeds_reached": f"{row['reached']}/{row['seeds']}",
                "error_pct": 100.0 * row["error"] if is_number(row.get("error")) else None,
                "run": f"#{str(row.get('run_id', ''))[-6:]}",
            }
        )
    return pd.DataFrame(shown).reindex(columns=list(TABLE_COLUMNS)).rename(columns=TABLE_COLUMNS)


def target_headline(table: pd.DataFrame) -> headline.Headline:
    """target_table as first shown, narrow enough for a 1400 px window: TARGET_HEADLINE's columns some row
    fills, and a caption line with the values every row shares (target, how, seeds reached, ...)."""
    shown = [c for c in TARGET_HEADLINE if c in table and (c == "run" or not headline.says_nothing(table, c))]
    shared = headline.shared_columns(table, shown=TARGET_HEADLINE)
    return headline.Headline(table[shown].reset_index(drop=True), headline.shared_note(shared))


def caption(rows: list[dict]) -> str:
    predicted = [r for r in rows if r["kind"] == to_target.PREDICTED_KIND]
    text = (
        "Time to target: from the first training step to the end of the evaluation that reached the "
        "target, evaluations included (compile and data loading apart, as MLPerf reports them); median "
        "over the seeds that reached it, bars from the fastest to the slowest. Cost: that time at the "
        "device's on-demand price."
    )
    if predicted:
        text += (
            " Predicted rows: the epochs to target measured on one device × examples per epoch ÷ the "
            "other device's measured throughput of the same setup (model, shapes, global batch, "
            "precision), plus its evaluation time scaled by the same throughput ratio; the error is "
            "against a measured run there."
        )
    else:
        text += " No other device has a throughput run of this setup: nothing to predict."
    return text


def parity_candidates(runs: pd.DataFrame) -> list[str]:
    """The chosen runs that share a setup with a run on another device (the only ones parity reads)."""
    rows = records(
        runs[
            [
                c
                for c in (*to_target.SETUP_COLUMNS, *to_target.DEVICE_COLUMNS, "run_id", "device", "data", "status")
                if c in runs
            ]
        ]
    )
    devices: dict = {}
    for row in rows:
        devices.setdefault(_parity_key(row), set()).add(to_target.device_key(row))
    return [row["run_id"] for row in rows if len(devices[_parity_key(row)]) > 1]


def _parity_key(row: dict) -> tuple:
    return to_target.setup_key(row), has_held_out(row.get("model"), row.get("data"))


def parity_verdicts(store, runs: pd.DataFrame) -> list:
    """views.parity's verdicts over the chosen runs that have a counterpart on another device."""
    ids = parity_candidates(runs)
    return parity.verdicts_for(store, ids) if ids else []
