"""The pages at 10,000 stored runs (AppTest, a real SQLite file filled by bench/store_queries.py's filler):
bounded queries, nothing read again on a rerun that changed nothing, a new run shown on the next rerun,
paging and sorting in SQL, and a run's detail opened from its selected row. Not timed: the times are
bench/dashboard_scale.py's (docs/PERFORMANCE.md)."""

import shutil

import pytest
import streamlit as st
from fixtures import bench_scripts
from fixtures.app_test import assert_clean, select_rows, show, start, texts

from dashbench.core.spec import RunSpec
from dashbench.store import Store

RUNS = 10_000
# The most rows one query of a page may return: Compare's default looks at the setups of the newest 500.
MOST_ROWS = 500


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("scale") / "runs.sqlite"
    bench_scripts.load("store_queries").fill(path, RUNS, samples=3)
    return path


@pytest.fixture
def big(big_store, tmp_path):
    """A copy of the 10k store per test, so a test that writes leaves the others theirs."""
    path = tmp_path / "runs.sqlite"
    shutil.copy(big_store, path)
    return path


@pytest.fixture
def queries(monkeypatch):
    """Every query a Store answers in this process, as (sql, rows returned)."""
    seen = []
    read = Store._read

    def counted(self, sql, params=()):
        rows = read(self, sql, params)
        seen.append((sql, len(rows)))
        return rows

    monkeypatch.setattr(Store, "_read", counted)
    return seen


def _no_full_load(seen):
    assert seen, "the page asked the store nothing"
    biggest = max(seen, key=lambda q: q[1])
    assert biggest[1] <= MOST_ROWS, biggest


@pytest.mark.parametrize("read_only", [False, True], ids=["normal", "read-only"])
def test_pages_issue_bounded_queries_and_read_nothing_again_on_a_rerun(big, queries, monkeypatch, read_only):
    at = start(monkeypatch, big, read_only=read_only)
    # (The Run page asks only for queued and running runs; its device discovery would double this test.)
    for page in ("pages/compare.py", "pages/results.py", "pages/prices.py"):
        st.cache_data.clear()  # a first visit: every read goes to the store
        st.cache_resource.clear()
        queries.clear()
        show(at, page)
        if page != "pages/prices.py":  # prices read the overrides only
            _no_full_load(queries)
        # Nothing changed in the store: the rerun is answered from the cache.
        queries.clear()
        at.run()
        assert_clean(at)
        if page in ("pages/compare.py", "pages/results.py"):
            assert queries == [], queries
    show(at, "pages/results.py")
    assert f"of {RUNS:,} that pass the filters ({RUNS:,} stored)" in texts(at)
    assert len(at.dataframe[0].value) == 100


def test_compare_says_what_it_left_out_and_finds_others_by_search(big, queries, monkeypatch):
    at = start(monkeypatch, big, read_only=True)
    show(at, "pages/compare.py")
    picker = at.multiselect(key="cmp_runs")
    model = at.multiselect(key="cmp_model").value
    with Store(big, read_only=True) as store:
        matching = store.count_runs(model=model, status=["done"])
    # The newest run of each setup, never more than twelve, and the count of the rest.
    assert 0 < len(picker.value) <= 12
    caption = next(c.value for c in at.caption if "pass the filters are plotted" in c.value)
    assert f"of {matching:,} runs that pass the filters" in caption
    assert f"{matching - len(picker.value):,} left out" in caption
    assert len(picker.options) <= 50 + 12
    queries.clear()
    at.text_input(key="cmp_search").set_value("bench-0000123").run()
    assert_clean(at)
    _no_full_load(queries)
    with Store(big, read_only=True) as store:
        wanted = store.runs(model=model, status="done", search="bench-0000123")["run_id"].tolist()
    assert set(wanted) <= set(at.multiselect(key="cmp_runs").options) and "The search found" in texts(at)
    at.multiselect(key="cmp_runs").set_value(wanted).run()
    assert_clean(at)
    assert at.multiselect(key="cmp_runs").value == wanted
    assert at.get("plotly_chart")


def test_a_new_run_shows_on_the_next_rerun(big, monkeypatch):
    at = start(monkeypatch, big, read_only=True)
    show(at, "pages/results.py")
    with Store(big) as store:  # another process's write: a run measured elsewhere lands
        new = store.create_run(RunSpec(model="conv2d", batch_size=8, label="just landed"))
        store.finish_run(new, "failed", error="landed")
    at.run()
    assert_clean(at)
    assert at.dataframe[0].value["run_id"].iloc[0] == new
    assert f"({RUNS + 1:,} stored)" in texts(at)


def test_results_pages_and_sorts_in_sql_and_a_selected_row_opens_its_detail(big, monkeypatch):
    at = start(monkeypatch, big, read_only=True)
    show(at, "pages/results.py")
    at.multiselect(key="res_model").set_value(["bilstm"]).run()
    at.selectbox(key="res_sort").set_value("fastest").run()
    assert_clean(at)
    with Store(big, read_only=True) as store:
        every = store.runs(model="bilstm")
    fastest = every.sort_values("examples_per_sec", ascending=False)["run_id"].tolist()
    assert at.dataframe[0].value["run_id"].tolist() == fastest[:100]
    at.number_input(key="res_page").set_value(2).run()
    assert_clean(at)
    assert at.dataframe[0].value["run_id"].tolist() == fastest[100:200]
    assert f"Runs 101–200 of {len(every):,} that pass the filters" in texts(at)
    # A row's selection box opens that run's detail: its title, its figures, its loss curve.
    pick = fastest[150]
    select_rows(at, [pick])
    assert any(pick[-6:] in m.value for m in at.markdown)
    assert at.metric and len(at.get("plotly_chart")) == 2
    # A new filter starts on its first page with nothing selected.
    at.multiselect(key="res_model").set_value(["conv2d"]).run()
    assert_clean(at)
    assert at.number_input(key="res_page").value == 1
    assert "Select a run" in texts(at)


def test_each_page_freezes_the_long_lived_heap_once(big, monkeypatch):
    """After a page's first run its long-lived objects move to the collector's permanent generation
    (ui.freeze_heap_once), so no later full collection walks them again; a later run freezes nothing."""
    import gc

    from dashbench.views.streamlit import ui

    calls = []
    freeze = gc.freeze
    monkeypatch.setattr(ui, "_FROZEN_AFTER", set())
    monkeypatch.setattr(gc, "freeze", lambda: (calls.append(1), freeze()))
    gc.unfreeze()
    at = start(monkeypatch, big)  # Compare, the root page
    assert len(calls) == 1 and gc.get_freeze_count() > 10_000
    at.run()
    assert len(calls) == 1
    show(at, "pages/results.py")
    assert len(calls) == 2 and ui._FROZEN_AFTER == {"compare", "results"}
