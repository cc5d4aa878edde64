"""What the pages build is shared by every session on the same database version: a new visitor
draws what an earlier one built, and a change in the store is seen by every session on its next rerun.
Two AppTest sessions in one process stand for two visitors of one server."""

import copy
import functools
import gc
import random
import threading
import time
from collections import Counter

import pandas as pd
import plotly.basedatatypes
import pytest
import streamlit as st
from fixtures import dashboard_data
from fixtures.app_test import APP, TIMEOUT_S, assert_clean
from streamlit.testing.v1 import AppTest

from dashbench.core.spec import RunSpec
from dashbench.costs import prices
from dashbench.store import Store
from dashbench.views.compare import numbers as compare
from dashbench.views.compare import picker
from dashbench.views.compare import sections as compare_view
from dashbench.views.prices import tables as price_views
from dashbench.views.results import runs as results
from dashbench.views.streamlit import ui

BUILDERS = [
    (compare, "compare_frame"),
    (compare_view, "sections"),
    (compare_view, "with_memory"),
    (compare, "compare_table"),
    (results, "results_table"),
    (results, "overview"),
    (results, "page_of_runs"),
    (prices, "catalog"),
    (price_views, "catalog_table"),
    (picker, "picker_runs"),
    (picker, "runs_by_id"),
]


