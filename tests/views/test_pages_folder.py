"""Pins the Streamlit behaviour that dashbench/views/streamlit/pages_folder.py works around (see its docstring).

If one of these fails after a Streamlit upgrade, read the message: either the workaround can go, or it
must change with Streamlit's internals."""

from pathlib import Path

import pytest
from streamlit import config
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from dashbench.store import Store
from dashbench.views.streamlit import pages_folder, ui

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
TIMEOUT_S = 180


@pytest.fixture
def read_only_app(tmp_path, monkeypatch):
    """A browser's first request to the Prices page of a read-only dashboard, before any st.navigation."""
    db = tmp_path / "runs.sqlite"
    Store(db).close()
    monkeypatch.setenv("DASHBENCH_DB", str(db))
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "1")
    saved = PagesManager.uses_pages_directory
    yield AppTest.from_file(APP, default_timeout=TIMEOUT_S).switch_page("pages/prices.py")
    PagesManager.uses_pages_directory = saved


def test_streamlit_still_decides_legacy_pages_by_the_folder_in_a_private_class_attribute():
    saved = PagesManager.uses_pages_directory
    try:
        PagesManager.uses_pages_directory = None
        PagesManager(APP, setup_watcher=False)
        assert PagesManager.uses_pages_directory is True, (
            "Streamlit no longer flags an app with a pages/ folder as legacy through "
            "PagesManager.uses_pages_directory: see whether dashbench/views/streamlit/pages_folder.py is still needed"
        )
    finally:
        PagesManager.uses_pages_directory = saved


def test_streamlit_still_runs_a_page_opened_directly_without_app_py(read_only_app, monkeypatch):
    monkeypatch.setattr(pages_folder, "run_app_instead_of_legacy_page", lambda **_: None)
    # The project's config hides an exception's message from the page; this test reads it.
    shown = config.get_option("client.showErrorDetails")
    config.set_option("client.showErrorDetails", "full")
    try:
        at = read_only_app.run()
    finally:
        config.set_option("client.showErrorDetails", shown)
    skipped = [e.value for e in at.exception if f'no key "{ui.CONTEXT_KEY}"' in e.value]
    assert skipped and ui.CONTEXT_KEY not in at.session_state, (
        "Streamlit now runs app.py before a page opened directly: dashbench/views/streamlit/pages_folder.py can go"
    )


def test_a_page_opened_directly_renders_through_app_py_with_its_settings(read_only_app):
    at = read_only_app.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Prices"]
    assert at.session_state[ui.CONTEXT_KEY].settings.read_only  # app.py's settings, from DASHBENCH_READ_ONLY
    assert any(c.value.startswith("**Read-only**") for c in at.sidebar.caption)  # drawn by app.py
    assert PagesManager.uses_pages_directory is False  # later requests go straight through st.navigation


def test_a_legacy_run_whose_attribute_another_visitor_cleared_still_renders_through_app_py(read_only_app, monkeypatch):
    """Visitors arriving together on a fresh server: each first run begins as a legacy run, and the first
    to reach a page clears the class attribute while the others are still importing theirs."""
    original = pages_folder.run_app_instead_of_legacy_page

    def after_another_visitor(**kwargs):
        PagesManager.uses_pages_directory = False  # what the first visitor's run did meanwhile
        return original(**kwargs)

    monkeypatch.setattr(pages_folder, "run_app_instead_of_legacy_page", after_another_visitor)
    at = read_only_app.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Prices"]
    assert at.session_state[ui.CONTEXT_KEY].settings.read_only


def test_a_visit_at_the_root_runs_the_sessions_next_page_through_app_py_too(tmp_path, monkeypatch):
    """The root's first run is a legacy run whose main page is app.py itself: the context it leaves in the
    session is over with its run (its store closed), and the next page must not run on it without app.py."""
    db = tmp_path / "runs.sqlite"
    Store(db).close()
    monkeypatch.setenv("DASHBENCH_DB", str(db))
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "1")
    saved = PagesManager.uses_pages_directory
    PagesManager.uses_pages_directory = True  # a fresh server
    try:
        at = AppTest.from_file(APP, default_timeout=TIMEOUT_S).run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.session_state[ui.CONTEXT_KEY].ended
        at.switch_page("pages/prices.py").run()
        assert not at.exception, [e.value for e in at.exception]
        assert [t.value for t in at.title] == ["Prices"]
        assert any(c.value.startswith("**Read-only**") for c in at.sidebar.caption)  # drawn by app.py
    finally:
        PagesManager.uses_pages_directory = saved
