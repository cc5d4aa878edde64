"""`python -m dashbench run`: one measured run, recorded in the store unless --no-store.

Progress goes to stderr; with --json, stdout carries exactly one JSON object (the result, or on an
error one with status "invalid" (+ field), "failed", "oom" or "cancelled", error, model, device and the
run_id when stored), so anything else that writes to stdout while the run goes (a library's print)
is sent to stderr.
Exit codes: 0 done, 2 bad input (field named), an unusable db or (--no-wait) a device another run
holds, 1 a run that failed, 3 a run out of memory (status oom), 4 a to-accuracy run that trained to its
end but missed its target (status not_reached; its result is printed and stored), 128+N
cancelled by signal N. `preset` runs through the same `execute`, so both report errors alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from typing import TYPE_CHECKING

from dashbench.cli import strict_json
from dashbench.cli.cluster_args import add_cluster_arguments
from dashbench.cli.db_args import db_path_arg
from dashbench.cli.spec_args import add_spec_arguments, given_fields, spec_from_args
from dashbench.cli.terminal import fit, shown, shown_lines, terminal_width
from dashbench.core.errors import one_line
from dashbench.core.spec import RunSpec, SpecError, check_id
from dashbench.results.accuracy_text import EXIT_NOT_REACHED
from dashbench.results.result import RunResult, phase_text

if TYPE_CHECKING:
    from dashbench.jobs import run_life


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="measure training throughput of one workload",
        description=(
            "Measure one workload: --model and --batch-size (and any other spec option) say what. "
            "--run-id ID of a run stored in --db (a queued run, as the job queue starts it) runs the spec "
            "stored in that row: spec options are then refused, so the stored spec is the only one. "
            "--run-id ID that is not stored records a new run from the options under that id. "
            "To accuracy: --target-accuracy 0.9 --max-epochs 20 (or --epochs N) with --data real or folder trains "
            "on the train split, evaluates the whole held-out split after every epoch (or --eval-every K steps) and "
            "reports the time to the target (compile and data loading apart); --seeds N trains it N times. "
            "Exit codes: 0 done, 1 failed, 2 bad input, 3 out of memory, "
            f"{EXIT_NOT_REACHED} target not reached (status not_reached), 128+N stopped by signal N."
        ),
    )
    add_spec_arguments(parser, required=False)  # not needed with the --run-id of a stored run
    parser.add_argument(
        "--db",
        type=db_path_arg,
        default=None,
        help="results database (default: $DASHBENCH_DB or ~/.local/share/dashbench)",
    )
    parser.add_argument(
        "--run-id", default=None, help="run this stored (queued) run as stored, or record a new run under this id"
    )
    parser.add_argument("--no-store", action="store_true", help="measure only; record nothing")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    parser.add_argument(
        "--check-spec",
        metavar="JSON",
        default=None,
        help="check this spec (a RunSpec's JSON) as its run would, its model file imported and built, and exit: "
        "0 with its model's counts as JSON, or 2 with the one line; nothing runs, nothing is stored "
        "(the queue asks this before it stores a model file's run)",
    )
    add_device_wait_arguments(parser)
    add_cluster_arguments(parser)
    parser.set_defaults(func=handle)


def add_device_wait_arguments(parser) -> None:
    """What to do when another run on this host holds the device (see jobs/device_lock.py)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--no-wait",
        dest="device_wait",
        action="store_const",
        const="no_wait",
        default="wait",
        help="refuse at once (exit 2, naming the holder) if another run holds the device; "
        "by default the run waits for it",
    )
    group.add_argument(
        "--share-device",
        dest="device_wait",
        action="store_const",
        const="share",
        help="measure even if another run holds the device; the result is flagged device_shared",
    )


