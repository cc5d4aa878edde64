"""`sweep --find-max-batch`: the largest batch that fits, found the way a user would by hand, but
each try in its own run process (an out-of-memory error can leave a framework's allocator poisoned).

Doubling from --start-batch until a try ends `oom` (or --max-batch is reached), then binary search
between the last batch that fit and the first that did not, down to one example. Each try is a queued
run of few steps (4, 1 warm-up, unless --steps/--warmup say otherwise) under one sweep id, so the
sweep's points show throughput and peak memory against batch, with the OOM wall where `oom` starts.
A try is checked against the memory its own process may use (dashbench.hardware.host.host_budget): one past
it ends `oom` without starting. Besides the largest batch that fits, the batch with the best throughput
per dollar is named (on one device at one price per hour: the best throughput), and how far the
largest is from it.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable, Optional

from dashbench.cli import strict_json
from dashbench.core.spec import LIMITS, RunSpec, SpecError, ascii_int
from dashbench.jobs import oom, queue
from dashbench.jobs.max_batch import summarise, summary_lines
from dashbench.workloads import catalog

QUICK_STEPS, QUICK_WARMUP = 4, 1
DEFAULT_START, DEFAULT_MAX = 8, 65536


def _whole(name: str):
    """An option's whole number in ASCII digits (int() alone takes ８ for 8)."""
    import argparse

    def parse(text: str) -> int:
        try:
            return ascii_int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: must be a whole number, got {text[:40]!r}") from None

    return parse


def register_arguments(parser) -> None:
    parser.add_argument(
        "--find-max-batch",
        action="store_true",
        help="find the largest batch that fits: doubling from --start-batch, then binary search "
        "between the last fit and the first out-of-memory try, each try its own run "
        f"({QUICK_STEPS} steps unless --steps); needs no --batch-sizes",
    )
    parser.add_argument(
        "--start-batch",
        type=_whole("start_batch"),
        default=None,
        help=f"--find-max-batch: the first batch tried (default {DEFAULT_START})",
    )
    parser.add_argument(
        "--max-batch",
        type=_whole("max_batch"),
        default=None,
        help=f"--find-max-batch: never try a batch above this (default {DEFAULT_MAX})",
    )
    parser.add_argument(
        "--expect-sha256",
        default=None,
        metavar="HEX",
        help="refuse the sweep unless --model's file has this sha256 (the Run page's search "
        "passes the hash of the file it was asked for)",
    )


def check_expected(args, spec: RunSpec) -> None:
    """--expect-sha256: the model file is still the one the search was asked for, or one line saying
    it changed (before any row exists)."""
    expected = getattr(args, "expect_sha256", None)
    if expected is None:
        return
    if len(expected) != 64 or any(c not in "0123456789abcdefABCDEF" for c in expected):
        raise SpecError("expect_sha256", f"must be a sha256 of 64 hex digits, got {expected[:70]!r}")
    if not spec.model_path:
        raise SpecError("expect_sha256", f"checks a model file's hash, and --model {spec.model} names no file")
    if spec.model_sha256 != expected.lower():
        name = os.path.basename(spec.model_path)
        raise SpecError(
            "model",
            f"{name} changed since the search was asked for (sha256 {expected[:12].lower()}… "
            f"then, {spec.model_sha256[:12]}… now): refused; ask again to search the new file",
        )


def bounds(args) -> tuple[int, int]:
    """(start, bound), checked: one line naming the option otherwise."""
    start = DEFAULT_START if args.start_batch is None else args.start_batch
    top = DEFAULT_MAX if args.max_batch is None else args.max_batch
    high = LIMITS["batch_size"]
    for name, value in (("start_batch", start), ("max_batch", top)):
        if not 1 <= value <= high:
            raise SpecError(name, f"must be a whole number from 1 to {high}, got {value}")
    if top < start:
        raise SpecError("max_batch", f"--max-batch {top} is below --start-batch {start}")
    return start, top


def base_spec(args, spec_from_args, given: list[str]) -> RunSpec:
    quick = {}
    if "steps" not in given:
        quick["steps"] = QUICK_STEPS
    if "warmup" not in given:
        quick["warmup"] = QUICK_WARMUP
    return spec_from_args(args, batch_size=bounds(args)[0], **quick)


def search(fits: Callable[[int], Optional[bool]], start: int, top: int) -> tuple[Optional[int], Optional[int]]:
    """(largest batch that fits, smallest that did not) with `fits(batch)`: True fits, False out of
    memory, None stop (a try that failed otherwise). Doubling from `start` to `top`, then bisection."""
    fit, wall, batch = None, None, start
    while True:
        verdict = fits(batch)
        if verdict is None:
            return fit, wall
        if not verdict:
            wall = batch
            break
        fit = batch
        if batch >= top:
            return fit, None  # the user's bound: fits all the way
        batch = min(2 * batch, top)
    if fit is None:
        return None, wall  # not even the start fits (the wall is at or below it)
    while wall - fit > 1:
        middle = (fit + wall) // 2
        verdict = fits(middle)
        if verdict is None:
            break
        if verdict:
            fit = middle
        else:
            wall = middle
    return fit, wall


def find(args, spec: RunSpec, db, sweep_id: str, wait: Callable) -> int:
    """Run the search as a sweep; print its points (--json: with max_batch_size). Exit 0 found (or
    none fits), 1 a try failed otherwise or was cancelled."""
    start, top = bounds(args)
    catalog.check_spec(spec)
    points: dict[int, dict] = {}
    run_ids: list[str] = []
    stopped: list[dict] = []

    def fits(batch: int) -> Optional[bool]:
        # check_memory off: the try's own process checks, and a refusal is an `oom` try, recorded. The
        # spec was checked above, and the batch changes none of its checks.
        run_id = queue.submit(
            spec.replace(batch_size=batch),
            db,
            sweep_id=sweep_id,
            owner_pid=os.getpid(),
            check_memory=False,
            checked=True,
        )
        run_ids.append(run_id)
        (points[batch],) = wait([run_id], db, [batch])  # sweep's points: run_id, status, figures, peak memory
        status = points[batch]["status"]
        if status == "done":
            return True
        if status == oom.STATUS:
            return False
        stopped.append(points[batch])
        return None

    try:
        largest, wall = search(fits, start, top)
    except KeyboardInterrupt as exc:
        queue.cancel_all(run_ids, db, wait_s=10)
        print(f"sweep {sweep_id} cancelled", file=sys.stderr)
        return 128 + int(getattr(exc, "signum", signal.SIGINT))
    summary = summarise(points, largest, wall, top)
    summary = {"sweep_id": sweep_id, **summary}
    if args.json:
        print(strict_json.dumps(summary, indent=2))
    else:
        for line in summary_lines(summary):
            print(line)
    return 1 if stopped else 0
