"""The dashboard in a real browser: `streamlit run` on a free local port, every page in headless Chromium
(tests/fixtures/browser_fixtures.py: the server start, the browser, a page opened and checked for failures).

Screenshots land in test-artifacts/ (gitignored). With DASHBENCH_UPDATE_SCREENSHOT=1 the Compare page
is also saved as docs/compare.png, the README's picture.
"""

import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from fixtures import accuracy_results, dashboard_data
from fixtures.browser_fixtures import (  # noqa: F401 (browser: the fixture)
    ARTIFACTS,
    IDLE,
    PAGE_TIMEOUT_MS,
    ROOT,
    WINDOW,
    Recording,
    browser,
    open_page,
    streamlit_server,
)
from fixtures.browser_tables import assert_figures_and_flags_in_view, grids_of

from dashbench.costs import prices
from dashbench.store import Store
from dashbench.views.results import runs as results

# At once, on a server that has run no script yet: three on Results, one on /compare typed by hand.
VISITORS = ("/results", "/results", "/results", "/compare")


def test_every_page_in_a_real_browser(browser, tmp_path, monkeypatch):
    """Every page once, each checked for what it shows; and what a newcomer sees at a 1400 × 1000 window:
    no page asks another host for anything (a TPU VM is often offline), and every table shows a
    row's figures and flags without scrolling sideways."""
    from playwright.sync_api import expect

    db = tmp_path / "runs.sqlite"
    with Store(db) as store:  # older than the fixture's runs: the newest run below is still the fixture's
        to_target = accuracy_results.fill_to_accuracy(store)
    ids = list(to_target.values()) + dashboard_data.fill(db, n_runs=30)
    with Store(db, read_only=True) as store:
        every_column = results.results_table(store.runs(), prices.catalog(store)).columns
    recording, grids = Recording(browser), {}
    with streamlit_server(db) as url:
        # The root opens Compare (/compare typed by hand: the read-only test's visitors).
        page = open_page(recording, url + "/", "Compare", "compare.png")
        assert page.url.rstrip("/").endswith("/compare"), page.url  # at its own address, so it can be bookmarked
        grids["compare"] = grids_of(page)
        expect(page.get_by_text("above peak").first).to_be_visible()
        expect(page.locator(".js-plotly-plot").first).to_be_visible()
        expect(page.get_by_text("Download CSV")).to_be_visible()
        page.close()

        # A to-accuracy run and a throughput run of its setup on another backend: measured and predicted.
        page = open_page(
            recording,
            url + f"/compare?runs={to_target['tensorflow']},{to_target['jax']}",
            "Compare",
            "compare-to-target.png",
        )
        expect(page.get_by_text("Time and cost to target")).to_be_visible()
        for title in ("Time to target", "Validation accuracy against wall time"):
            expect(page.locator(".js-plotly-plot").filter(has_text=title).first).to_be_visible()
        bars = page.locator(".js-plotly-plot").filter(has_text="Time to target")
        expect(bars.first.get_by_text("predicted from another device's epochs")).to_be_visible()
        grids["to_target"] = [g for g in grids_of(page) if "time to target (s, median)" in g["heads"]]
        page.close()

        page = open_page(recording, url + "/results", "Results", "results.png")
        grids["results"] = grids_of(page)  # before a row is selected
        expect(page.get_by_text(f"of {len(ids)} that pass the filters ({len(ids)} stored)")).to_be_visible()
        expect(page.get_by_text("Select a run (the box at the left of its row)")).to_be_visible()
        # A click on the first row's selection box opens that run's detail.
        grid = page.locator("[data-testid='stDataFrame']").first.bounding_box()
        page.mouse.click(grid["x"] + 18, grid["y"] + 35 + 35 // 2)
        expect(page.get_by_text("Environment and placement")).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        title = page.locator("[data-testid='stMarkdownContainer']").filter(has_text=ids[-1][-6:])
        expect(title.first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "results-detail.png"), full_page=True)
        page.close()

        page = open_page(recording, url + "/prices", "Prices", "prices.png")
        grids["prices"] = grids_of(page)
        expect(page.get_by_text("Published reference results")).to_be_visible()
        expect(page.get_by_text("Save price")).to_be_visible()
        page.close()

        # Last: the device discovery it begins (a TensorFlow process) ends with the server, not beside the
        # other pages.
        page = open_page(recording, url + "/run", "Run", "run.png")
        expect(page.get_by_text("Launch run")).to_be_visible()
        expect(page.get_by_text("Preset (an experiment from the seed articles)")).to_be_visible()
        page.close()
        recording.context.close()
        local = urlsplit(url).netloc
        assert set(recording.hosts) == {local}, {h: u for h, u in recording.hosts.items() if h != local}
    assert_figures_and_flags_in_view(grids, every_column)

    if os.environ.get("DASHBENCH_UPDATE_SCREENSHOT") == "1":
        # Served from ~/.dashbench/runs.sqlite (a home folder of its own), the sidebar shows the path a
        # new user's dashboard shows, not this test's temporary folder.
        home = tmp_path / "home"
        (home / ".dashbench").mkdir(parents=True)
        shutil.copy(db, home / ".dashbench" / "runs.sqlite")
        monkeypatch.setenv("HOME", str(home))
        with streamlit_server(home / ".dashbench" / "runs.sqlite") as url:
            readme_screenshot(browser, url, home / ".dashbench" / "runs.sqlite")


