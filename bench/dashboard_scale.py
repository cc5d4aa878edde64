"""How fast the dashboard's pages render over stores of 10k and 100k runs.

Fills fresh SQLite stores with bench/store_queries.py's filler, then times every page under
streamlit.testing.v1.AppTest (first load with cold Streamlit caches, reruns with nothing changed, a
filter change), in normal and read-only mode, and optionally in a real browser (`streamlit run` and
headless Chromium through Playwright). Writes the table into docs/PERFORMANCE.md between the
`<!-- dashboard -->` markers.

    .venv/bin/python bench/dashboard_scale.py                       # 100 (baseline), 10k, 100k runs; writes the docs
    .venv/bin/python bench/dashboard_scale.py --runs 2000 --no-docs --no-browser
    .venv/bin/python bench/dashboard_scale.py --runs 10000 --pages compare,results --keep /tmp/stores
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import platform
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import store_queries  # its fake_run/fill filler
from docs_block import write_block  # bench/, on sys.path when a script here runs

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
APP = ROOT / "app.py"
DOCS = ROOT / "docs" / "PERFORMANCE.md"

# page name -> (file, title on the page, filter multiselect key timed by "filter change", or None)
PAGES = {
    "run": ("pages/run.py", "Run", None),
    "compare": ("pages/compare.py", "Compare", "cmp_model"),
    "results": ("pages/results.py", "Results", "res_model"),
    "prices": ("pages/prices.py", "Prices", None),
}
BROWSER_PAGES = ("compare", "results")
MODES = ("normal", "read-only")
TIMEOUT_S = 900  # one AppTest script run; the pages take ~30 s at 100k runs before the rewrite
CHROMIUM = os.environ.get("DASHBENCH_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
BUSY = "[data-testid='stSkeleton'], [data-testid='stSpinner']"
BROWSER_TIMEOUT_MS = 600_000


# ---------------------------------------------------------------------------------------------- targets


def rerun_target(runs: int) -> float | None:
    """The issues' targets: ≤ 0.3 s per rerun at 10k runs, ≤ 1.5 s at 100k (smaller stores: the same),
    ≤ 0.5 s at 1M (what SQLite already did there)."""
    if runs <= 10_000:
        return 0.3
    if runs <= 100_000:
        return 1.5
    return 0.5


def first_load_target(runs: int) -> float | None:
    """≤ 2 s first load at 100k runs and at 1M; a smaller store must not be slower."""
    return 2.0


def cell(seconds: float | None, target: float | None) -> str:
    if seconds is None:
        return "n/a"
    return f"{seconds:.2f}" + (" ✗" if target is not None and seconds > target else "")


# ---------------------------------------------------------------------------------------------- AppTest


@dataclass
class PageTimes:
    runs: int
    mode: str
    page: str
    database: str = "SQLite"
    first: list[float] = field(default_factory=list)
    rerun: list[float] = field(default_factory=list)
    filter: list[float] = field(default_factory=list)
    filter_skipped: str = ""
    browser_first: list[float] = field(default_factory=list)
    browser_reload: list[float] = field(default_factory=list)
    browser_note: str = ""


class PageFailed(RuntimeError):
    pass


@contextlib.contextmanager
def dashboard_env(db: Path, read_only: bool):
    """The app reads its settings from the environment on every script run (views/common/settings.py)."""
    saved = {k: os.environ.get(k) for k in ("DASHBENCH_DB", "DASHBENCH_READ_ONLY")}
    os.environ["DASHBENCH_DB"] = str(db)
    if read_only:
        os.environ["DASHBENCH_READ_ONLY"] = "1"
    else:
        os.environ.pop("DASHBENCH_READ_ONLY", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def clear_caches() -> None:
    import streamlit as st
    from streamlit import logger

    # Bare-mode AppTest and cache clears outside a script run log a warning each time; Streamlit resets
    # its log level when it parses its config (lazily, during the first run), so set it again here.
    logger.set_log_level("error")

    st.cache_data.clear()
    st.cache_resource.clear()


def check(at, where: str) -> None:
    if at.exception:
        raise PageFailed(f"{where} raised: " + " | ".join(str(e.value) for e in at.exception))


def timed_run(at, where: str) -> float:
    t = time.perf_counter()
    at.run(timeout=TIMEOUT_S)
    seconds = time.perf_counter() - t
    check(at, where)
    return seconds


def fresh_session(page: str):
    """A new AppTest session opened straight on `page`. Before the first run AppTest finds a page by
    its file name, which works because app.py registers every page under its file's stem (url_path)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.switch_page(PAGES[page][0])
    return at


