"""A freshly started dashboard and several visitors at once; what a visitor sees when a page fails.

The server and the browser are tests/browser_fixtures.py's (one copy of each)."""

import re
from pathlib import Path

import dashboard_data
from browser_fixtures import ARTIFACTS, IDLE, PAGE_TIMEOUT_MS, scale, streamlit_server

VISITORS = 4


def test_visitors_opening_results_together_on_a_fresh_read_only_server_all_get_the_page(browser, tmp_path):
    from playwright.sync_api import expect

    db = tmp_path / "runs.sqlite"
    dashboard_data.fill(db, n_runs=6)
    with streamlit_server(db, read_only=True) as url:
        # Each visitor its own browser context (its own session); all requests out before any page is read,
        # so their first script runs overlap on a server that has run none yet.
        contexts = [browser.new_context(viewport={"width": 1400, "height": 1000}) for _ in range(VISITORS)]
        pages = [context.new_page() for context in contexts]
        for page in pages:
            page.goto(url + "/results", wait_until="commit")
        for number, page in enumerate(pages):
            expect(page.get_by_role("heading", name="Results", exact=True)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
            expect(page.locator(IDLE)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
            page.screenshot(path=str(ARTIFACTS / f"visitor-{number}.png"), full_page=True)
            text = page.locator("[data-testid='stApp']").inner_text()
            # Must not happen: a traceback (with the server's paths), or the read-only dashboard's Run page.
            assert "KeyError" not in text and "Traceback" not in text, f"visitor {number}: {text[:500]}"
            expect(page.locator("[data-testid='stException']")).to_have_count(0)
            nav = page.locator("[data-testid='stSidebarNav']")
            expect(nav.get_by_text("Compare")).to_be_visible()
            expect(nav.get_by_text("Run", exact=True)).to_have_count(0)
            expect(page.get_by_text("Read-only")).to_be_visible()
        for context in contexts:
            context.close()


def test_a_failing_page_shows_the_visitor_no_message_or_path_and_the_log_keeps_both(browser, tmp_path):
    """Served with the project's .streamlit/config.toml (the server runs in the project's folder)."""
    from playwright.sync_api import expect

    secret = tmp_path / "server-only" / "runs.sqlite"
    app = tmp_path / "boom.py"
    app.write_text(f"raise KeyError({f'st.session_state has no key {secret}'!r})\n")
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    with scale.streamlit_server(tmp_path / "unused.sqlite", False, log_dir, app=app) as url:
        page = browser.new_page()
        page.goto(url + "/")
        expect(page.locator(IDLE)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        box = page.locator("[data-testid='stException']")
        expect(box).to_have_count(1)  # the visitor learns that the page failed ...
        shown = page.locator("[data-testid='stApp']").inner_text()
        # ... but not how, nor where on the server.
        assert str(tmp_path) not in shown and "session_state" not in shown, shown[:1000]
        assert "Traceback" not in shown and "boom.py" not in shown, shown[:1000]
        page.close()
    log = "".join(p.read_text(errors="replace") for p in Path(log_dir).glob("*.log"))
    # The terminal's traceback is coloured and wrapped to its width: read it without either.
    flat = re.sub(r"\x1b\[[0-9;]*m|\s", "", log)
    assert re.sub(r"\s", "", str(secret)) in flat and "boom.py" in flat  # the terminal keeps the whole story


def test_the_served_config_hides_error_details_with_a_value_this_streamlit_knows():
    import tomllib

    from streamlit import config

    chosen = tomllib.loads((Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml").read_text())
    value = chosen["client"]["showErrorDetails"]
    hiding = {config.ShowErrorDetailsConfigOptions.NONE, config.ShowErrorDetailsConfigOptions.TYPE}
    assert value in {str(option) for option in hiding}, f"client.showErrorDetails = {value!r} shows a traceback"


def test_the_served_config_skips_streamlits_full_collection_after_every_run_with_an_option_it_knows():
    import tomllib

    from streamlit import config

    chosen = tomllib.loads((Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml").read_text())
    assert "runner.postScriptGC" in config._config_options_template  # a renamed option would be ignored
    assert chosen["runner"]["postScriptGC"] is False
