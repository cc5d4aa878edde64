"""The dashboard in a real browser, for the tests/test_browser*.py tests: `streamlit run` on a free local
port (bench/dashboard_scale.py's start, one copy) and headless Chromium.

Screenshots land in test-artifacts/ (gitignored)."""

from pathlib import Path
from urllib.parse import urlsplit

import pytest

import bench_scripts

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
# The server start, Chromium's flags and the idle test are the dashboard benchmark's (one copy).
scale = bench_scripts.load("dashboard_scale")
CHROMIUM, CHROMIUM_ARGS, IDLE = scale.CHROMIUM, scale.CHROMIUM_ARGS, scale.IDLE
# The Run page's first render waits for device discovery (a TensorFlow subprocess) on a slow CI box.
PAGE_TIMEOUT_MS = 90_000
WINDOW = 1400  # a newcomer's window width (issue 21)


def streamlit_server(db: Path, read_only: bool = False):
    ARTIFACTS.mkdir(exist_ok=True)
    return scale.streamlit_server(db, read_only, ARTIFACTS)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through Playwright, one per test module (each test opens pages, or contexts, of its
    own). Not one per process: while Playwright's sync API is started, its event loop runs in this thread,
    and a later test's asyncio.run() would fail."""
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

    # A Browser: a context of its own; a BrowserContext or a Recording: a tab of theirs (their viewport).
    page = browser.new_page(viewport={"width": WINDOW, "height": 1000}) if hasattr(browser, "new_context") \
        else browser.new_page()
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


class Recording:
    """The browser, with every request of every page it opens recorded (host of each http(s)/ws(s) URL).
    Its pages are tabs of one context (each tab a Streamlit session of its own) that share an HTTP cache:
    Streamlit's scripts are fetched and compiled once, as a visitor's browser does, not once per page."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": WINDOW, "height": 1000})
        self.hosts = {}

    def new_page(self, **kwargs):  # the viewport is the context's
        page = self.context.new_page()
        page.on("request", lambda r: self.hosts.setdefault(urlsplit(r.url).netloc, r.url)
                if urlsplit(r.url).scheme in ("http", "https", "ws", "wss") else None)
        return page
