"""Every dashboard table at a 1400 px window: the figures a row is read for (examples/s, MFU,
cost, flags) sit in its first columns and fit beside the run's name, and no figure is cut short.
tests/browser/test_browser.py checks the same in Chromium; this checks what the widths are set to."""

import itertools

import pandas as pd
import pytest
from fixtures import dashboard_data

from dashbench.costs import prices, reference
from dashbench.results.result import FLAG_SHORT
from dashbench.store import Store
from dashbench.views.common.columns import COLUMNS, MUST_SEE, ROOM_PX, text_px, width_of
from dashbench.views.compare import numbers as compare
from dashbench.views.compare import sections as compare_view
from dashbench.views.prices import tables as price_views
from dashbench.views.results import runs as results

# The table's width at a 1400 px window (the sidebar open), and Results' selection boxes.
TABLE_PX, SELECT_PX = ROOM_PX, 32
# The largest figure each number format must show whole.
LARGEST = {
    "%.1f": 999_999.9,
    "%.2f ms": 99_999.99,
    "%.1f%%": 999.99,  # a fraction shown as a percentage (Column.scale): 9.9999 → 999.99%
    "$%.3f": 999.999,
    "%.2f×": 9_999.99,
    "%.3g": 123_456.0,
    "%.4g": 99.99,  # a validation loss in nats: ln of the largest vocabulary is under 12
    "%d": 99_999,
    "%.0f": 99_999_999,
    "%.2f s": 9_999.99,
    "$%.2f": 999_999.99,
}


def shown(fmt: str, value) -> str:
    """A number as Streamlit's NumberColumn prints it with this printf-style format."""
    return fmt % value


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    db = tmp_path_factory.mktemp("widths") / "runs.sqlite"
    dashboard_data.fill(db, n_runs=30)
    with Store(db, read_only=True) as store:
        runs, catalog = store.runs(), prices.catalog(store)
    published = reference.rows()
    frame = compare.compare_frame(runs[runs["status"] == "done"], catalog, published)
    frame, _bases = compare_view.with_speedups(frame, None)
    return {
        "results": (results.results_table(runs, catalog), SELECT_PX),
        "published": (price_views.reference_table(published), 0),
        "compare": (compare.compare_table(frame), 0),
        "catalog": (price_views.catalog_table(catalog), 0),
    }


@pytest.mark.parametrize("name", ["results", "published", "compare"])
def test_a_rows_figures_and_flags_fit_beside_its_name_at_1400_px(tables, name):
    table, marker = tables[name]
    table = table.rename(columns={"flag_text": "flags"})
    wanted = [c for c in MUST_SEE if c in table]
    assert len(wanted) >= 3, list(table.columns)
    # Up to the last of them every column has its width set (one sized by its content could push them out).
    columns = list(table.columns)[: max(list(table.columns).index(c) for c in wanted) + 1]
    assert all(width_of(c) for c in columns), [c for c in columns if not width_of(c)]
    edges = dict(zip(columns, itertools.accumulate(width_of(c) for c in columns)))
    for column in wanted:
        assert marker + edges[column] <= TABLE_PX, (column, marker + edges[column])


def test_no_figure_or_flag_is_cut_short():
    for name, spec in COLUMNS.items():
        assert width_of(name) >= text_px(spec.label), name  # the header reads whole
        if spec.kind == "number":
            assert spec.format in LARGEST, (name, spec.format)
            assert text_px(shown(spec.format, LARGEST[spec.format])) <= width_of(name), name
    for flag in FLAG_SHORT.values():
        assert text_px(flag) <= width_of("flags"), flag


def test_the_stored_tables_fit_their_columns(tables):
    """The fixture's and the published rows' own cells: the figure columns and the flags whole."""
    for name, (table, _marker) in tables.items():
        for column in table.columns:
            key = "flags" if column == "flag_text" else column
            spec = COLUMNS.get(key)
            if spec is None or (spec.kind != "number" and column not in ("flags", "flag_text", "status")):
                continue
            for value in table[column]:
                if value is None or (not isinstance(value, str) and pd.isna(value)) or value == "":
                    continue
                text = shown(spec.format, value) if spec.kind == "number" else str(value)
                assert text_px(text) <= width_of(key), (name, column, text)


def test_every_percentage_is_shown_with_one_decimal_and_the_data_keeps_the_fraction():
    import pandas as pd

    from dashbench.views.common.columns import COLUMNS, as_shown

    # Streamlit's "percent" preset showed 7.1% beside 18.79%: one printf rule for every percentage instead.
    assert "percent" not in {spec.format for spec in COLUMNS.values()}
    assert {spec.format for spec in COLUMNS.values() if spec.scale == 100} == {"%.1f%%"} and COLUMNS["mfu"].scale == 100
    frame = pd.DataFrame({"mfu": [0.071, 0.1879], "label": ["a", "b"]})
    shown_frame = as_shown(frame)
    assert [COLUMNS["mfu"].format % v for v in shown_frame["mfu"]] == ["7.1%", "18.8%"]
    assert frame["mfu"].tolist() == [0.071, 0.1879]  # the table's data (and its CSV) unchanged


def test_a_model_files_run_shows_its_device_and_batch_in_results_run_column():
    """A model file's identity is long (file, builder, version): in Results' run column it reads as its file,
    after the device and batch, so they stay in view with the id."""
    from dashbench.views.common.format import run_labels

    row = {
        "run_id": "20261205-180545-e70ef681",
        "model": "transformer_classifier_of_our_team.py:build@3fa9c2d1e0b4",
        "accelerator": "TPU v5 lite",
        "accelerator_count": 8,
        "batch_size": 1024,
        "precision": "mixed_bfloat16",
    }
    (label,) = run_labels(pd.DataFrame([row]), id_first=True)
    up_to_batch = label[: label.index("b1024") + len("b1024")]
    assert up_to_batch.startswith("#0ef681") and "8×TPU v5 lite" in up_to_batch
    assert text_px(up_to_batch) <= width_of("run"), label
    assert label.endswith("transformer_classifier_of_our_team.py") and "@" not in label
    # A built-in keeps its name in front; elsewhere (a chart's axis) the identity is whole.
    (builtin,) = run_labels(pd.DataFrame([dict(row, model="resnet50")]), id_first=True)
    assert builtin.startswith("#0ef681 · resnet50 · 8×TPU")
    (whole,) = run_labels(pd.DataFrame([row]))
    assert whole.startswith("transformer_classifier_of_our_team.py:build@3fa9c2d1e0b4 · ")
