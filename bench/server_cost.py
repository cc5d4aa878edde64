"""What a new visitor costs the read-only dashboard's server: CPU seconds per visit and time to a settled page.

Fills stores with bench/store_queries.py's filler (10k and 100k runs by default), starts the read-only
dashboard on each (`streamlit run app.py -- --read-only` from this checkout's folder, so with its
.streamlit/config.toml, as bench/dashboard_scale.py starts it) and opens each page in headless Chromium
through Playwright, every visitor a new tab (a new Streamlit session) of a browser that has Streamlit's
scripts in its cache (an untimed visit to another page, also the server's imports), so the CPU counted is
the session's, not the static files any Streamlit app serves (the floor row measures those apart). Per
page: a fresh server for its first visitor (its caches cold) and `--visits` visitors one after another,
then another fresh server for `--together` visitors at once, each in a Chromium of its own (their minute
of load never shares a measuring window with the visitors one at a time). The floor, a Streamlit page
with a title only on a server of its own, is visited `--visits` times right before and right after each
page's visitors one at a time, and each page's figure is given whole and above the mean of those two.
The server's CPU is its own utime + stime from /proc/PID/stat read before and after (its idle CPU per
second reported beside, not taken off); time to a settled page is dashboard_scale's wait_idle (title
shown, script stopped, no skeleton or spinner). Writes the table into docs/PERFORMANCE.md between the
`<!-- server-cost -->` markers, with the load average: the machine is shared.

    .venv/bin/python bench/server_cost.py                                   # 10k and 100k runs; writes the docs
    .venv/bin/python bench/server_cost.py --root /tmp/base --json /tmp/before.json --no-docs  # another checkout
    .venv/bin/python bench/server_cost.py --baseline /tmp/before.json       # side by side with it
    .venv/bin/python bench/server_cost.py --base-root /tmp/base             # both, page by page, under one load
    .venv/bin/python bench/server_cost.py --runs 200 --visits 1 --together 2 --no-docs --keep /tmp/stores
    .venv/bin/python bench/server_cost.py --runs 200 --together 2 --same-server --no-docs  # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import dashboard_scale  # its server, browser and wait_idle
import store_queries  # its fake_run/fill filler
from docs_block import write_block  # bench/, on sys.path when a script here runs
from server_cost_report import GOAL_CPU_S, fmt, median, report, table  # noqa: F401 - table: the tests

ROOT = dashboard_scale.ROOT
DOCS = dashboard_scale.DOCS
PAGES = {"compare": "Compare", "results": "Results", "prices": "Prices"}
WARM_PAGE = {"compare": "prices", "results": "prices", "prices": "results"}  # the untimed first visit
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
QUIET_S = 0.5  # the server is done with a visit once its CPU has not moved for this long (--quiet-s)
IDLE_S = 3.0  # how long each server's idle CPU is watched (--idle-s)
VIEWPORT = {"width": 1400, "height": 1000}


@dataclass
class PageCost:
    runs: int
    page: str
    first_cpu_s: float = 0.0
    first_s: float = 0.0
    cpu_per_visit_s: float = 0.0  # sequential visitors, on a server of their own
    visit_s: list[float] = field(default_factory=list)
    together_cpu_per_visit_s: float = 0.0  # visitors at once, on another server start
    together_s: list[float] = field(default_factory=list)
    load: float = 0.0  # 1-minute load average when the page's visits ended
    cold_cpu_per_visit_s: float | None = None  # the floor only: a browser with an empty cache
    idle_cpu_per_s: float = 0.0  # the server's CPU with nobody visiting, per second (a bound on its bias)
    window_s: float = 0.0  # wall seconds per visit of the one-at-a-time measuring window (idle CPU accrues)
    floor_before_s: float | None = None  # the title-only page's CPU per visit right before this page's visits
    floor_after_s: float | None = None  # ... and right after them

    @property
    def floor_s(self) -> float | None:
        taken = [f for f in (self.floor_before_s, self.floor_after_s) if f is not None]
        return sum(taken) / len(taken) if taken else None


# ---------------------------------------------------------------------------------------------- server


def server_pid(url: str) -> int:
    """The `streamlit run` process that serves `url` (dashboard_scale.streamlit_server starts it with
    `--server.port PORT` in its command line)."""
    port = url.rsplit(":", 1)[1]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"streamlit" in b" ".join(argv) and b"--server.port" in argv and port.encode() in argv:
            return int(entry.name)
    raise RuntimeError(f"no streamlit process serves {url}")


def cpu_s(pid: int) -> float:
    """utime + stime of the whole process (every thread), in seconds."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) * TICK_S


