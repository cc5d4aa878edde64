"""The dashboard in Chromium while its team store's server crashes and starts again: the page a visitor
opens during the outage says it retries, and shows the runs by itself once the server answers (its
fragment asks again every few seconds), with no click, no reload and no restart of the dashboard."""

from browser_fixtures import PAGE_TIMEOUT_MS, browser, open_page, streamlit_server  # noqa: F401 (a fixture)
from pg_restart import crash, pg_own, start_again  # noqa: F401 (pg_own: a fixture)
from test_app_outage import team  # noqa: F401 (a fixture: a filled store on a server of the test's own)

from dashbench.views import context


def test_a_page_open_in_chromium_through_a_server_crash_recovers_by_itself(browser, team):
    from playwright.sync_api import expect

    server, stored = team
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