def handle(args) -> int:
    if args.check_spec is not None:
        return check_spec(args.check_spec)
    try:
        check_id("run_id", args.run_id, null=True)  # the rule import applies: what run stores, import takes
        if args.cluster is not None:
            return _on_cluster(args)
    except SpecError as exc:
        return report_invalid(exc, args.json)
    from dashbench.jobs import run_life

    # A stored (queued) run's memory is checked again in the process that runs it (its own RLIMIT_AS,
    # the memory free now): past it, the row ends `oom` (a refusal when it is not stored).
    ask = run_life.Ask(
        options=lambda: spec_from_args(args),
        given=tuple(given_fields(args)),
        run_id=args.run_id,
        db=args.db,
        record=not args.no_store,
        device_wait=args.device_wait,
        follow=lambda spec: Progress(
            spec.steps * spec.repeats, spec.warmup, spec.steps_per_loop, spec.backend, to_accuracy=spec.to_accuracy
        ),
    )
    code, result = execute(ask, args.json)
    if code:
        return code
    if args.json:
        print_json(result.to_dict())
    else:
        print(fit(shown_lines(result.describe()), terminal_width()))
        print_accuracy(result)
    return end_code(result)


def end_code(result: RunResult) -> int:
    """0, or EXIT_NOT_REACHED for a to-accuracy run whose target most seeds missed."""
    from dashbench.core.accuracy import NOT_REACHED, final_status

    return EXIT_NOT_REACHED if final_status(result.accuracy) == NOT_REACHED else 0


def print_accuracy(result: RunResult, usd_per_hour: float | None = None) -> None:
    """A to-accuracy run's headline (reached or not, time to target over the seeds, epochs, compile and
    loading apart, the evaluation's share); nothing for a throughput run."""
    from dashbench.results import accuracy_text

    lines = accuracy_text.headline(result.accuracy, usd_per_hour)
    if lines:
        print(fit(shown_lines("to accuracy: " + "\n  ".join(lines)), terminal_width()))


def _on_cluster(args) -> int:
    """`run --cluster`: the run goes to a node of a Ray cluster (dashbench/fleet), this process waits."""
    from dashbench.cli import cluster_run

    for option, given in (
        ("run_id", args.run_id is not None),
        ("no_store", args.no_store),
        ("share_device", args.device_wait == "share"),
        ("no_wait", args.device_wait == "no_wait"),
    ):
        if given:
            raise SpecError(
                option, f"--{option.replace('_', '-')} is for a run on this machine; leave it out with --cluster"
            )
    return cluster_run.run(spec_from_args(args), args, args.json, report_invalid, print_json)


def execute(ask: run_life.Ask, json_out: bool) -> tuple[int, RunResult | None]:
    """The run's life (jobs/run_life.py), its end reported the one way every command does (run,
    preset): one `error:` line on stderr and, with --json, one JSON object on stdout. Returns (exit
    code, result): 0 and the result, or 2 bad input / db, 1 failed, 3 out of memory, 128+N cancelled;
    a result not stored (--no-store) has no run_id, so its JSON has none, as the error objects."""
    from dashbench.jobs import run_life

    # Everything of the user's runs while the real stdout is put aside for the one JSON object.
    with _stdout_to_stderr(True) as stdout_fd:
        end = run_life.live(dataclasses.replace(ask, warn=_warn, last_word=_last_word(json_out, stdout_fd)))
    if end.status == "done":
        return 0, end.result
    if end.status == "invalid":
        print(f"error: {shown(end.error)}", file=sys.stderr)
        if json_out:
            print_json(_error_object(end.spec, "invalid", end.error, end.run_id, field=end.field))
        return end.code, None
    return _report_end(end.spec, json_out, end.status, end.error, end.code, end.run_id), None


def _warn(warning: str) -> None:
    print(f"warning: {shown(warning)}", file=sys.stderr, flush=True)


def check_spec(text: str) -> int:
    """`run --check-spec JSON`: a model file's checks in a process of their own, for a caller that must
    not import it (the queue); prints {"status": "ok", "facts": its counts for the memory estimate}."""
    import json

    from dashbench.jobs import model_check

    spec = None
    try:
        try:
            spec = RunSpec.from_dict(json.loads(text))
        except (ValueError, TypeError) as exc:
            raise SpecError("check_spec", f"not a spec's JSON: {one_line(exc)}") from None
        with _stdout_to_stderr(True):
            facts = model_check.answer(spec)
    except SpecError as exc:
        return report_invalid(exc, True, spec)
    print_json({"status": "ok", "facts": facts})
    return 0


