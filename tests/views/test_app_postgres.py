"""The dashboard on a team store: every page on PostgreSQL, and a results server whose role may
only SELECT shows every page, writes nothing, and shows no password."""

import pytest
from fixtures import dashboard_data
from fixtures.app_test import APP, PAGES, TIMEOUT_S, assert_clean, show, texts
from fixtures.pg_server import create_reader
from streamlit.testing.v1 import AppTest

from dashbench.store import Store

PASSWORD = "s3cret-Pw"


def start(monkeypatch, url, read_only=False) -> AppTest:
    monkeypatch.setenv("DASHBENCH_DB", url)
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "1" if read_only else "0")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    assert_clean(at)
    return at


@pytest.fixture
def filled_pg(pg_url):
    ids = dashboard_data.fill(pg_url, n_runs=30)
    return pg_url, ids


def test_every_page_renders_on_a_team_store(filled_pg, monkeypatch):
    url, ids = filled_pg
    at = start(monkeypatch, url.replace("postgres@", f"postgres:{PASSWORD}@", 1))
    for page in PAGES:
        show(at, page)
    show(at, "pages/results.py")
    assert len(at.dataframe[0].value) == len(ids)
    shown = texts(at) + "".join(str(m.value) for m in at.sidebar.markdown)
    assert PASSWORD not in shown and "postgres:***@" in shown  # the sidebar names the server, masked


def test_a_select_only_role_shows_every_page_and_writes_nothing(filled_pg, monkeypatch):
    url, ids = filled_pg
    with Store(url) as store:
        before = (store.change_token(), store.count_runs())
    reader = create_reader(url).replace("@", f":{PASSWORD}@", 1)
    at = start(monkeypatch, reader, read_only=True)
    for page in PAGES[1:]:
        show(at, page)
    show(at, "pages/results.py")
    assert len(at.dataframe[0].value) == len(ids)
    assert PASSWORD not in texts(at)
    # Started without --read-only, the role is named at once: no page gets as far as trying to write.
    at = start(monkeypatch, reader, read_only=False)
    shown = texts(at).replace("\\", "").replace("\u200b", "")  # as the page shows it, less its escapes
    assert "may only SELECT" in shown and "read-only" in shown and PASSWORD not in shown
    with Store(url) as store:
        assert (store.change_token(), store.count_runs()) == before
