"""The Run page's first visit on a cold server: seconds until its form is drawn, and until the devices it
offers are the machine's (the device discovery, a TensorFlow process, has ended).

Two ways a newcomer arrives, each on a fresh `streamlit run app.py` (an empty store of its own) in a new
headless Chromium context at 1400 px: straight to /run, and to the dashboard's default page (Compare) and
then, once it has settled, a click on Run in the sidebar (timed from the click). With `--base-root`, another
checkout (e.g. a `git worktree` of the commit before) is measured the same way, tries alternated with this
one's, so that both see the same load: the docs give the ratio. Writes the table into docs/PERFORMANCE.md
between the `<!-- first-visit -->` markers, with the load average: the machine is shared.

    .venv/bin/python bench/first_visit.py --base-root /tmp/base        # side by side with another checkout
    .venv/bin/python bench/first_visit.py --tries 1 --no-docs
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import dashboard_scale  # its server, browser and wait_idle
from docs_block import write_block  # bench/, on sys.path when a script here runs

ROOT = Path(__file__).resolve().parent.parent
WAYS = {"run": "straight to /run", "compare": "Compare first, then Run in the sidebar"}
LOOKING = "Looking for devices on this machine"
TIMEOUT_MS = 300_000


@dataclass
class Times:
    checkout: str
    way: str
    form_s: list[float] = field(default_factory=list)
    devices_s: list[float] = field(default_factory=list)


def visit(browser, url: str, way: str) -> tuple[float, float]:
    """(seconds to the form drawn, seconds to the devices known) of one newcomer's way to the Run page."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        if way == "compare":
            page.goto(url)
            dashboard_scale.wait_idle(page, "Compare")
            start = time.perf_counter()
            page.get_by_test_id("stSidebarNav").get_by_text("Run", exact=True).click()
        else:
            start = time.perf_counter()
            page.goto(url + "/run")
        expect(page.get_by_role("button", name="Launch run")).to_be_visible(timeout=TIMEOUT_MS)
        form = time.perf_counter() - start
        expect(page.get_by_text(LOOKING)).to_have_count(0, timeout=TIMEOUT_MS)
        return form, time.perf_counter() - start
    finally:
        context.close()


def measure(roots: dict[str, Path], tries: int, log_dir: Path) -> list[Times]:
    from playwright.sync_api import sync_playwright

    rows = {(name, way): Times(name, way) for name in roots for way in WAYS}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=dashboard_scale.CHROMIUM, args=dashboard_scale.CHROMIUM_ARGS)
        try:
            for attempt in range(tries):
                for way in WAYS:
                    for name, root in roots.items():  # alternated: both checkouts under the same load
                        db = log_dir / f"{name}-{way}-{attempt}.sqlite"
                        with dashboard_scale.streamlit_server(db, False, log_dir, app=root / "app.py") as url:
                            form, devices = visit(browser, url, way)
                        rows[name, way].form_s.append(form)
                        rows[name, way].devices_s.append(devices)
                        print(f"{name} {way} try {attempt + 1}: form {form:.1f} s, devices {devices:.1f} s", flush=True)
        finally:
            browser.close()
    return list(rows.values())


def table(rows: list[Times], load: tuple[float, float]) -> str:
    lines = [
        f"`bench/first_visit.py`: the Run page's first visit, each try on a fresh server; median of "
        f"{len(rows[0].form_s)} tries, tries alternated between checkouts. Load average before / after: "
        f"{load[0]:.2f} / {load[1]:.2f} (2 cores).",
        "",
        "| checkout | way in | form drawn, s | devices known, s | form drawn, against the first checkout |",
        "|---|---|---|---|---|",
    ]
    first = {r.way: statistics.median(r.form_s) for r in rows if r.checkout == rows[0].checkout}
    for row in rows:
        form = statistics.median(row.form_s)
        ratio = form / first[row.way] if first[row.way] else float("nan")
        lines.append(
            f"| {row.checkout} | {WAYS[row.way]} | {form:.1f} | {statistics.median(row.devices_s):.1f} | {ratio:.2f}× |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=3, help="fresh servers per checkout and way in")
    parser.add_argument("--base-root", type=Path, help="another checkout, measured first in each pair of tries")
    parser.add_argument("--base-name", default="before", help="what --base-root is, in words")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    args = parser.parse_args(argv)
    if not dashboard_scale.browser_available():
        print("first_visit: needs Chromium and playwright", file=sys.stderr)
        return 2
    roots = {args.base_name: args.base_root} if args.base_root else {}
    roots["this checkout"] = ROOT
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="first-visit-") as folder:
        rows = measure(roots, args.tries, Path(folder))
    text = table(rows, (load_before, os.getloadavg()[0]))
    print(text)
    if not args.no_docs:
        write_block(dashboard_scale.DOCS, "first-visit", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
