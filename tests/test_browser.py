"""The dashboard in a real browser: `streamlit run` on a free local port, every page in headless Chromium.

Screenshots land in test-artifacts/ (gitignored). With DASHBENCH_UPDATE_SCREENSHOT=1 the Compare page
is also saved as docs/compare.png, the README's picture.
"""

import os
import shutil
from pathlib import Path

import pytest

import accuracy_results
import bench_scripts
import dashboard_data
from dashbench.store import Store

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
# The server start, Chromium's flags and the idle test are the dashboard benchmark's (one copy).
scale = bench_scripts.load("dashboard_scale")
CHROMIUM, CHROMIUM_ARGS, IDLE = scale.CHROMIUM, scale.CHROMIUM_ARGS, scale.IDLE
# The Run page's first render waits for device discovery (a TensorFlow subprocess) on a slow CI box.
PAGE_TIMEOUT_MS = 90_000


def streamlit_server(db: Path, read_only: bool = False):
    ARTIFACTS.mkdir(exist_ok=True)
    return scale.streamlit_server(db, read_only, ARTIFACTS)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's `chromium` (as .ci/run does) "
                    "or point DASHBENCH_CHROMIUM at a Chromium binary. This test does not skip.")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_page(browser, url: str, heading: str, shot: str):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    expect(page.locator(IDLE)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    # Elements load lazily: placeholders first, then the widget.
    expect(page.locator("[data-testid='stSkeleton']")).to_have_count(0, timeout=PAGE_TIMEOUT_MS)
    # Must not happen: an exception box, or "page not found", on any page.
    expect(page.locator("[data-testid='stException']")).to_have_count(0)
    expect(page.locator("[data-testid='stDialog']")).to_have_count(0)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    return page


def test_every_page_in_a_real_browser(browser, tmp_path, monkeypatch):
    from playwright.sync_api import expect

    db = tmp_path / "runs.sqlite"
    with Store(db) as store:  # older than the fixture's runs: the newest run below is still the fixture's
        to_target = accuracy_results.fill_to_accuracy(store)
    ids = list(to_target.values()) + dashboard_data.fill(db, n_runs=30)
    with streamlit_server(db) as url:
        page = open_page(browser, url + "/run", "Run", "run.png")
        expect(page.get_by_text("Launch run")).to_be_visible()
        expect(page.get_by_text("Preset (an experiment from the seed articles)")).to_be_visible()
        page.close()

        page = open_page(browser, url + "/", "Compare", "compare.png")  # the root opens Compare
        assert page.url.rstrip("/").endswith("/compare"), page.url  # at its own address, so it can be bookmarked
        page = open_page(browser, url + "/compare", "Compare", "compare-url.png")  # typed by hand
        expect(page.get_by_text("above peak").first).to_be_visible()
        expect(page.locator(".js-plotly-plot").first).to_be_visible()
        expect(page.get_by_text("Download CSV")).to_be_visible()
        page.close()

        # A to-accuracy run and a throughput run of its setup on another backend: measured and predicted.
        page = open_page(browser, url + f"/compare?runs={to_target['tensorflow']},{to_target['jax']}", "Compare",
                         "compare-to-target.png")
        expect(page.get_by_text("Time and cost to target")).to_be_visible()
        for title in ("Time to target", "Validation accuracy against wall time"):
            expect(page.locator(".js-plotly-plot").filter(has_text=title).first).to_be_visible()
        bars = page.locator(".js-plotly-plot").filter(has_text="Time to target")
        expect(bars.first.get_by_text("predicted from another device's epochs")).to_be_visible()
        page.close()

        page = open_page(browser, url + "/results", "Results", "results.png")
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

        page = open_page(browser, url + "/prices", "Prices", "prices.png")
        expect(page.get_by_text("Published reference results")).to_be_visible()
        expect(page.get_by_text("Save price")).to_be_visible()
        page.close()

    if os.environ.get("DASHBENCH_UPDATE_SCREENSHOT") == "1":
        # Served from ~/.dashbench/runs.sqlite (a home folder of its own), the sidebar shows the path a
        # new user's dashboard shows, not this test's temporary folder.
        home = tmp_path / "home"
        (home / ".dashbench").mkdir(parents=True)
        shutil.copy(db, home / ".dashbench" / "runs.sqlite")
        monkeypatch.setenv("HOME", str(home))
        with streamlit_server(home / ".dashbench" / "runs.sqlite") as url:
            readme_screenshot(browser, url, home / ".dashbench" / "runs.sqlite")


def test_read_only_server_has_no_run_page(browser, tmp_path):
    from playwright.sync_api import expect

    db = tmp_path / "runs.sqlite"
    dashboard_data.fill(db, n_runs=12)
    with streamlit_server(db, read_only=True) as url:
        page = open_page(browser, url + "/results", "Results", "read-only-results.png")
        nav = page.locator("[data-testid='stSidebarNav']")
        expect(nav.get_by_text("Compare")).to_be_visible()
        # Must not happen in read-only mode: a Run page, or import / delete controls.
        expect(nav.get_by_text("Run", exact=True)).to_have_count(0)
        expect(page.get_by_text("Runs to delete")).to_have_count(0)
        expect(page.locator("[data-testid='stFileUploader']")).to_have_count(0)
        expect(page.get_by_text("Read-only")).to_be_visible()
        page.close()

        # Must not happen: the launch form, when the Run page's URL is typed in directly.
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/run")
        expect(page.locator(IDLE)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.locator("[data-testid='stSkeleton']")).to_have_count(0, timeout=PAGE_TIMEOUT_MS)
        page.screenshot(path=str(ARTIFACTS / "read-only-run-url.png"), full_page=True)
        # Streamlit shows Compare instead (its "Page not found" notice is a toast: gone again on a busy machine
        # before it can be seen, so not asserted).
        expect(page.get_by_role("heading", name="Compare", exact=True)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
        expect(page.get_by_text("Launch run")).to_have_count(0)
        expect(page.locator("[data-testid='stForm']")).to_have_count(0)
        expect(page.locator("[data-testid='stException']")).to_have_count(0)
        page.close()
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
    expect(page.locator(".js-plotly-plot")).to_have_count(4)
    expect(page.get_by_text("~/.dashbench/runs.sqlite")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "readme-compare.png"))
    shutil.copy(ARTIFACTS / "readme-compare.png", ROOT / "docs" / "compare.png")
    page.close()