def wait_quiet(pid: int, timeout_s: float = 30.0) -> float:
    """The server's CPU once it has stopped moving for QUIET_S (a visit's last messages sent)."""
    deadline = time.monotonic() + timeout_s
    last = cpu_s(pid)
    while time.monotonic() < deadline:
        time.sleep(QUIET_S)
        now = cpu_s(pid)
        if now == last:
            return now
        last = now
    return last


def idle_rate(pid: int, seconds: float | None = None) -> float:
    """CPU seconds per second the server spends with nobody visiting: reported, not subtracted (a tick or
    two of 10 ms in a short window, times a minute of visits, would outweigh what it corrects)."""
    wait_quiet(pid)
    start, t = cpu_s(pid), time.monotonic()
    time.sleep(IDLE_S if seconds is None else seconds)
    return (cpu_s(pid) - start) / (time.monotonic() - t)


@contextlib.contextmanager
def server(db: Path, root: Path, log_dir: Path, app: Path | None = None):
    """The read-only dashboard of checkout `root` (its app.py and its dashbench package) on `db`."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(root) + (os.pathsep + saved if saved else "")
    try:
        with dashboard_scale.streamlit_server(db, True, log_dir, app=app or root / "app.py") as url:
            yield url, server_pid(url)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


# ---------------------------------------------------------------------------------------------- visits


def visit(context, url: str, title: str) -> float:
    """One new visitor: a new tab (a new Streamlit session) until its page is settled, then closed."""
    page = context.new_page()
    try:
        t = time.perf_counter()
        page.goto(url)
        dashboard_scale.wait_idle(page, title)
        return time.perf_counter() - t
    finally:
        page.close()


def warm_context(browser, url: str | None, title: str | None):
    """A browser context whose HTTP cache holds Streamlit's scripts (an untimed visit to `url`), so that
    what a later visit costs the server is its session, not the static files every Streamlit app serves."""
    context = browser.new_context(viewport=VIEWPORT)
    if url is not None:
        visit(context, url, title)
    return context


class Chromiums:
    """`count` headless Chromiums, each launched once in a thread of its own (Playwright's sync API is bound
    to the thread that started it) and lent to every call of visits_together: a Chromium's start loads the
    cores for seconds, and the page's and the floor's visitors at once would otherwise each start `count`.
    Launched at the first call, not before: their start never shares a measuring window of the visitors
    one at a time."""

    def __init__(self, count: int):
        self.count = count
        self.jobs: list = [queue.Queue() for _ in range(count)]
        self.threads = [threading.Thread(target=self._serve, args=(q,), daemon=True) for q in self.jobs]

    def _start(self) -> None:
        if self.threads[0].ident is None:  # not started yet
            for thread in self.threads:
                thread.start()

    @staticmethod
    def _serve(jobs: queue.Queue) -> None:
        from playwright.sync_api import sync_playwright

        stopped, failed = False, None
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=dashboard_scale.CHROMIUM, args=dashboard_scale.CHROMIUM_ARGS
                )
                try:
                    while (job := jobs.get()) is not None:
                        job(browser)
                    stopped = True
                finally:
                    browser.close()
        except Exception as exc:  # noqa: BLE001 - a launch that failed: every job waiting or to come is told
            failed = exc
        while not stopped and (job := jobs.get()) is not None:
            job(failed)

    def run(self, job) -> None:
        """`job(i, browser)` in every Chromium's thread, all at once; returns when all are done. A browser
        that failed to launch is passed as the exception it raised."""
        self._start()
        finished = threading.Barrier(self.count + 1)

        def one(i: int, browser) -> None:
            try:
                job(i, browser)
            finally:
                finished.wait()

        for i, jobs in enumerate(self.jobs):
            jobs.put(lambda browser, i=i: one(i, browser))
        finished.wait()

    def close(self) -> None:
        if self.threads[0].ident is None:  # never lent
            return
        for jobs in self.jobs:
            jobs.put(None)
        for thread in self.threads:
            thread.join()


def visits_together(
    url: str, title: str, count: int, warm: tuple, measure, chromiums: Chromiums | None = None
) -> list[float]:
    """`count` new visitors at once, each in a Chromium of its own (`chromiums`, else `count` started for this
    call) warmed by an untimed visit to `warm` (url, title) first; `measure` wraps the moment all start
    together until the last page is settled. The times from that start."""
    ready, go, done = (threading.Barrier(count + 1) for _ in range(3))
    times: list = [None] * count
    errors: list = []

    def one(i: int, browser) -> None:
        try:
            if isinstance(browser, Exception):
                raise browser
            context = warm_context(browser, *warm)
            try:
                ready.wait()
                go.wait()
                times[i] = visit(context, url, title)
                done.wait()
            finally:
                context.close()
        except Exception as exc:  # noqa: BLE001 - reported below, with the others
            errors.append(exc)
            for barrier in (ready, go, done):
                barrier.abort()

    own = chromiums is None
    chromiums = Chromiums(count) if own else chromiums
    assert chromiums.count == count, (chromiums.count, count)
    runner = threading.Thread(target=chromiums.run, args=(one,))
    runner.start()
    try:
        ready.wait()
        measure(lambda: (go.wait(), done.wait()))
    except threading.BrokenBarrierError:
        pass
    runner.join()
    if own:
        chromiums.close()
    if errors:
        raise dashboard_scale.PageFailed(f"{count} visitors at once: {errors[0]}")
    return times


def cpu_of(pid: int, fn):
    """The server's CPU seconds from quiet before `fn` to quiet after it, and what `fn` returned."""
    before = wait_quiet(pid)
    result = fn()
    return wait_quiet(pid) - before, result


