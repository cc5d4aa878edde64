"""Compare's numbers table as first shown: the figures a row is read for, fitting a 1400 px window with
many runs; what every row shares said once; every column kept in the full table and the CSV."""

import io

import pandas as pd
import pytest
from fixtures import dashboard_data

from dashbench.costs import prices
from dashbench.store import Store
from dashbench.views.common.columns import CELL_CHAR_PX, ROOM_PX, width_of
from dashbench.views.compare import headline
from dashbench.views.compare import numbers as compare
from dashbench.views.compare import sections as compare_view


def part(**columns) -> pd.DataFrame:
    rows = len(next(iter(columns.values())))
    base = {
        "label": [f"run {i}" for i in range(rows)],
        "examples_per_sec": [100.0 * (i + 1) for i in range(rows)],
        "run_id": [f"2026-{i}" for i in range(rows)],
    }
    return pd.DataFrame({**base, **columns})


def test_a_column_every_row_shares_is_said_once_and_an_empty_one_not_at_all():
    table = part(
        speedup=[1.0, 2.0, 0.5],
        speedup_vs=["run 0"] * 3,
        mfu=[0.2, 0.3, None],
        usd_per_million_examples=[float("nan")] * 3,
        flags=["", "", ""],
        backend=["jax"] * 3,
        xla=[True] * 3,
        compile_s=[1.5, 1.5, 1.5],
        batch_size=pd.array([32, 64, 32], dtype="Int64"),
        image_size=pd.array([None] * 3, dtype="Int64"),
        created_at=pd.to_datetime(["2026-12-05 10:00"] * 3, utc=True),
    )
    shown = headline.headline(table)
    assert list(shown.table.columns) == ["label", "examples_per_sec", "speedup", "mfu"]
    assert shown.table["label"].tolist() == ["run 0", "run 1", "run 2"]
    caption = shown.caption.replace("\\", "")
    assert "Speed-up against run 0." in caption  # the one baseline, not a column repeating it
    assert "No row has **$ / 1M**." in caption  # a figure a reader looks for, said missing
    shared = caption[caption.index("The same on every row:") :]
    assert "backend **jax**" in shared and "XLA **yes**" in shared and "compile **1.50 s**" in shared
    # Not shared: a value that differs, an empty column, when a row was made (it only happens to match).
    assert "batch" not in shared and "image" not in shared and "created" not in shared and "flags" not in caption


def test_what_a_section_head_names_is_not_repeated_below():
    table = part(speedup=[1.0, 2.0], speedup_vs=["run 0", "run 0"], model=["mlp", "mlp"], precision=["fp32"] * 2)
    alone = headline.headline(table)
    assert "Speed-up against run 0." in alone.caption and "model **mlp**" in alone.caption
    headed = headline.headline(table, headed=True)
    assert "Speed-up against" not in headed.caption and "model" not in headed.caption
    assert "precision **fp32**" in headed.caption
    (_, named), (_, unnamed) = headline.headline_parts([("**mlp** · speed-up against run 0", table), ("", table)])
    assert (named.caption, unnamed.caption) == (headed.caption, alone.caption)


def test_a_speedup_that_is_only_its_baselines_own_is_not_shown():
    # One run a section: 1.00× against itself says nothing; published rows with no throughput have none.
    alone = headline.headline(part(speedup=[1.0], speedup_vs=["run 0"], flags=["above peak"]))
    assert list(alone.table.columns) == ["label", "examples_per_sec", "flags"]
    assert alone.caption == ""  # one row shares nothing worth a line: its every value is in the full table
    several = headline.headline(part(speedup=[1.0, 3.0, 0.5], speedup_vs=["run 0", "run 1", "run 1"]))
    assert list(several.table.columns) == ["label", "examples_per_sec", "speedup", "speedup_vs"]
    assert "Speed-up against" not in several.caption  # each row names its own where they differ


def test_a_shared_value_reads_as_its_column_shows_it():
    assert headline.value_text("mfu", 0.071) == "7.1%"
    assert headline.value_text("usd_per_million_examples", 0.5) == "$0.500"
    assert headline.value_text("xla", False) == "no"
    assert headline.value_text("backend_version", "2.20.0") == "2.20.0"
    assert headline.value_text("not_a_known_column", 3) == "3"


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory):
    db = tmp_path_factory.mktemp("headline") / "runs.sqlite"
    dashboard_data.fill(db, n_runs=30)
    with Store(db, read_only=True) as store:
        runs, catalog = store.runs(), prices.catalog(store)
        frame = compare_view.with_memory(compare.compare_frame(runs[runs["status"] == "done"], catalog), store)
    frame, bases = compare_view.with_speedups(frame, None)
    table = compare.compare_table(frame)
    return table, compare_view.table_parts(table, frame, bases)


def test_with_many_runs_each_section_fits_a_1400_px_window_and_the_full_table_keeps_every_column(many_runs):
    table, parts = many_runs
    assert len(table.columns) > 40 and len(parts) > 1  # the table that scrolled sideways
    shown = headline.headline_parts(parts)
    for (head, section), (_, first) in zip(parts, shown):
        drawn = sum(first.widths.get(c) or width_of(c) for c in first.table.columns)
        assert drawn <= ROOM_PX, (head, list(first.table.columns))
        assert {"label", "examples_per_sec", "speedup", "mfu", "usd_per_million_examples"} <= set(first.table.columns)
        assert first.table["label"].tolist() == section["label"].tolist()
        assert "The same on every row:" in first.caption
    # Nothing is dropped from the full table and its CSV.
    back = pd.read_csv(io.BytesIO(compare.csv_bytes(table)))
    assert list(back.columns) == list(table.columns) and "speedup_vs" in back and "run_id" in back


@pytest.mark.parametrize("flags", ["", "not on the chosen device"])
def test_a_long_published_name_reads_whole_and_the_table_still_fits(flags):
    from dashbench.costs import reference

    longest = "published: " + max(reference.rows()["name"].astype(str), key=len)
    table = part(
        label=["#12 · resnet50 · cpu · 64 · float32", longest],
        mfu=[0.2, 0.3],
        usd_per_million_examples=[1.0, 2.0],
        flags=["", flags],
    )
    shown = headline.headline(table)
    width = shown.widths["label"]
    assert width > width_of("label")  # the shared width cut this name ("…real ImageNet 9…")
    assert sum(shown.widths.get(c) or width_of(c) for c in shown.table.columns) <= ROOM_PX
    assert width >= CELL_CHAR_PX * len(longest), (width, len(longest))
    # A name no room could hold takes the room there is, and no more.
    huge = headline.headline(part(label=["x" * 400, "y"], mfu=[0.2, 0.3]))
    assert sum(huge.widths.get(c) or width_of(c) for c in huge.table.columns) == ROOM_PX