# Set before a page's own scripts run: whether "Page not found" ever showed, however briefly (a toast or a
# dialog that a busy machine may have taken away again before a check could look).
SEEN_PAGE_NOT_FOUND = """window.seenPageNotFound = false;
new MutationObserver(records => { for (const r of records) for (const n of r.addedNodes)
  if ((n.textContent || '').includes('Page not found')) window.seenPageNotFound = true;
}).observe(document, {childList: true, subtree: true});"""


def test_read_only_server_has_no_run_page(browser, tmp_path):
    """Several visitors at once on a freshly started read-only server all get the page; no Run page, import
    or delete controls; a typed /run shows Compare and says why, a typed /compare does not."""
    from playwright.sync_api import expect

    db = tmp_path / "runs.sqlite"
    dashboard_data.fill(db, n_runs=12)
    with streamlit_server(db, read_only=True) as url:
        # Each visitor its own browser context (its own session); all requests out before any page is read,
        # so their first script runs overlap on a server that has run none yet.
        contexts = [browser.new_context(viewport={"width": WINDOW, "height": 1000}) for _ in VISITORS]
        pages = [context.new_page() for context in contexts]
        for page, path in zip(pages, VISITORS):
            page.goto(url + path, wait_until="commit")
        for number, (page, path) in enumerate(zip(pages, VISITORS)):
            title = path.strip("/").title()
            expect(page.get_by_role("heading", name=title, exact=True)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
            expect(page.locator(IDLE)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
            expect(page.locator("[data-testid='stSkeleton']")).to_have_count(0, timeout=PAGE_TIMEOUT_MS)
            page.screenshot(path=str(ARTIFACTS / f"read-only-{title.lower()}-{number}.png"), full_page=True)
            text = page.locator("[data-testid='stApp']").inner_text()
            # Must not happen: a traceback (with the server's paths), or an exception box.
            assert "KeyError" not in text and "Traceback" not in text, f"visitor {number}: {text[:500]}"
            expect(page.locator("[data-testid='stException']")).to_have_count(0)
            nav = page.locator("[data-testid='stSidebarNav']")
            expect(nav.get_by_text("Compare")).to_be_visible()
            # Must not happen in read-only mode: a Run page, or import / delete controls.
            expect(nav.get_by_text("Run", exact=True)).to_have_count(0)
            expect(page.get_by_text("Runs to delete")).to_have_count(0)
            expect(page.locator("[data-testid='stFileUploader']")).to_have_count(0)
            expect(page.get_by_text("Read-only")).to_be_visible()
            if path == "/compare":
                expect(page.get_by_text("This dashboard is read-only")).to_have_count(0)  # said for /run only
            page.close()

        # Must not happen: the launch form, when the Run page's URL is typed in directly. (A new tab of the
        # first visitor's browser: a new session, with Streamlit's scripts in its cache.)
        page = contexts[0].new_page()
        page.add_init_script(SEEN_PAGE_NOT_FOUND)  # a pop-up seen at any moment, gone again or not
        page.goto(url + "/run")
        expect(page.locator(IDLE)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.locator("[data-testid='stSkeleton']")).to_have_count(0, timeout=PAGE_TIMEOUT_MS)
        page.screenshot(path=str(ARTIFACTS / "read-only-run-url.png"), full_page=True)
        # Compare instead, quietly: one line on why, and never Streamlit's "Page not found" pop-up.
        expect(page.get_by_role("heading", name="Compare", exact=True)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        assert page.evaluate("() => window.seenPageNotFound") is False
        expect(page.get_by_text("This dashboard is read-only")).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.get_by_text("Launch run")).to_have_count(0)
        expect(page.locator("[data-testid='stForm']")).to_have_count(0)
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        page.close()
        for context in contexts:
            context.close()
        assert list(tmp_path.glob("runs.sqlite-*"))  # SQLite's -wal and -shm, while the server reads
    # Stopped (SIGTERM), the read-only dashboard leaves nothing beside the database.
    assert not list(tmp_path.glob("runs.sqlite-*"))


def readme_screenshot(browser, url: str, db: Path):
    """The picture under the README's first command: one workload across devices, next to the articles."""
    from playwright.sync_api import expect

    from dashbench.store import Store

    with Store(db, read_only=True) as store:
        runs = store.runs(status="done", model="fashion_mnist_cnn")
    # One run per device, a flagged one among them, so the flag box shows too.
    flagged = runs[runs["flags"].map(bool)].head(1)
    picked = flagged["run_id"].tolist() + runs.drop_duplicates("accelerator")["run_id"].tolist()
    picked = list(dict.fromkeys(picked))
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    page.goto(url + "/?runs=" + ",".join(picked))
    expect(page.get_by_role("heading", name="Compare", exact=True)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    expect(page.locator(IDLE)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    expect(page.locator("[data-testid='stSkeleton']")).to_have_count(0, timeout=PAGE_TIMEOUT_MS)
    expect(page.locator(".js-plotly-plot")).to_have_count(2)  # throughput and cost; the Charts control offers the rest
    expect(page.get_by_text("~/.dashbench/runs.sqlite")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "readme-compare.png"))
    shutil.copy(ARTIFACTS / "readme-compare.png", ROOT / "docs" / "compare.png")
    page.close()