def addresses(url: str, page: str) -> tuple[str, tuple[str, str]]:
    """The page's address and the (address, title) of the untimed first visit to another page."""
    return f"{url}/{page}", (f"{url}/{WARM_PAGE[page]}", PAGES[WARM_PAGE[page]])


def measure_one_at_a_time(
    browser, db: Path, runs: int, page: str, root: Path, log_dir: Path, visits: int, served: tuple | None = None
) -> PageCost:
    """A fresh server of its own (or `served`, a (url, pid) started for it by the caller): an untimed visit to
    another page (the server's imports, the browser's cache), the page's first visitor (its caches cold),
    then `visits` visitors one after another."""
    out = PageCost(runs, page)
    title = PAGES[page]
    with contextlib.nullcontext(served) if served else server(db, root, log_dir) as (url, pid):
        address, warm = addresses(url, page)
        context = warm_context(browser, *warm)
        out.idle_cpu_per_s = idle_rate(pid)
        out.first_cpu_s, out.first_s = cpu_of(pid, lambda: visit(context, address, title))
        t = time.monotonic()
        cpu, out.visit_s = cpu_of(pid, lambda: [visit(context, address, title) for _ in range(visits)])
        out.window_s = (time.monotonic() - t) / visits
        out.cpu_per_visit_s = cpu / visits
        context.close()
    out.load = os.getloadavg()[0]
    return out


def measure_together(
    browser,
    db: Path,
    row: PageCost,
    root: Path,
    log_dir: Path,
    together: int,
    chromiums: Chromiums | None = None,
    served: tuple | None = None,
) -> None:
    """Another fresh server, warmed as above and by one visit to the page itself (its caches as the
    visitors one at a time found them), then `together` visitors at once: the Chromiums these start
    load the cores for a minute, so they never share a server start, or a measuring window, with the
    visitors one at a time. With `served`, the server the visitors one at a time were measured on
    (--same-server), warm already."""
    title = PAGES[row.page]
    with contextlib.nullcontext(served) if served else server(db, root, log_dir) as (url, pid):
        address, warm = addresses(url, row.page)
        if not served:
            context = warm_context(browser, *warm)
            visit(context, address, title)
            context.close()
        spent = []
        row.together_s = visits_together(
            address, title, together, warm, lambda fn: spent.append(cpu_of(pid, fn)[0]), chromiums
        )
        row.together_cpu_per_visit_s = spent[0] / together


# A page with a title only, on the process-wide settings app.py gives the dashboard's server.
FLOOR_APP = (
    "import streamlit as st\nfrom dashbench.views.streamlit import serving\n\nserving.poll_config_files_slowly()\n"
    'st.title("Floor")\n'
)


