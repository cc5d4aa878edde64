"""What a visitor sees when a page fails. (Several visitors at once on a freshly started dashboard:
tests/browser/test_browser.py's read-only server.)

The server and the browser are tests/fixtures/browser_fixtures.py's (one copy of each)."""

import re
from pathlib import Path

from fixtures.browser_fixtures import IDLE, PAGE_TIMEOUT_MS, browser, scale  # noqa: F401 (browser: the fixture)


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

    chosen = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())
    value = chosen["client"]["showErrorDetails"]
    hiding = {config.ShowErrorDetailsConfigOptions.NONE, config.ShowErrorDetailsConfigOptions.TYPE}
    assert value in {str(option) for option in hiding}, f"client.showErrorDetails = {value!r} shows a traceback"


def test_the_served_config_skips_streamlits_full_collection_after_every_run_with_an_option_it_knows():
    import tomllib
    from streamlit import config

    chosen = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())
    assert "runner.postScriptGC" in config._config_options_template  # a renamed option would be ignored
    assert chosen["runner"]["postScriptGC"] is False
