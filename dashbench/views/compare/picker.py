"""Compare's run picker: its reads for one choice of filters, what its caption says, the chosen runs'
rows and labels, and the published rows chosen by default. Plain functions of a store and of frames,
kept per store version and choice by the page (ui.shared, ui.memo)."""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from dashbench.core.frames import records
from dashbench.views.common.format import is_number, run_labels
from dashbench.views.compare import choice as compare_choice

DEFAULT_RUNS = 12  # the runs Compare plots until the user picks: the newest of each setup
PICKER_RUNS = 50  # the newest matching runs (and search hits) offered in the run picker


def picker_caption(chosen: int, matching: int, found: int | None = None, hidden: dict | None = None) -> str:
    """What the run picker holds against what passes the filters: the runs left out are said, and first
    the newest runs of other models that the Model filter hides (`hidden`: model → runs, picker_runs')."""
    text = compare_choice.hidden_text(hidden) + "\n\n" if hidden else ""
    text += (
        f"{chosen} of {matching:,} runs that pass the filters are plotted. Until you pick, Compare shows the "
        f"newest run of each setup (model, device, batch size, precision, backend, shape, data, throughput "
        f"or to accuracy), at most {DEFAULT_RUNS}; the list offers the newest {PICKER_RUNS}."
    )
    left_out = matching - chosen
    if left_out > 0:
        text += f" {left_out:,} left out: search to add others."
    if found is not None:
        text += f" The search found {found}{'+' if found >= PICKER_RUNS else ''}: they are in the list."
    return text


def overview(store) -> tuple[int, dict, str | None]:
    """(runs stored, the filters' options, the newest run's model): what every visitor's first screen reads,
    read together so that, kept per store version (ui.shared), a new visitor pays one look-up and no copy."""
    return store.count_runs(), store.facets(), store.newest_model()


def picker_runs(store, query: dict) -> tuple[int, list[str], list[str], dict[str, int]]:
    """(runs that pass the filters, the newest run of each setup among them (at most DEFAULT_RUNS), the newest
    PICKER_RUNS of them, {model: runs} of the newest runs of each setup the Model filter alone hides): the run
    picker's reads for one choice of filters, kept per store version alike."""
    default_ids, _scanned = store.newest_per_setup(limit=DEFAULT_RUNS, **query)
    return (
        store.count_runs(**query),
        default_ids,
        store.run_ids(**query, limit=PICKER_RUNS),
        compare_choice.hidden_models(store, query, DEFAULT_RUNS),
    )


def runs_by_id(store, run_ids: tuple) -> pd.DataFrame:
    """The stored rows of these runs (the run picker's offer)."""
    return store.runs(run_ids=list(run_ids))


def labels_by_id(runs: pd.DataFrame) -> dict[str, str]:
    """run_id → run_label of every run of a runs frame (the run picker's names)."""
    return dict(zip(runs["run_id"], run_labels(runs)))


def reference_names(reference: pd.DataFrame) -> dict[str, str]:
    """key → name of every published row (the pills' names)."""
    return dict(zip(reference["key"], reference["name"]))


def models_and_labels(runs: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The distinct models of a runs frame, in its order, and every row's label."""
    return runs["model"].unique().tolist(), runs["label"].tolist()


def runs_of(runs: pd.DataFrame, run_ids: Iterable[str], column: str = "run_id") -> pd.DataFrame:
    """The rows of `runs` whose `column` is one of these (the chosen runs; the chosen published rows
    by `key`), in the frame's order."""
    return runs[runs[column].isin(list(run_ids))]


def models_of(runs: pd.DataFrame, run_ids: Iterable[str]) -> list[str]:
    """The distinct models of these runs, in the order given."""
    picked = runs.set_index("run_id").reindex(list(run_ids))["model"].dropna()
    return list(dict.fromkeys(picked))


def reference_for_models(reference: pd.DataFrame, models: Iterable[str], labels: Iterable[Any] = ()) -> list[str]:
    """Keys of published rows with a throughput figure for these models, plus those of the presets the
    runs were made from (all rows with a figure when no model is given)."""
    models = {m for m in models if m}
    wanted = set(preset_reference_keys(labels))
    return [
        row["key"]
        for row in records(reference[["key", "model", "examples_per_sec"]])
        if is_number(row["examples_per_sec"]) and (not models or row["model"] in models or row["key"] in wanted)
    ]


def preset_reference_keys(labels: Iterable[Any]) -> list[str]:
    """Published rows of the presets these run labels came from ("preset:<slug>")."""
    from dashbench.workloads import presets

    keys = []
    for label in labels:
        preset = presets.for_run(label if isinstance(label, str) else None)
        for key in preset.references if preset else ():
            if key not in keys:
                keys.append(key)
    return keys
