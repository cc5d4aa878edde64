"""The dashboard in Chromium while its team store's server crashes and starts again: the page a visitor
opens during the outage says it retries, and shows the runs by itself once the server answers (its
fragment asks again every few seconds), with no click, no reload and no restart of the dashboard."""

from fixtures.app_outage import team  # noqa: F401 (a fixture: a filled store on a server of the test's own)
from fixtures.browser_fixtures import PAGE_TIMEOUT_MS, browser, open_page, streamlit_server  # noqa: F401 (a fixture)
from fixtures.pg_restart import crash, pg_own, start_again  # noqa: F401 (pg_own: a fixture)
from fixtures.stored_runs import SPEC

from dashbench.store import Store
from dashbench.views.common import context
from dashbench.views.streamlit import ui


def test_a_page_open_in_chromium_through_a_server_crash_recovers_by_itself(browser, team, monkeypatch):
    from playwright.sync_api import expect

    server, stored = team
    monkeypatch.setenv(ui.OUTAGE_RETRY_ENV, "1")  # the server's page asks again every second, not every 3 s
    with streamlit_server(server.url()) as app:
        page = open_page(browser, app + "/compare", "Compare", "outage-before.png")
        crash(server)
        page.get_by_role("link", name="Results").click()  # the visitor's next page, asked for during the outage
        outage = page.get_by_text(context.OUTAGE_TEXT)
        expect(outage).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        start_again(server)
        expect(page.locator("[data-testid='stDataFrame']")).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(outage).to_have_count(0)
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        page.close()


def test_the_run_pages_live_panel_says_the_outage_and_comes_back_by_itself(browser, pg_own):
    from playwright.sync_api import expect

    url = pg_own.url()
    with Store(url) as store:  # a run another host is measuring: its live panel refreshes every second
        store.create_run(SPEC.replace(label="far"), status="running", pid=1, host="far-host")
    with pg_own.connect() as conn:
        conn.execute("CHECKPOINT")
    with streamlit_server(url) as app:
        page = open_page(browser, app + "/run", "Run", "outage-run-before.png")
        active = page.get_by_text("Active runs (1)")
        expect(active).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        crash(pg_own)  # no click from here on: the panel's own refresh meets the outage
        outage = page.get_by_text(context.OUTAGE_TEXT)
        expect(outage).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        start_again(pg_own)
        expect(outage).to_have_count(0, timeout=PAGE_TIMEOUT_MS)
        expect(active).to_be_visible()
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        page.close()