def report_invalid(exc: SpecError, json_out: bool, spec=None, run_id: str | None = None) -> int:
    """Bad input: `error: <field>: <message>` on stderr; with --json also {"status": "invalid", ...}."""
    print(f"error: {shown(exc)}", file=sys.stderr)
    if json_out:
        print_json(_error_object(spec, "invalid", str(exc), run_id, field=exc.field))
    return 2


def _report_end(spec, json_out: bool, status: str, error: str, code: int, run_id: str | None) -> int:
    from dashbench.jobs import run_guard

    print(f"error: run {run_guard.END_WORDS.get(status, status)}: {shown(error)}", file=sys.stderr)
    if json_out:
        print_json(_error_object(spec, status, error, run_id))
    return code


def _error_object(spec, status: str, error: str, run_id: str | None, **extra) -> dict:
    out = {}
    if run_id is not None:
        out["run_id"] = run_id
    if spec is not None:
        out.update(model=spec.model, device=spec.device)
    out.update(status=status, **extra, error=error)
    if spec is not None:
        out["spec"] = spec.to_dict()
    return out


def print_json(obj: dict) -> None:
    print(strict_json.dumps(obj), flush=True)


class Progress:
    """Engine events → short progress lines on stderr."""

    def __init__(
        self, steps: int, warmup: int, steps_per_loop: int, backend: str = "tensorflow", to_accuracy: bool = False
    ):
        self.steps, self.warmup, self.k = steps, warmup, steps_per_loop
        self.backend = backend
        self.measured_steps = 0
        # A to-accuracy run says one line per evaluation, not one per step (thousands of them).
        self.to_accuracy = to_accuracy

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "evaluation":
            line = f"  {event.get('text') or _evaluation_text(event)}"
        elif kind == "sample" and self.to_accuracy and not event.get("warmup"):
            return
        elif kind == "phase":
            line = phase_text(event["phase"], self.backend)
        elif kind == "compiled":
            line = f"compiled in {event['compile_s']:.2f} s"
        elif kind == "sample":
            loss = "nan" if event["loss"] is None else f"{event['loss']:.4g}"
            per_step = event["duration_s"] / event["steps"]
            if event["warmup"]:
                line = f"  warm-up loop {event['index'] + 1}: {per_step * 1e3:.1f} ms/step, loss {loss}"
            else:
                self.measured_steps += event["steps"]
                line = f"  step {self.measured_steps}/{self.steps}: {per_step * 1e3:.1f} ms/step, loss {loss}"
        else:
            return
        # One write, the newline in it: print() writes the line and its newline apart, and a note the store's
        # retry thread writes (after flushing stderr) between the two was glued to the end of a step's line.
        sys.stderr.write(fit(line, terminal_width(sys.stderr)) + "\n")
        sys.stderr.flush()


def _evaluation_text(event: dict) -> str:
    from dashbench.core.accuracy import progress_text

    metric = event.get("metric") or "val_accuracy"
    return progress_text(
        event.get("epoch") or 0,
        event.get("limit"),
        event.get(metric),
        bool(event.get("fixed")),
        event.get("seed_index") or 0,
        event.get("seeds") or 1,
        metric,
        event.get("step"),
    )


def _last_word(json_out: bool, stdout_fd: int | None):
    """What says the run's end when the process ends itself from a thread (jobs/run_life.py): with
    --json its one JSON object, straight to the real stdout."""

    def say(end: run_life.End) -> None:
        if json_out and stdout_fd is not None:
            extra = {"field": end.field} if end.status == "invalid" else {}
            os.write(
                stdout_fd,
                (
                    strict_json.dumps(_error_object(end.spec, end.status, end.error, end.run_id, **extra)) + "\n"
                ).encode(),
            )

    return say


@contextlib.contextmanager
def _stdout_to_stderr(active: bool):
    """While the run goes, file descriptor 1 and sys.stdout point at stderr; stdout stays for the JSON.
    Yields a descriptor of the real stdout (None when not active)."""
    if not active:
        yield None
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield saved
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