class Floor:
    """A Streamlit page with a title only, served from this checkout's folder (its .streamlit/config.toml,
    as the dashboard's server) by a server started once and visited right before and after every page's
    visitors: what any Streamlit session costs under this config and the load of that moment."""

    TITLE = "Floor"

    def __init__(self, stack: contextlib.ExitStack, browser, root: Path, folder: Path, visits: int):
        app = folder / "floor_title.py"
        app.write_text(FLOOR_APP)
        self.url, self.pid = stack.enter_context(server(folder / "none.sqlite", root, folder, app=app))
        self.context = warm_context(browser, self.url, self.TITLE)
        self.visits = visits
        # Longer than a page server's: every page's idle share is this rate times its window.
        self.row = PageCost(0, "floor", idle_cpu_per_s=idle_rate(self.pid, 5 * IDLE_S))
        self.taken: list[float] = []

    def per_visit(self) -> float:
        cpu, times = cpu_of(self.pid, lambda: [visit(self.context, self.url, self.TITLE) for _ in range(self.visits)])
        self.taken.append(cpu / self.visits)
        self.row.visit_s += times
        return cpu / self.visits

    def finish(self, browser, together: int, cold_visits: int, chromiums: Chromiums | None = None) -> PageCost:
        """Its row: CPU per visit over every time it was taken, `together` at once, and a browser with an
        empty cache (Streamlit's static files, the same for every page and every app)."""
        row = self.row
        row.cpu_per_visit_s = statistics.mean(self.taken)
        self.context.close()
        if together:
            spent = []
            row.together_s = visits_together(
                self.url,
                self.TITLE,
                together,
                (self.url, self.TITLE),
                lambda fn: spent.append(cpu_of(self.pid, fn)[0]),
                chromiums,
            )
            row.together_cpu_per_visit_s = spent[0] / together

        def cold_visit():
            fresh = browser.new_context(viewport=VIEWPORT)
            try:
                return visit(fresh, self.url, self.TITLE)
            finally:
                fresh.close()

        row.cold_cpu_per_visit_s = statistics.mean(cpu_of(self.pid, cold_visit)[0] for _ in range(cold_visits))
        row.load = os.getloadavg()[0]
        return row


