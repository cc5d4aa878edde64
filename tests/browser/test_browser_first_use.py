"""What a newcomer sees in Chromium at a 1400 × 1000 window: the empty store's published rows
are all in view. The rest is checked on the pages tests/browser/test_browser.py opens anyway: no page
asks another host for anything and every table shows a row's figures and flags without scrolling sideways
(test_every_page_in_a_real_browser, tests/fixtures/browser_tables.py), and a typed /run on a read-only dashboard
says why it shows Compare (test_read_only_server_has_no_run_page)."""

from fixtures.browser_fixtures import browser, open_page, streamlit_server  # noqa: F401 (browser: the fixture)

from dashbench.costs import reference
from dashbench.store import Store


def test_empty_store_shows_every_published_row_it_chose(browser, tmp_path):
    from playwright.sync_api import expect

    db = tmp_path / "empty.sqlite"
    Store(db).close()
    published = reference.rows()
    with streamlit_server(db) as url:
        page = open_page(browser, url + "/compare", "Compare", "first-use-empty-compare.png")
        group = page.locator("[data-testid='stButtonGroup']").filter(
            has=page.get_by_text(published["name"].iloc[0], exact=True)
        )
        expect(group).to_have_count(1)
        group.scroll_into_view_if_needed()
        box = group.bounding_box()
        buttons = group.locator("button").all()
        assert len(buttons) == len(published)
        for button in buttons:  # every row's chip whole inside the chooser, none cut off
            b = button.bounding_box()
            assert box["x"] <= b["x"] and b["x"] + b["width"] <= box["x"] + box["width"] + 1, b
            assert box["y"] <= b["y"] and b["y"] + b["height"] <= box["y"] + box["height"] + 1, b
        assert group.evaluate("el => el.scrollHeight <= el.clientHeight + 1")
        page.close()