def shown_title(at) -> str | None:
    titles = [t.value for t in at.title]
    return titles[0] if titles else None


def warm_up(db: Path, pages: list[str]) -> None:
    """Import everything the pages import (and discover devices, a per-process cache) on a tiny store,
    untimed, so that "first load" is a page's first render in a warm process, not Python's imports."""
    with dashboard_env(db, read_only=False):
        clear_caches()
        at = fresh_session(pages[0])
        at.run(timeout=TIMEOUT_S)
        check(at, f"warm-up {pages[0]}")
        for page in pages[1:]:
            at.switch_page(PAGES[page][0]).run(timeout=TIMEOUT_S)
            check(at, f"warm-up {page}")


def filter_change(at, key: str, where: str) -> float | None:
    """Set multiselect `key` to one model (a different choice from the current one) and rerun, timed;
    then restore the old choice, untimed. None when the page has no such widget."""
    try:
        widget = at.multiselect(key=key)
    except KeyError:
        return None
    options = list(widget.options)
    before = list(widget.value)
    if not options:
        return None
    choice = next(([o] for o in options if [o] != before), [options[0]])
    widget.set_value(choice)
    seconds = timed_run(at, where + f" (filter {key}={choice})")
    at.multiselect(key=key).set_value(before)
    at.run(timeout=TIMEOUT_S)
    check(at, where + f" (restore {key})")
    return seconds


def measure_page(
    db: Path | str, runs: int, mode: str, page: str, tries: int, reruns: int, budget_s: float, database: str = "SQLite"
) -> PageTimes:
    """Per try: a fresh session's first load (caches cleared), then (first try only) `reruns` reruns
    with nothing changed, then one filter change. Stops repeating once `budget_s` is spent on the page
    (every measurement is taken at least once), so a page that takes 30 s is not timed 20 times."""
    out = PageTimes(runs, mode, page, database)
    _, title, key = PAGES[page]
    where = f"{page} ({mode}, {runs:,} runs, {database})"
    spent = 0.0
    with dashboard_env(db, read_only=mode == "read-only"):
        for attempt in range(tries):
            if attempt and spent > budget_s:
                break
            clear_caches()
            at = fresh_session(page)
            seconds = timed_run(at, where + " first load")
            out.first.append(seconds)
            spent += seconds
            if shown_title(at) != title:
                raise PageFailed(f"{where}: expected the page titled {title!r}, AppTest showed {shown_title(at)!r}")
            if attempt == 0:
                for k in range(reruns):
                    if k and spent > budget_s:
                        break
                    seconds = timed_run(at, where + " rerun")
                    out.rerun.append(seconds)
                    spent += seconds
            if key is not None and not out.filter_skipped:
                seconds = filter_change(at, key, where)
                if seconds is None:
                    out.filter_skipped = f"no multiselect {key!r}"
                else:
                    out.filter.append(seconds)
                    spent += seconds * 2  # and its restore
    return out


@dataclass
class GivenServer:
    """A running PostgreSQL server named by a superuser's URL (--postgres-url), with PgServer's url/connect."""

    given: str

    def url(self, dbname: str = "postgres") -> str:
        from sqlalchemy.engine import make_url

        return make_url(self.given).set(database=dbname).render_as_string(hide_password=False)

    def connect(self, dbname: str = "postgres"):
        import psycopg

        return psycopg.connect(self.url(dbname).replace("postgresql+psycopg://", "postgresql://"), autocommit=True)


@contextlib.contextmanager
def postgres_server(given: str | None = None):
    """The server at `given`, left running; else a throwaway one (tests/fixtures/pg_server.py), stopped afterwards."""
    if given:
        yield GivenServer(given)
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from fixtures.pg_server import start_server

    server = start_server()
    try:
        yield server
    finally:
        server.stop()


