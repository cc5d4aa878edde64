"""What a new visitor costs the read-only dashboard's server: CPU seconds per visit and time to a settled page.

Fills stores with bench/store_queries.py's filler (10k and 100k runs by default), starts the read-only
dashboard on each (`streamlit run app.py -- --read-only`, as bench/dashboard_scale.py starts it) and opens
each page in headless Chromium through Playwright, every visitor a new tab (a new Streamlit session) of a
browser that has loaded Streamlit's scripts once (an untimed visit to another page, also the server's
imports), so the CPU counted is the session's, not the static files any Streamlit app serves (the floor
row measures those apart): the first visitor of the page (its caches cold), then `--visits` visitors one
after another, then `--together` visitors at once, each in a Chromium of its own. The server's CPU is
its own utime + stime from /proc/PID/stat read before and after (its idle CPU per second reported
beside, not taken off); time to a settled page is dashboard_scale's
wait_idle (title shown, script stopped, no skeleton or spinner). Writes the table into
docs/PERFORMANCE.md between the `<!-- server-cost -->` markers, with the load average: the machine is
shared, so the figures are judged as ratios against the floor measured in the same run (a Streamlit
page with a title only) and against a `--baseline` measured the same way.

    .venv/bin/python bench/server_cost.py                                   # 10k and 100k runs; writes the docs
    .venv/bin/python bench/server_cost.py --root /tmp/base --json /tmp/before.json --no-docs  # another checkout
    .venv/bin/python bench/server_cost.py --baseline /tmp/before.json       # side by side with it
    .venv/bin/python bench/server_cost.py --base-root /tmp/base             # both, page by page, under one load
    .venv/bin/python bench/server_cost.py --runs 200 --visits 1 --together 2 --no-docs --keep /tmp/stores
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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

ROOT = dashboard_scale.ROOT
DOCS = dashboard_scale.DOCS
PAGES = {"compare": "Compare", "results": "Results", "prices": "Prices"}
WARM_PAGE = {"compare": "prices", "results": "prices", "prices": "results"}  # the untimed first visit
GOAL_CPU_S = 0.04  # per new visit at 100k runs: ≥ 25 visits/s per core
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
QUIET_S = 0.5  # the server is done with a visit once its CPU has not moved for this long
VIEWPORT = {"width": 1400, "height": 1000}


@dataclass
class PageCost:
    runs: int
    page: str
    first_cpu_s: float = 0.0
    first_s: float = 0.0
    cpu_per_visit_s: float = 0.0  # sequential visitors
    visit_s: list[float] = field(default_factory=list)
    together_cpu_per_visit_s: float = 0.0
    together_s: list[float] = field(default_factory=list)
    load: float = 0.0  # 1-minute load average when the page's visits ended
    cold_cpu_per_visit_s: float | None = None  # the floor only: a browser with an empty cache
    idle_cpu_per_s: float = 0.0  # the server's CPU with nobody visiting, per second (a bound on its bias)


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
    fields = text[text.rindex(")") + 2:].split()  # after the command name, which may hold spaces
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


def idle_rate(pid: int, seconds: float = 3.0) -> float:
    """CPU seconds per second the server spends with nobody visiting: reported, not subtracted (a tick or
    two of 10 ms in a short window, times a minute of visits, would outweigh what it corrects)."""
    wait_quiet(pid)
    start, t = cpu_s(pid), time.monotonic()
    time.sleep(seconds)
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


def visits_together(url: str, title: str, count: int, warm: tuple, measure) -> list[float]:
    """`count` new visitors at once, each in a Chromium of its own thread (Playwright's sync API is bound
    to the thread that started it) warmed by an untimed visit to `warm` (url, title) first; `measure`
    wraps the moment all start together until the last page is settled. The times from that start."""
    ready, go, done = (threading.Barrier(count + 1) for _ in range(3))
    times: list = [None] * count
    errors: list = []

    def one(i: int) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=dashboard_scale.CHROMIUM,
                                            args=dashboard_scale.CHROMIUM_ARGS)
                try:
                    context = warm_context(browser, *warm)
                    ready.wait()
                    go.wait()
                    times[i] = visit(context, url, title)
                    done.wait()
                finally:
                    browser.close()
        except Exception as exc:  # noqa: BLE001 - reported below, with the others
            errors.append(exc)
            for barrier in (ready, go, done):
                barrier.abort()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    try:
        ready.wait()
        measure(lambda: (go.wait(), done.wait()))
    except threading.BrokenBarrierError:
        pass
    for thread in threads:
        thread.join()
    if errors:
        raise dashboard_scale.PageFailed(f"{count} visitors at once: {errors[0]}")
    return times


def measure_page(browser, db: Path, runs: int, page: str, root: Path, log_dir: Path, visits: int, together: int,
                 app: Path | None = None, title: str | None = None) -> PageCost:
    out = PageCost(runs, page)
    title = title or PAGES[page]
    with server(db, root, log_dir, app=app) as (url, pid):
        address = f"{url}/{page}" if page in PAGES else url
        warm = (f"{url}/{WARM_PAGE[page]}", PAGES[WARM_PAGE[page]]) if page in WARM_PAGE else (address, title)
        context = warm_context(browser, *warm)  # also the server's imports, before anything is timed
        idle = idle_rate(pid)

        out.idle_cpu_per_s = idle

        def cpu_of(fn):
            before = wait_quiet(pid)
            result = fn()
            return wait_quiet(pid) - before, result

        if page in WARM_PAGE:  # the floor's first visit was its warm-up
            out.first_cpu_s, out.first_s = cpu_of(lambda: visit(context, address, title))
        cpu, out.visit_s = cpu_of(lambda: [visit(context, address, title) for _ in range(visits)])
        out.cpu_per_visit_s = cpu / visits
        context.close()
        if together:
            spent = []
            out.together_s = visits_together(address, title, together, warm,
                                              lambda fn: spent.append(cpu_of(fn)[0]))
            out.together_cpu_per_visit_s = spent[0] / together
        if page not in PAGES:  # the floor: what a browser that never loaded Streamlit's scripts costs besides
            def cold_visit():
                fresh = browser.new_context(viewport=VIEWPORT)
                try:
                    return visit(fresh, address, title)
                finally:
                    fresh.close()

            out.cold_cpu_per_visit_s = statistics.mean(cpu_of(cold_visit)[0] for _ in range(visits))
    out.load = os.getloadavg()[0]
    return out


# ---------------------------------------------------------------------------------------------- report

def median(values) -> float | None:
    return statistics.median(values) if values else None


def fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def ratio(before: float | None, after: float | None) -> str:
    if not before or after is None:
        return "—"
    return f"{before / after:.1f}×" if after > 0 else "> 10×"


def table(rows: list[PageCost], baseline: dict[tuple[int, str], dict], args) -> str:
    side = bool(baseline)
    head = ["stored runs", "page"]
    head += ["CPU s per visit before / after (ratio)" if side else "CPU s per visit",
             "8 at once: CPU s per visit" if args.together == 8 else f"{args.together} at once: CPU s per visit",
             "first visitor: CPU s / settled s" + (" (before → after)" if side else ""),
             "settled s, median one at a time" + (" (before → after)" if side else ""),
             f"settled s at once, median / slowest" + (" (before → after)" if side else ""), "load avg"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * 2 + "---:|" * (len(head) - 2)]
    for row in rows:
        old = baseline.get((row.runs, row.page))
        miss = " ✗" if row.runs >= 100_000 and row.cpu_per_visit_s > GOAL_CPU_S else ""
        if old:
            cost = (f"{old['cpu_per_visit_s']:.3f} / {row.cpu_per_visit_s:.3f}{miss} "
                    f"({ratio(old['cpu_per_visit_s'], row.cpu_per_visit_s)})")
            at_once = (f"{old['together_cpu_per_visit_s']:.3f} / {row.together_cpu_per_visit_s:.3f} "
                       f"({ratio(old['together_cpu_per_visit_s'], row.together_cpu_per_visit_s)})")
            first = (f"{old['first_cpu_s']:.2f} / {old['first_s']:.1f} → {row.first_cpu_s:.2f} / {row.first_s:.1f}")
            seq = f"{fmt(median(old['visit_s']), 1)} → {fmt(median(row.visit_s), 1)}"
            together = (f"{fmt(median(old['together_s']), 1)} / {fmt(max(old['together_s'], default=None), 1)} → "
                        f"{fmt(median(row.together_s), 1)} / {fmt(max(row.together_s, default=None), 1)}")
            load = f"{old['load']:.1f} → {row.load:.1f}"
        else:
            cost = f"{row.cpu_per_visit_s:.3f}{miss}"
            at_once = f"{row.together_cpu_per_visit_s:.3f}"
            first = f"{row.first_cpu_s:.2f} / {row.first_s:.1f}"
            seq = fmt(median(row.visit_s), 1)
            together = f"{fmt(median(row.together_s), 1)} / {fmt(max(row.together_s, default=None), 1)}"
            load = f"{row.load:.1f}"
        runs = f"{row.runs:,}" if row.runs else "—"
        lines.append(f"| {runs} | {row.page} | {cost} | {at_once} | {first} | {seq} | {together} | {load} |")
    return "\n".join(lines)


def idle_text(rows: list[PageCost]) -> str:
    rates = [row.idle_cpu_per_s for row in rows]
    return f"{min(rates):.4f}–{max(rates):.4f}" if rates else "n/a"


def report(rows: list[PageCost], floor: PageCost | None, baseline: dict, args, load_start, load_end,
           started: float, fills: list) -> str:
    fill_text = "; ".join(f"{runs:,} runs {size:,.0f} MiB" for runs, size in fills)
    floor_text = ""
    if floor is not None:
        floor_text = (f"Floor, measured the same way in this run: a Streamlit page with a title only costs its server "
                      f"{floor.cpu_per_visit_s:.3f} CPU s per visit one at a time and "
                      f"{floor.together_cpu_per_visit_s:.3f} at {args.together} at once; settled in "
                      f"{fmt(median(floor.visit_s), 1)} s (median) one at a time, "
                      f"{fmt(median(floor.together_s), 1)} s at once. A browser with an empty cache costs the server "
                      f"{floor.cold_cpu_per_visit_s:.3f} CPU s per visit on it: Streamlit's static files, the same "
                      "for every page and every app, on top of the figures above.")
    return "\n".join([
        "## Server CPU per new visitor",
        "",
        f"`bench/server_cost.py --runs {args.runs} --visits {args.visits} --together {args.together}`: the read-only "
        f"dashboard (`streamlit run app.py -- --read-only`) on stores from bench/store_queries.py's filler ({fill_text}); "
        "headless Chromium through Playwright, every visitor a new tab (a new Streamlit session) of a browser that has "
        "loaded Streamlit's scripts once. Per page, a fresh server and an untimed visit to another page (its imports "
        f"and the browser's cache), then the page's first visitor (caches cold), {args.visits} visitors one after "
        f"another, and {args.together} at once, each in a Chromium of its own warmed the same way. *CPU s per visit* is "
        "the server process's utime + stime (`/proc/PID/stat`, all threads, 10 ms ticks) before the visits and after "
        f"them, once its CPU stood still for {QUIET_S} s (idle, it spent {idle_text(rows)} CPU s per second: left in); "
        "*settled* is the time from `page.goto` to the title shown, the script stopped and no "
        f"skeleton or spinner left. Goal: ≤ {GOAL_CPU_S} CPU s per new visit on every page at 100k runs (✗: missed)"
        + (", and no page slower for its first visitor. *Before* is " + args.baseline_name
           + (", measured the same way on the same stores right before each page's row (the same load)."
              if args.base_root else ", measured the same way on the same stores.") if baseline else "."),
        "",
        table(rows, baseline, args),
        "",
        *([floor_text, ""] if floor_text else []),
        f"The machine is shared ({os.cpu_count()} cores; other engineers' tests run beside it): load average "
        f"{load_start[0]:.1f} at the start and {load_end[0]:.1f} at the end, per row above when the page's visits "
        "ended. The browsers run on the same cores, so times to a settled page, above all with visitors at once, "
        f"are the browsers' as much as the server's; CPU seconds are the server's alone. {dashboard_scale.versions()}; "
        f"measured {time.strftime('%Y-%m-%d', time.localtime(started))} in {(time.time() - started) / 60:.0f} min.",
    ])


# ---------------------------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument("--samples", type=int, default=5, help="measured samples per stored run (fill speed)")
    parser.add_argument("--visits", type=int, default=4, help="new visitors one after another, per page")
    parser.add_argument("--together", type=int, default=8, help="new visitors at once, per page (0: none)")
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated: " + ",".join(PAGES))
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve (default: this one)")
    parser.add_argument("--keep", type=Path, help="fill the stores in this folder and keep them (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the figures here (a later --baseline)")
    parser.add_argument("--baseline", type=Path, help="figures from an earlier --json, shown side by side")
    parser.add_argument("--base-root", type=Path,
                        help="another checkout measured right before this one, page by page (the baseline under the "
                             "same load: what a shared machine calls for)")
    parser.add_argument("--baseline-name", default="", help="what the baseline was, in words (default: its file)")
    parser.add_argument("--no-floor", action="store_true", help="skip the title-only Streamlit page")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    args = parser.parse_args(argv)
    args.run_counts = [int(r) for r in args.runs.split(",") if r.strip()]
    args.page_list = [p.strip() for p in args.pages.split(",") if p.strip()]
    unknown = [p for p in args.page_list if p not in PAGES]
    if unknown:
        parser.error(f"--pages: {', '.join(unknown)} is not a page; use some of {', '.join(PAGES)}")
    if args.visits < 1:
        parser.error("--visits: at least 1")
    if args.together < 0:
        parser.error("--together: 0 or more")
    if not dashboard_scale.browser_available():
        parser.error(f"needs Chromium at {dashboard_scale.CHROMIUM} and playwright")
    if args.baseline and args.base_root:
        parser.error("--baseline and --base-root: give one")
    if (args.baseline or args.base_root) and not args.baseline_name:
        args.baseline_name = f"`{args.baseline or args.base_root}`"
    return args


def load_baseline(path: Path | None) -> dict[tuple[int, str], dict]:
    if path is None:
        return {}
    return {(row["runs"], row["page"]): row for row in json.loads(path.read_text())["rows"]}


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    args = parse_args(argv)
    baseline = load_baseline(args.baseline)
    load_start, started = os.getloadavg(), time.time()
    rows: list[PageCost] = []
    fills = []
    floor = None
    with contextlib.ExitStack() as stack:
        folder = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="server-cost-")))
        folder.mkdir(parents=True, exist_ok=True)
        p = stack.enter_context(sync_playwright())
        browser = p.chromium.launch(executable_path=dashboard_scale.CHROMIUM, args=dashboard_scale.CHROMIUM_ARGS)
        stack.callback(browser.close)
        try:
            for runs in args.run_counts:
                db = folder / f"runs-{runs}-s{args.samples}.sqlite"  # dashboard_scale's name: --keep shares them
                if not (db.exists() and args.keep):
                    db.unlink(missing_ok=True)
                    store_queries.fill(db, runs, args.samples)
                    store_queries.checkpoint(db)
                fills.append((runs, db.stat().st_size / 2**20))
                for page in args.page_list:
                    if args.base_root:
                        old = measure_page(browser, db, runs, page, args.base_root, folder, args.visits, args.together)
                        baseline[(runs, page)] = asdict(old)
                        print(f"{runs:>7,} {page:8} baseline: per visit {old.cpu_per_visit_s:.3f} CPU s, "
                              f"{args.together} at once {old.together_cpu_per_visit_s:.3f}", file=sys.stderr, flush=True)
                    row = measure_page(browser, db, runs, page, args.root, folder, args.visits, args.together)
                    print(f"{runs:>7,} {page:8} first {row.first_cpu_s:.3f} CPU s / {row.first_s:.1f} s; "
                          f"per visit {row.cpu_per_visit_s:.3f} CPU s, settled {fmt(median(row.visit_s), 1)} s; "
                          f"{args.together} at once {row.together_cpu_per_visit_s:.3f} CPU s per visit, settled "
                          f"{fmt(median(row.together_s), 1)} s (load {row.load:.1f})", file=sys.stderr, flush=True)
                    rows.append(row)
            if not args.no_floor:
                app = folder / "floor_title.py"
                app.write_text(dashboard_scale.FLOOR_APPS["a page with a title only"])
                floor = measure_page(browser, folder / "none.sqlite", 0, "floor", args.root, folder,
                                     args.visits, args.together, app=app, title="Floor")
        except dashboard_scale.PageFailed as error:
            print(f"FAILED: {error}", file=sys.stderr)
            return 1
    load_end = os.getloadavg()
    text = report(rows, floor, baseline, args, load_start, load_end, started, fills)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"root": str(args.root), "rows": [asdict(r) for r in rows],
                                         "baseline": list(baseline.values()),
                                         "floor": asdict(floor) if floor else None}, indent=1))
    if not args.no_docs:
        write_block(DOCS, "server-cost", text)
        print(f"\nwritten to {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