# ---------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument("--samples", type=int, default=5, help="measured samples per stored run (fill speed)")
    parser.add_argument(
        "--visits", type=int, default=10, help="new visitors one after another, per page and per floor take"
    )
    parser.add_argument("--together", type=int, default=8, help="new visitors at once, per page (0: none)")
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated: " + ",".join(PAGES))
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve (default: this one)")
    parser.add_argument("--keep", type=Path, help="fill the stores in this folder and keep them (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the figures here (a later --baseline)")
    parser.add_argument("--baseline", type=Path, help="figures from an earlier --json, shown side by side")
    parser.add_argument(
        "--base-root",
        type=Path,
        help="another checkout measured right before this one, page by page (the baseline under the "
        "same load: what a shared machine calls for)",
    )
    parser.add_argument("--baseline-name", default="", help="what the baseline was, in words (default: its file)")
    parser.add_argument("--idle-s", type=float, default=IDLE_S, help="seconds each server's idle CPU is watched")
    parser.add_argument(
        "--quiet-s",
        type=float,
        default=QUIET_S,
        help="seconds the server's CPU must stand still for a visit to count as done",
    )
    parser.add_argument("--no-floor", action="store_true", help="skip the title-only Streamlit page")
    parser.add_argument(
        "--same-server",
        action="store_true",
        help="a quick look: each page's visitors at once on the server its visitors one at a time were measured "
        "on, not on a fresh one (one server start and its imports fewer per page; the figures at once then "
        "share the machine's state with those one at a time)",
    )
    parser.add_argument("--no-docs", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    args = parser.parse_args(argv)
    args.run_counts = [int(r) for r in args.runs.split(",") if r.strip()]
    args.page_list = [p.strip() for p in args.pages.split(",") if p.strip()]
    unknown = [p for p in args.page_list if p not in PAGES]
    if unknown:
        parser.error(f"--pages: {', '.join(unknown)} is not a page; use some of {', '.join(PAGES)}")
    if args.visits < 1:
        parser.error("--visits: at least 1")
    if args.quiet_s <= 0:
        parser.error("--quiet-s: more than 0 seconds")
    if args.together < 0:
        parser.error("--together: 0 or more")
    if not dashboard_scale.browser_available():
        parser.error(f"needs Chromium at {dashboard_scale.CHROMIUM} and playwright")
    if args.baseline and args.base_root:
        parser.error("--baseline and --base-root: give one")
    if args.same_server and args.base_root:
        parser.error("--same-server and --base-root: the baseline's visitors at once are on a fresh server")
    if (args.baseline or args.base_root) and not args.baseline_name:
        args.baseline_name = f"`{args.baseline or args.base_root}`"
    return args


def load_baseline(path: Path | None) -> dict[tuple[int, str], dict]:
    if path is None:
        return {}
    return {(row["runs"], row["page"]): row for row in json.loads(path.read_text())["rows"]}


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    global IDLE_S, QUIET_S
    args = parse_args(argv)
    IDLE_S, QUIET_S = args.idle_s, args.quiet_s
    baseline = load_baseline(args.baseline)
    load_start, started = os.getloadavg(), time.time()
    rows: list[PageCost] = []
    fills = []
    floor_row, taken = None, []
    with contextlib.ExitStack() as stack:
        folder = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="server-cost-")))
        folder.mkdir(parents=True, exist_ok=True)
        p = stack.enter_context(sync_playwright())
        browser = p.chromium.launch(executable_path=dashboard_scale.CHROMIUM, args=dashboard_scale.CHROMIUM_ARGS)
        stack.callback(browser.close)
        chromiums = None
        if args.together:  # the visitors' at once, launched at their first use, for every page's and the floor's
            chromiums = Chromiums(args.together)
            stack.callback(chromiums.close)
        try:
            floor = None if args.no_floor else Floor(stack, browser, args.root, folder, args.visits)
            before = floor.per_visit() if floor else None
            for runs in args.run_counts:
                db = folder / f"runs-{runs}-s{args.samples}.sqlite"  # dashboard_scale's name: --keep shares them
                if not (db.exists() and args.keep):
                    db.unlink(missing_ok=True)
                    store_queries.fill(db, runs, args.samples)
                    store_queries.checkpoint(db)
                fills.append((runs, db.stat().st_size / 2**20))
                for page in args.page_list:
                    old = served = None
                    if args.base_root:
                        old = measure_one_at_a_time(browser, db, runs, page, args.base_root, folder, args.visits)
                    page_servers = stack.enter_context(contextlib.ExitStack())  # --same-server's: this page's
                    if args.same_server:
                        served = page_servers.enter_context(server(db, args.root, folder))
                    row = measure_one_at_a_time(browser, db, runs, page, args.root, folder, args.visits, served)
                    if floor:
                        after = floor.per_visit()
                        for measured in (old, row):
                            if measured is not None:
                                measured.floor_before_s, measured.floor_after_s = before, after
                        before = after
                    if args.together:
                        if old is not None:
                            measure_together(browser, db, old, args.base_root, folder, args.together, chromiums)
                        measure_together(browser, db, row, args.root, folder, args.together, chromiums, served)
                    page_servers.close()
                    if old is not None:
                        baseline[(runs, page)] = asdict(old)
                        print(
                            f"{runs:>7,} {page:8} baseline: per visit {old.cpu_per_visit_s:.3f} CPU s, "
                            f"{args.together} at once {old.together_cpu_per_visit_s:.3f}",
                            file=sys.stderr,
                            flush=True,
                        )
                    print(
                        f"{runs:>7,} {page:8} first {row.first_cpu_s:.3f} CPU s / {row.first_s:.1f} s; "
                        f"per visit {row.cpu_per_visit_s:.3f} CPU s (floor {fmt(row.floor_before_s)} / "
                        f"{fmt(row.floor_after_s)}), settled {fmt(median(row.visit_s), 1)} s; "
                        f"{args.together} at once {row.together_cpu_per_visit_s:.3f} CPU s per visit, settled "
                        f"{fmt(median(row.together_s), 1)} s (load {row.load:.1f})",
                        file=sys.stderr,
                        flush=True,
                    )
                    rows.append(row)
            if floor:
                floor_row, taken = floor.finish(browser, args.together, min(args.visits, 3), chromiums), floor.taken
        except dashboard_scale.PageFailed as error:
            print(f"FAILED: {error}", file=sys.stderr)
            return 1
    load_end = os.getloadavg()
    text = report(
        rows,
        floor_row,
        taken,
        baseline,
        args,
        load_start,
        load_end,
        started,
        fills,
        QUIET_S,
        dashboard_scale.versions(),
    )
    print(text)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "root": str(args.root),
                    "rows": [asdict(r) for r in rows],
                    "baseline": list(baseline.values()),
                    "floor_takes": taken,
                    "floor": asdict(floor_row) if floor_row else None,
                },
                indent=1,
            )
        )
    if not args.no_docs:
        write_block(DOCS, "server-cost", text)
        print(f"\nwritten to {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