@pytest.fixture
def builds(monkeypatch):
    """How often each page builder ran, across every session of this process."""
    counts = Counter()
    for module, name in BUILDERS:
        original = getattr(module, name, None)
        if original is None:  # a builder another version of the page does not have
            continue

        @functools.wraps(original)
        def counted(*args, _original=original, _name=name, **kwargs):
            counts[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return counts


def visitor(page: str) -> AppTest:
    """A new session (a new visitor) of the read-only dashboard, its first run on `page`."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.switch_page(page).run()
    assert_clean(at)
    return at


def results_ids(at: AppTest) -> list[str]:
    (table,) = [d for d in at.dataframe if (d.key or "").startswith("res_table_")]
    return table.value["run_id"].tolist()


def add_run(db) -> str:
    with Store(db) as store:
        spec = RunSpec(model="resnet50", batch_size=64, device="gpu", steps=6, label="arrived later")
        return dashboard_data._finished(store, spec, "V100", "gpu", 1, 400.0, [], random.Random(7))


def test_a_second_visitor_draws_the_figures_the_first_built_and_both_see_a_new_run(tmp_path, monkeypatch, builds):
    db = tmp_path / "runs.sqlite"
    dashboard_data.fill(db, n_runs=30)
    monkeypatch.setenv("DASHBENCH_DB", str(db))
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "1")

    first = visitor("pages/compare.py")
    built = dict(builds)
    assert built["sections"] == 1 and built["compare_frame"] == 1 and built["catalog"] == 1
    assert built["picker_runs"] == 1 and built["runs_by_id"] == 1  # the run picker's reads, for both visitors
    copied = Counter()  # Plotly's deep copy of a figure into the dict st.plotly_chart writes out
    original_to_dict = plotly.basedatatypes.BaseFigure.to_dict

    def counted_to_dict(figure):
        copied[type(figure).__name__] += 1
        return original_to_dict(figure)

    monkeypatch.setattr(plotly.basedatatypes.BaseFigure, "to_dict", counted_to_dict)
    second = visitor("pages/compare.py")
    assert dict(builds) == built  # the second visitor's first run built nothing: it drew the first one's
    assert len(second.get("plotly_chart")) == 2 and not copied  # and drew its charts from the dicts made once
    assert [c.value for c in second.caption] == [c.value for c in first.caption]  # and the same page

    for at in (first, second):
        at.switch_page("pages/results.py").run()
        assert_clean(at)
    assert builds["results_table"] == 1
    # Nor read the store for them: the count, the filters' options and the page's rows are kept too.
    assert builds["overview"] == 1 and builds["page_of_runs"] == 1
    assert builds["catalog"] == 1  # the price catalog too: one per store version, not per page or session
    before = results_ids(first)
    assert results_ids(second) == before

    new_id = add_run(db)
    for at in (first, second):
        at.run()
        assert_clean(at)
        assert results_ids(at)[0] == new_id  # newest first: each session sees the new run on its next rerun
    assert builds["results_table"] == 2  # rebuilt once for the new version, by whichever came first
    assert builds["overview"] == 2 and builds["page_of_runs"] == 2
    assert builds["catalog"] == 2

    for at in (first, second):
        at.switch_page("pages/compare.py").run()
        assert_clean(at)
        offered = at.multiselect(key="cmp_runs").options
        assert any("arrived later" in option for option in offered)  # Compare offers it too
    assert builds["sections"] == 2 and builds["picker_runs"] == 2  # read again once, for the new version


def test_a_shown_table_is_prepared_once_while_it_lives():
    frame = pd.DataFrame({"label": ["a", "None"], "n": [1, 2]})
    shown = ui._shown(frame)
    data, config = shown
    assert data.to_pandas()["label"].isna().tolist() == [False, True]  # "None" as a missing cell (blank_text)
    assert data.column_names == ["label", "n"] and "label" in config  # dashbench's labels go with it
    assert ui._shown(frame) is shown  # the same objects again: not scanned nor converted a second time
    key = id(frame)
    del frame
    gc.collect()
    assert key not in ui._shown_frames  # forgotten with its frame: nothing kept for ever


def test_a_kept_tables_column_config_is_copied_for_each_visitor_without_deepcopy_and_the_kept_one_stays(monkeypatch):
    """st.dataframe deep-copies each column's config before changing the copy: a kept table's configs copy
    themselves by a plain walk (no copy.deepcopy of their dicts), into what Streamlit would have made."""
    from streamlit.elements.lib.column_config_utils import process_config_mapping

    frame = pd.DataFrame({"label": ["a"], "examples_per_sec": [1.5], "step_time_ms": [2.0], "cost_usd": [0.1]})
    _, config = ui._shown(frame)
    plain = {name: {k: (dict(v) if isinstance(v, dict) else v) for k, v in c.items()} for name, c in config.items()}
    walked = []
    monkeypatch.setitem(
        copy._deepcopy_dispatch,
        dict,
        lambda x, memo, deepcopy=copy.deepcopy: walked.append(x) or {k: deepcopy(v, memo) for k, v in x.items()},
    )
    made = process_config_mapping(config)
    assert walked == []  # no column's dict went through deepcopy's own walk
    monkeypatch.undo()
    assert made == process_config_mapping(plain)  # the same mapping as plain dicts give
    for name, copied in made.items():
        assert copied is not config[name]
        copied["label"] = "changed"
        for value in copied.values():
            if isinstance(value, dict):
                value["changed"] = True
    assert all(
        c.get("label") != "changed" and all("changed" not in v for v in c.values() if isinstance(v, dict))
        for c in config.values()
    )  # Streamlit's changes to its copy leave the kept config as it was


def test_visitors_asking_together_for_one_value_build_it_once():
    built = []

    def slow(value):
        built.append(value)
        time.sleep(0.2)
        return [value]

    key = ("together", random.random())
    got = []
    threads = [threading.Thread(target=lambda: got.append(ui.memo(key, slow, 7))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert built == [7] and len(got) == 4 and all(value is got[0] for value in got)  # one build, one object


def test_clearing_streamlits_resource_cache_empties_memo_from_the_next_run():
    calls = []
    key = ("cleared", random.random())
    ui.memo(key, calls.append, 1)
    ui.memo(key, calls.append, 1)
    assert calls == [1]
    st.cache_resource.clear()  # what a test's or benchmark's "first visit" does
    ui._fetch_kept()  # a script run's start (ui.page_context)
    ui.memo(key, calls.append, 1)
    assert calls == [1, 1]


def test_a_kept_value_that_failed_to_build_is_built_again_next_time():
    key = ("fails once", random.random())

    def fails():
        raise ValueError("no")

    with pytest.raises(ValueError):
        ui.memo(key, fails)
    assert ui.memo(key, lambda: 3) == 3


def test_a_shared_figure_is_written_out_as_plotly_writes_the_figure_and_its_dict_is_made_once():
    import plotly.graph_objects as go
    import plotly.io

    from dashbench.views.common import charts

    frame = pd.DataFrame({"label": ["a", "b"], "examples_per_sec": [10.0, 20.0], "kind": ["measured", "reference"]})
    expected = plotly.io.to_json(charts.throughput(frame), validate=False)
    figure = charts.shared(charts.throughput(frame))
    assert isinstance(figure, go.Figure) and charts.shared(None) is None
    assert plotly.io.to_json(figure, validate=False) == expected  # the same chart in the browser
    assert figure.to_dict() is figure.to_dict()  # made once, handed to every session