def postgres_store(
    server, name: str, runs: int, samples: int, seed: int = 0, keep: bool = False
) -> tuple[str, float | None]:
    """A new database on `server` filled by store_queries' filler: its URL and the seconds the fill took;
    with `keep`, a database of that name already there is taken as it is (None seconds), as --keep takes
    an SQLite file (a 1M-run fill takes longer than the pages' timing: fill once, time as often as needed)."""
    with server.connect() as conn:
        if keep and conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return server.url(name), None
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    url = server.url(name)
    fill_s, _ = store_queries.fill(url, runs, samples, seed=seed)
    with server.connect(name) as conn:
        conn.execute("ANALYZE")
    return url, fill_s


# ---------------------------------------------------------------------------------------------- browser


def browser_available() -> bool:
    if not Path(CHROMIUM).exists():
        return False
    return importlib.util.find_spec("playwright") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(db: Path, read_only: bool, log_dir: Path, app: Path = APP):
    """`streamlit run app.py` on a free port, as tests/browser/test_browser.py starts it; killed on exit."""
    port = free_port()
    log_path = log_dir / f"streamlit-{port}.log"
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]
    if read_only:
        argv += ["--", "--read-only"]
    env = dict(os.environ, DASHBENCH_DB=str(db))
    env.pop("DASHBENCH_READ_ONLY", None)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:  # readiness poll of the health endpoint, not a fixed sleep
                try:
                    with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as reply:
                        if reply.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start (see {log_path})")
                time.sleep(0.2)
            yield url
        finally:
            # Its whole process group (its own session): a child it started, as the Run page's device
            # discovery or Predict's profile, would otherwise outlive it and load the cores under what
            # runs next. A run launched from it has a session of its own, and is left alone.
            stop(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                stop(proc, signal.SIGKILL)
                proc.wait()


def stop(proc: subprocess.Popen, sig: int) -> None:
    """`sig` to the process group `proc` leads (started with start_new_session), or to `proc` alone once
    the group is gone."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def wait_idle(page, title: str) -> None:
    """The page's title is shown, the script has stopped, and no skeleton or spinner is left.
    (The title first: before the websocket's first message the app reports no run at all.)"""
    from playwright.sync_api import expect

    expect(page.get_by_role("heading", name=title, exact=True)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.locator(IDLE)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.locator(BUSY)).to_have_count(0, timeout=BROWSER_TIMEOUT_MS)
    shown = page.locator("[data-testid='stException']")
    if shown.count():
        raise PageFailed(f"{page.url} shows an exception in the browser: {shown.first.inner_text()[:2000]}")


def measure_browser(db: Path, results: list[PageTimes], tries: int, budget_s: float, log_dir: Path) -> None:
    """Per page and try: a fresh server, an untimed visit to /prices (the server's imports), then
    page.goto(url) until idle (first visit: the server's caches cold) and a reload until idle (second
    visit: a new session, caches warm). Best of `tries`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for row in results:
                if row.page not in BROWSER_PAGES:
                    continue
                title = PAGES[row.page][1]
                spent = 0.0
                for attempt in range(tries):
                    if attempt and spent > budget_s:
                        break
                    with streamlit_server(db, row.mode == "read-only", log_dir) as url:
                        context = browser.new_context(viewport={"width": 1400, "height": 1000})
                        page = context.new_page()
                        page.goto(url + "/prices")
                        wait_idle(page, "Prices")
                        page.close()
                        page = context.new_page()
                        t = time.perf_counter()
                        page.goto(f"{url}/{row.page}")
                        wait_idle(page, title)
                        first = time.perf_counter() - t
                        t = time.perf_counter()
                        page.reload()
                        wait_idle(page, title)
                        reload = time.perf_counter() - t
                        context.close()
                    row.browser_first.append(first)
                    row.browser_reload.append(reload)
                    spent += first + reload
        finally:
            browser.close()


# What Streamlit itself costs in this browser, dashbench aside: the floor under every browser figure.
FLOOR_APPS = {
    "a page with a title only": 'import streamlit as st\nst.title("Floor")\n',
    "a page with five small Plotly bar charts": (
        'import plotly.graph_objects as go\nimport streamlit as st\nst.title("Floor")\n'
        "for i in range(5):\n"
        '    st.plotly_chart(go.Figure(go.Bar(x=[1, 2, 3], y=["a", "b", "c"], orientation="h")), key=f"c{i}")\n'
    ),
}


def measure_floor(tries: int, log_dir: Path) -> dict[str, tuple[float, float]]:
    """{app: (first, reload)}, best of `tries`, for FLOOR_APPS under measure_browser's protocol: an untimed
    visit first (Streamlit's scripts into the browser's cache), then a timed visit in a new tab and a reload."""
    from playwright.sync_api import sync_playwright

    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for i, (name, source) in enumerate(FLOOR_APPS.items()):
                app = log_dir / f"floor_{i}.py"
                app.write_text(source)
                firsts, reloads = [], []
                for _ in range(tries):
                    with streamlit_server(log_dir / "none.sqlite", False, log_dir, app=app) as url:
                        context = browser.new_context(viewport={"width": 1400, "height": 1000})
                        page = context.new_page()
                        page.goto(url)
                        wait_idle(page, "Floor")
                        page.close()
                        page = context.new_page()
                        t = time.perf_counter()
                        page.goto(url)
                        wait_idle(page, "Floor")
                        firsts.append(time.perf_counter() - t)
                        t = time.perf_counter()
                        page.reload()
                        wait_idle(page, "Floor")
                        reloads.append(time.perf_counter() - t)
                        context.close()
                out[name] = (min(firsts), min(reloads))
        finally:
            browser.close()
    return out


# ---------------------------------------------------------------------------------------------- report


def table(rows: list[PageTimes], browser: bool) -> str:
    databases = len({r.database for r in rows}) > 1
    lines = [
        "| stored runs | " + ("database | " if databases else "") + "mode | page | first load s "
        "| rerun s (best/median) | filter change s | browser idle s (first/reload) |",
        "|---:|" + ("---|" if databases else "") + "---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        load_t, rerun_t = first_load_target(r.runs), rerun_target(r.runs)
        first = cell(min(r.first), load_t) if r.first else "n/a"
        if len(r.first) > 1:
            first += f" (best of {len(r.first)})"
        if r.rerun:
            rerun = f"{min(r.rerun):.2f} / {cell(statistics.median(r.rerun), rerun_t)}"
            if len(r.rerun) < 5:
                rerun += f" (n={len(r.rerun)})"
        else:
            rerun = "n/a"
        if r.filter:
            filt = cell(min(r.filter), rerun_t)
        else:
            filt = "n/a"
        if r.browser_first:
            shot = f"{cell(min(r.browser_first), load_t)} / {cell(min(r.browser_reload), load_t)}"
            if len(r.browser_first) > 1:
                shot += f" (best of {len(r.browser_first)})"
        elif r.page in BROWSER_PAGES and browser:
            shot = r.browser_note or "n/a"
        else:
            shot = "not run" if r.page in BROWSER_PAGES else "—"
        where = f"{r.database} | " if databases else ""
        lines.append(f"| {r.runs:,} | {where}{r.mode} | {r.page} | {first} | {rerun} | {filt} | {shot} |")
    return "\n".join(lines)


def versions() -> str:
    from importlib.metadata import version  # not streamlit's import: seconds on a loaded machine, for a string

    return f"Python {platform.python_version()}, Streamlit {version('streamlit')}, SQLite {sqlite3.sqlite_version}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        default="100,10000,100000",
        help="stored runs per store, comma-separated (the smallest is the baseline)",
    )
    parser.add_argument("--samples", type=int, default=5, help="measured samples per stored run (fill speed)")
    parser.add_argument("--tries", type=int, default=3, help="fresh sessions per page (first load, filter change)")
    parser.add_argument("--reruns", type=int, default=5, help="reruns with nothing changed, in the first session")
    parser.add_argument(
        "--budget",
        type=float,
        default=120.0,
        help="seconds per page and mode after which no more tries start (each kind runs once)",
    )
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated: " + ",".join(PAGES))
    parser.add_argument("--keep", type=Path, help="fill the stores in this folder and keep them (default: a temp dir)")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="the same stores on PostgreSQL too, each page timed beside SQLite (a throwaway server "
        "started as the tests start theirs; Debian's postgresql); AppTest only",
    )
    parser.add_argument(
        "--postgres-url",
        metavar="URL",
        help="with --postgres: this running server (a superuser's URL) instead of a throwaway one; "
        "with --keep its databases runs_N and warm_up are kept and, when there, used as they are",
    )
    parser.add_argument("--block", help="the docs block written (default: dashboard, or dashboard-postgres)")
    browser = parser.add_mutually_exclusive_group()
    browser.add_argument(
        "--browser",
        dest="browser",
        action="store_true",
        default=None,
        help="also time /compare and /results in headless Chromium "
        "(default: on when /usr/bin/chromium and playwright are there)",
    )
    browser.add_argument("--no-browser", dest="browser", action="store_false")
    args = parser.parse_args(argv)
    args.run_counts = [int(n.replace("_", "")) for n in args.runs.split(",") if n.strip()]
    args.page_list = [p.strip() for p in args.pages.split(",") if p.strip()]
    args.postgres = args.postgres or bool(args.postgres_url)
    unknown = [p for p in args.page_list if p not in PAGES]
    if unknown or not args.page_list:
        parser.error(f"--pages: unknown {unknown}; choose from {', '.join(PAGES)}")
    if args.browser is None:
        args.browser = browser_available()
    elif args.browser and not browser_available():
        parser.error(f"--browser needs Chromium at {CHROMIUM} and playwright")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    load_start = os.getloadavg()
    started = time.time()
    rows: list[PageTimes] = []
    fills, pg_fills = [], []
    args.browser = args.browser and not args.postgres
    with contextlib.ExitStack() as stack:
        folder = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dashboard-scale-")))
        folder.mkdir(parents=True, exist_ok=True)
        warm_db = folder / "warm-up.sqlite"
        if not warm_db.exists():
            store_queries.fill(warm_db, 30, 3, seed=1)
        print(f"warm-up on {warm_db} ({', '.join(args.page_list)})", file=sys.stderr, flush=True)
        warm_up(warm_db, args.page_list)
        server = stack.enter_context(postgres_server(args.postgres_url)) if args.postgres else None
        keep_pg = bool(args.keep and args.postgres_url)
        if server is not None:
            warm_up(postgres_store(server, "warm_up", 30, 3, seed=1, keep=keep_pg)[0], args.page_list)
        try:
            for runs in args.run_counts:
                db = folder / f"runs-{runs}-s{args.samples}.sqlite"
                if db.exists() and args.keep:
                    fill_s = None
                else:
                    db.unlink(missing_ok=True)
                    fill_s, _ = store_queries.fill(db, runs, args.samples)
                    store_queries.checkpoint(db)
                fills.append((runs, fill_s, db.stat().st_size / 2**20))
                print(
                    f"{runs:,} runs: {db} ({fills[-1][2]:,.0f} MiB"
                    + (f", filled in {fill_s:.1f} s)" if fill_s is not None else ", kept)"),
                    file=sys.stderr,
                    flush=True,
                )
                store_rows = []
                for mode in MODES:
                    for page in args.page_list:
                        if page == "run" and mode == "read-only":
                            continue  # not registered in read-only mode
                        row = measure_page(db, runs, mode, page, args.tries, args.reruns, args.budget)
                        print(
                            f"  {mode:9} {page:8} first {min(row.first):.2f} s, rerun "
                            + (f"{min(row.rerun):.2f} s" if row.rerun else "n/a")
                            + (f", filter {min(row.filter):.2f} s" if row.filter else ""),
                            file=sys.stderr,
                            flush=True,
                        )
                        store_rows.append(row)
                if args.browser and server is None:
                    measure_browser(db, store_rows, args.tries, args.budget, folder)
                if server is not None:
                    url, fill_s = postgres_store(server, f"runs_{runs}", runs, args.samples, keep=keep_pg)
                    pg_fills.append((runs, fill_s))
                    print(
                        f"{runs:,} runs on PostgreSQL, "
                        + (f"filled in {fill_s:.1f} s" if fill_s is not None else "kept"),
                        file=sys.stderr,
                        flush=True,
                    )
                    for mode in MODES:
                        for page in args.page_list:
                            if page == "run" and mode == "read-only":
                                continue
                            row = measure_page(
                                url, runs, mode, page, args.tries, args.reruns, args.budget, database="PostgreSQL"
                            )
                            print(
                                f"  {mode:9} {page:8} PostgreSQL first {min(row.first):.2f} s, rerun "
                                + (f"{min(row.rerun):.2f} s" if row.rerun else "n/a"),
                                file=sys.stderr,
                                flush=True,
                            )
                            store_rows.insert(
                                next(
                                    i + 1
                                    for i, r in enumerate(store_rows)
                                    if r.mode == mode and r.page == page and r.database == "SQLite"
                                ),
                                row,
                            )
                rows.extend(store_rows)
            floor = measure_floor(args.tries, folder) if args.browser else {}
        except PageFailed as error:
            print(f"FAILED: {error}", file=sys.stderr)
            return 1
    load_end = os.getloadavg()
    cpu = platform.processor() or platform.machine()
    fill_text = "; ".join(
        f"{runs:,} runs {size:,.0f} MiB" + (f" filled in {s:.0f} s" if s is not None else "") for runs, s, size in fills
    )
    if args.postgres:
        fill_text += "; on PostgreSQL " + "; ".join(
            f"{runs:,} runs" + (f" filled in {s:.0f} s" if s is not None else "") for runs, s in pg_fills
        )
    lines = [
        "## Dashboard pages at scale" + (" (SQLite and PostgreSQL)" if args.postgres else ""),
        "",
        f"`bench/dashboard_scale.py --runs {args.runs} --samples {args.samples} --tries {args.tries}`: "
        f"stores from bench/store_queries.py's filler ({fill_text}). AppTest times one script run of a page in "
        "a process that already imported everything: *first load* is a fresh session's first run after "
        "`st.cache_data.clear()` and `st.cache_resource.clear()`; *rerun* is the same session's run with nothing "
        f"changed ({args.reruns} times); *filter change* sets the page's Model filter to one model and reruns "
        "(Compare `cmp_model`, Results `res_model`). *Browser* is `streamlit run` and headless Chromium: "
        "`page.goto` until the script is idle with no skeleton or spinner left (a fresh server after an "
        "untimed visit to /prices), then a reload. ✗ marks a miss of the targets: every page ≤ 0.3 s per "
        "rerun at 10k runs, ≤ 1.5 s at 100k, ≤ 0.5 s at 1M; first load ≤ 2 s at 100k and 1M (smaller stores "
        "held to the same; "
        "filter changes count as reruns, browser visits as first loads; rerun judged by its median). "
        "The smallest store is the baseline: what a page costs whatever the store holds (in the browser, "
        "mostly Streamlit's and Plotly's scripts and the charts' drawing in a software-rendered Chromium).",
        "",
        table(rows, args.browser),
        "",
        *(
            [
                (
                    "Floor, in the same browser under the same protocol (Streamlit alone, no dashbench code): "
                    + "; ".join(f"{name} {first:.2f} s / {reload:.2f} s" for name, (first, reload) in floor.items())
                    + " (first visit / reload, best of "
                    + str(args.tries)
                    + ")."
                ),
                "",
            ]
            if floor
            else []
        ),
        f"Machine: {os.cpu_count()} CPU cores ({cpu}), load average {load_start[0]:.1f} at the start and "
        f"{load_end[0]:.1f} at the end; {versions()}; measured {time.strftime('%Y-%m-%d', time.localtime(started))}"
        f" in {(time.time() - started) / 60:.0f} min.",
        *(
            [
                "",
                "PostgreSQL: "
                + (
                    "the running server given by --postgres-url"
                    if args.postgres_url
                    else "a local server started by the script as the tests start theirs (fsync off), over "
                    "TCP on 127.0.0.1"
                )
                + ", the same filler; each page's rows on SQLite and PostgreSQL "
                "measured one after the other in this one run (the machine was shared with other work: see the load average).",
            ]
            if args.postgres
            else []
        ),
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_docs:
        write_block(DOCS, args.block or ("dashboard-postgres" if args.postgres else "dashboard"), text)
        print(f"\nwritten to {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
