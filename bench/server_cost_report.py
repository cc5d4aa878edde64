"""bench/server_cost.py's table and text for docs/PERFORMANCE.md: each page's CPU per new visit, the
title-only floor measured right before and after it, and what the page costs above that floor."""

from __future__ import annotations

import os
import statistics
import time

GOAL_CPU_S = 0.04  # per new visit at 100k runs: ≥ 25 visits/s per core


def median(values) -> float | None:
    return statistics.median(values) if values else None


def fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def above(value: float | None, floor: float | None) -> str:
    return "n/a" if value is None or floor is None else f"{value - floor:+.3f}"


def ratio(before: float | None, after: float | None) -> str:
    if not before or after is None:
        return "—"
    return f"{before / after:.1f}×" if after > 0 else "> 10×"


def table(rows: list, baseline: dict[tuple[int, str], dict], args, floor=None) -> str:
    """One line per store size and page; `floor` is the title-only page's row (its figure at once)."""
    side = bool(baseline)
    at_once = f"{args.together} at once"
    head = [
        "stored runs",
        "page",
        "CPU s per visit one at a time" + (" before / after (ratio)" if side else " (of it idle)"),
        "floor beside it, before / after",
        "above the floor" + (" (before → after)" if side else ""),
        f"{at_once}: CPU s per visit (above the floor)",
        "first visitor: CPU s / settled s" + (" (before → after)" if side else ""),
        "settled s, median one at a time" + (" (before → after)" if side else ""),
        f"settled s {at_once}, median / slowest" + (" (before → after)" if side else ""),
        "load avg",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    floor_together = floor.together_cpu_per_visit_s if floor is not None and args.together else None
    idle = floor.idle_cpu_per_s if floor is not None else None
    for row in rows:
        old = baseline.get((row.runs, row.page))
        miss = " ✗" if row.runs >= 100_000 and row.cpu_per_visit_s > GOAL_CPU_S else ""
        beside = f"{fmt(row.floor_before_s)} / {fmt(row.floor_after_s)}"
        together_cost = (
            f"{row.together_cpu_per_visit_s:.3f} ({above(row.together_cpu_per_visit_s, floor_together)})"
            if args.together
            else "—"
        )
        if old:
            cost = (
                f"{old['cpu_per_visit_s']:.3f} / {row.cpu_per_visit_s:.3f}{miss} "
                f"({ratio(old['cpu_per_visit_s'], row.cpu_per_visit_s)})"
            )
            extra = f"{above(old['cpu_per_visit_s'], row.floor_s)} → {above(row.cpu_per_visit_s, row.floor_s)}"
            if args.together:
                together_cost = (
                    f"{old['together_cpu_per_visit_s']:.3f} / {together_cost} "
                    f"({ratio(old['together_cpu_per_visit_s'], row.together_cpu_per_visit_s)})"
                )
            first = f"{old['first_cpu_s']:.2f} / {old['first_s']:.1f} → {row.first_cpu_s:.2f} / {row.first_s:.1f}"
            seq = f"{fmt(median(old['visit_s']), 1)} → {fmt(median(row.visit_s), 1)}"
            together = (
                f"{fmt(median(old['together_s']), 1)} / {fmt(max(old['together_s'], default=None), 1)} → "
                f"{fmt(median(row.together_s), 1)} / {fmt(max(row.together_s, default=None), 1)}"
            )
            load = f"{old['load']:.1f} → {row.load:.1f}"
        else:
            cost = f"{row.cpu_per_visit_s:.3f}{miss}" + (f" (idle {idle * row.window_s:.3f})" if idle else "")
            extra = above(row.cpu_per_visit_s, row.floor_s)
            first = f"{row.first_cpu_s:.2f} / {row.first_s:.1f}"
            seq = fmt(median(row.visit_s), 1)
            together = f"{fmt(median(row.together_s), 1)} / {fmt(max(row.together_s, default=None), 1)}"
            load = f"{row.load:.1f}"
        runs = f"{row.runs:,}" if row.runs else "—"
        lines.append(
            f"| {runs} | {row.page} | {cost} | {beside} | {extra} | {together_cost} | {first} | {seq} | "
            f"{together} | {load} |"
        )
    return "\n".join(lines)


def idle_text(rows: list) -> str:
    rates = [row.idle_cpu_per_s for row in rows]
    return f"{min(rates):.4f}–{max(rates):.4f}" if rates else "n/a"


def floor_text(floor, taken: list[float], args) -> str:
    if floor is None:
        return ""
    together = (
        f", {floor.together_cpu_per_visit_s:.3f} at {args.together} at once (settled in "
        f"{fmt(median(floor.together_s), 1)} s, median)"
        if args.together
        else ""
    )
    return (
        f"Floor: a Streamlit page with a title only, on one server of its own started before the first page, "
        f"{args.visits} visitors one after another right before and after each page's: "
        f"{floor.cpu_per_visit_s:.3f} CPU s per visit (mean of {len(taken)} takes, "
        f"{min(taken):.3f}–{max(taken):.3f}; settled in {fmt(median(floor.visit_s), 1)} s, median){together}. "
        f"A browser with an empty cache costs the server {fmt(floor.cold_cpu_per_visit_s)} CPU s per visit on it: "
        "Streamlit's static files, the same for every page and every app, on top of the figures above."
    )


def report(
    rows: list,
    floor,
    taken: list[float],
    baseline: dict,
    args,
    load_start,
    load_end,
    started: float,
    fills: list,
    quiet_s: float,
    versions: str,
) -> str:
    fill_text = "; ".join(f"{runs:,} runs {size:,.0f} MiB" for runs, size in fills)
    ftext = floor_text(floor, taken, args)
    return "\n".join(
        [
            "## Server CPU per new visitor",
            "",
            f"`bench/server_cost.py --runs {args.runs} --visits {args.visits} --together {args.together}`: the read-only "
            f"dashboard (`streamlit run app.py -- --read-only`, the project's .streamlit/config.toml) on stores from "
            f"bench/store_queries.py's filler ({fill_text}); headless Chromium through Playwright, every visitor a new "
            "tab (a new Streamlit session) of a browser that has Streamlit's scripts in its cache. Per page, a fresh "
            "server and an untimed visit to another page (the server's imports, the browser's cache), then the page's "
            f"first visitor (caches cold) and {args.visits} visitors one after another; then "
            + (
                "on the same server (`--same-server`)"
                if getattr(args, "same_server", False)
                else "another fresh server, warmed the same way and by one visit to the page, and"
            )
            + f" {args.together} visitors at once, each in a "
            "Chromium of its own warmed the same way. *CPU s per visit* is the server process's utime + stime "
            "(`/proc/PID/stat`, all threads, 10 ms ticks) from before the visits to after them, once its CPU stood "
            f"still for {quiet_s} s. Idle, a server spends CPU too (uvicorn's 10 Hz tick, Streamlit's config polling): "
            f"{idle_text(rows)} CPU s per second on the page servers ({args.idle_s:g} s each, ±1 tick), "
            f"{fmt(None if floor is None else floor.idle_cpu_per_s, 4)} on the floor's (longer): left in, and "
            "*(of it idle)* is the floor's rate times the seconds the page's visitors took, what a slow browser adds; "
            "*above the floor* "
            "is that less the mean of the title-only page's figure taken right before and right after the page's "
            "visitors (below); *settled* is the time from `page.goto` to the title shown, the script stopped and no "
            f"skeleton or spinner left. Goal: ≤ {GOAL_CPU_S} CPU s per new visit on every page at 100k runs, the whole "
            "visit (✗: missed)"
            + (
                ", and no page slower for its first visitor. *Before* is "
                + args.baseline_name
                + (
                    ", measured the same way on the same stores right before each page's row (the same load)."
                    if args.base_root
                    else ", measured the same way on the same stores."
                )
                if baseline
                else "."
            ),
            "",
            table(rows, baseline, args, floor),
            "",
            *([ftext, ""] if ftext else []),
            f"The machine is shared ({os.cpu_count()} cores; about 7 engineers' tests and builds run beside it): load "
            f"average {load_start[0]:.1f} at the start and {load_end[0]:.1f} at the end, per row above when the page's "
            "visitors one at a time were done. The browsers run on the same cores, so times to a settled page, above "
            "all with visitors at once, are the browsers' as much as the server's; CPU seconds are the server's alone. "
            f"{versions}; measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime(started))} UTC in "
            f"{(time.time() - started) / 60:.0f} min.",
        ]
    )
