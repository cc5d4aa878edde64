"""What a newcomer sees in Chromium at a 1400 × 1000 window (issue 21): no page asks another host for
anything (a TPU VM is often offline), every table shows a row's figures and flags without scrolling
sideways, a typed /run on a read-only dashboard says why it shows Compare, and the empty store's
published rows are all in view. The real browser and server of tests/test_browser.py."""

from urllib.parse import urlsplit

from dashbench.costs import prices, reference
from dashbench.store import Store
from dashbench.views import results
from dashbench.views.columns import COLUMNS, MUST_SEE, width_of

import dashboard_data
from test_browser import PAGE_TIMEOUT_MS, browser, open_page, streamlit_server  # noqa: F401 (browser: the fixture)

WINDOW = 1400
# A table's geometry: Streamlit's grid draws on a canvas; its scroller's width is the columns' sum, and its
# hidden accessibility table names the columns drawn, in order.
GRID = """el => { const sc = el.querySelector('.dvn-scroller'); const box = el.getBoundingClientRect();
  return {left: box.left, right: box.right, scroll: sc.scrollWidth, client: sc.clientWidth,
          heads: [...el.querySelectorAll('th')].map(t => t.textContent)}; }"""
LABELS = {spec.label: name for name, spec in COLUMNS.items() if name not in ("device", "price")}


class Recording:
    """The browser, with every request of every page it opens recorded (host of each http(s)/ws(s) URL)."""

    def __init__(self, browser):
        self.browser, self.hosts = browser, {}

    def new_page(self, **kwargs):
        page = self.browser.new_page(**kwargs)
        page.on("request", lambda r: self.hosts.setdefault(urlsplit(r.url).netloc, r.url)
                if urlsplit(r.url).scheme in ("http", "https", "ws", "wss") else None)
        return page


def geometry(locator) -> dict:
    """A table's geometry, once it is drawn (a grid out of view waits to be scrolled to)."""
    from playwright.sync_api import expect

    locator.scroll_into_view_if_needed()
    expect(locator.locator(".dvn-scroller")).to_have_count(1, timeout=PAGE_TIMEOUT_MS)
    expect(locator.locator("th").first).to_be_attached(timeout=PAGE_TIMEOUT_MS)
    return locator.evaluate(GRID)


def must_see_edges(grid: dict, marker: int) -> dict[str, float]:
    """The right edge, in the grid's own px, of each MUST_SEE column it shows."""
    edges, right = {}, marker
    for label in grid["heads"]:
        name = LABELS.get(label)
        assert name and width_of(name), f"column {label!r} is drawn before the figures at a width not set here"
        right += width_of(name)
        if name in MUST_SEE:
            edges[name] = right
        if len(edges) == sum(m in LABELS.values() for m in MUST_SEE):
            break
    return edges


def test_no_page_asks_another_host_and_tables_show_figures_and_flags(browser, tmp_path):  # noqa: F811
    db = tmp_path / "runs.sqlite"
    dashboard_data.fill(db, n_runs=30)
    with Store(db, read_only=True) as store:
        every_column = results.results_table(store.runs(), prices.catalog(store)).columns
    recording = Recording(browser)
    with streamlit_server(db) as url:
        grids = {}
        for path, title in (("run", "Run"), ("compare", "Compare"), ("results", "Results"), ("prices", "Prices")):
            page = open_page(recording, f"{url}/{path}", title, f"first-use-{path}.png")
            grids[path] = [geometry(g) for g in page.locator("[data-testid='stDataFrame']:visible").all()]
            page.close()
        local = urlsplit(url).netloc
        assert set(recording.hosts) == {local}, {h: u for h, u in recording.hosts.items() if h != local}

    # The widths set in dashbench.views.columns are the ones drawn: the Results grid (every column set)
    # is their sum plus its selection boxes.
    (table,) = grids["results"]
    marker = table["scroll"] - sum(width_of(c) for c in every_column)
    assert 0 < marker <= 50, (table["scroll"], marker)
    checked = {"results": table, "published": grids["prices"][1], "compare": grids["compare"][0]}
    assert {"published row", "run / published row"} <= {g["heads"][0] for g in checked.values()}
    for name, grid in checked.items():
        assert 0 <= grid["left"] and grid["right"] <= WINDOW, (name, grid)  # the table inside the window
        edges = must_see_edges(grid, marker if name == "results" else 0)
        assert {"examples_per_sec", "mfu", "flags"} <= set(edges), (name, grid["heads"])
        for column, right in edges.items():
            assert right <= grid["client"], (name, column, right, grid["client"])  # whole, no sideways scroll


def test_typed_run_on_a_read_only_dashboard_says_why_it_shows_compare(browser, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    db = tmp_path / "runs.sqlite"
    dashboard_data.fill(db, n_runs=6)
    with streamlit_server(db, read_only=True) as url:
        page = browser.new_page(viewport={"width": WINDOW, "height": 1000})
        page.goto(url + "/run")
        expect(page.get_by_role("heading", name="Compare", exact=True)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.get_by_text("This dashboard is read-only")).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.get_by_text("Launch run")).to_have_count(0)
        page.close()
        page = open_page(browser, url + "/compare", "Compare", "read-only-compare.png")
        expect(page.get_by_text("This dashboard is read-only")).to_have_count(0)  # not for /compare itself
        page.close()


def test_empty_store_shows_every_published_row_it_chose(browser, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    db = tmp_path / "empty.sqlite"
    Store(db).close()
    published = reference.rows()
    with streamlit_server(db) as url:
        page = open_page(browser, url + "/compare", "Compare", "first-use-empty-compare.png")
        group = page.locator("[data-testid='stButtonGroup']").filter(
            has=page.get_by_text(published["name"].iloc[0], exact=True))
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
