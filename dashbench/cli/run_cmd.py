"""`python -m dashbench run`: one measured run, recorded in the store unless --no-store.

Progress goes to stderr; with --json, stdout carries exactly one JSON object (the result), so
anything else that writes to stdout while the run goes (a library's print) is sent to stderr.
Exit codes: 0 done, 2 bad input (field named), 1 a run that failed, 128+N cancelled by signal N.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys

from dashbench.cli.spec_args import add_spec_arguments, spec_from_args
from dashbench.spec import SpecError


def register(subparsers) -> None:
    parser = subparsers.add_parser("run", help="measure training throughput of one workload")
    add_spec_arguments(parser)
    parser.add_argument("--db", default=None, help="results database (default: $DASHBENCH_DB or ~/.local/share/dashbench)")
    parser.add_argument("--run-id", default=None, help="start this queued run (or record under this id)")
    parser.add_argument("--no-store", action="store_true", help="measure only; record nothing")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    parser.set_defaults(func=handle)


def handle(args) -> int:
    spec = spec_from_args(args)
    progress = Progress(spec.steps, spec.warmup, spec.steps_per_loop)
    try:
        with _stdout_to_stderr(args.json):
            if args.no_store:
                from dashbench import engine

                result = engine.run(spec, on_event=progress)
            else:
                from dashbench import runner

                result = runner.execute(spec, db_path=args.db, run_id=args.run_id, on_event=progress)
    except SpecError:
        raise  # one line, exit 2 (cli.main)
    except KeyboardInterrupt:
        print("error: run cancelled: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        code = getattr(exc, "exit_code", None)
        if code is not None:  # runner.RunCancelled: a signal, already recorded as cancelled
            print(f"error: run cancelled: {exc}", file=sys.stderr)
            return int(code)
        if not args.no_store:
            from dashbench.store import StoreError

            if isinstance(exc, StoreError):
                print(f"error: db: {_one_line(exc)}", file=sys.stderr)
                return 2
        from dashbench.runner import error_message

        print(f"error: run failed: {type(exc).__name__}: {_one_line(error_message(exc))}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(json_safe(result), allow_nan=False))
    else:
        print(summary(result))
    return 0


class Progress:
    """Engine events → short progress lines on stderr."""

    def __init__(self, steps: int, warmup: int, steps_per_loop: int):
        self.steps, self.warmup, self.k = steps, warmup, steps_per_loop
        self.measured_steps = 0

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "phase":
            line = {"setup": "setting up (TensorFlow, devices, model)", "compile": "compiling (first step)",
                    "warmup": "warming up", "measure": "measuring"}.get(event["phase"], event["phase"])
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
        print(line, file=sys.stderr, flush=True)


def summary(result: dict) -> str:
    unit = result.get("unit", "examples")
    lo, hi = result.get("examples_per_sec_ci95") or (None, None)
    ci = f" (95% CI {lo:,.1f}–{hi:,.1f})" if lo is not None and hi is not None else ""
    mfu = f", MFU {result['mfu'] * 100:.1f}% of {result['peak_tflops']:.3g} TFLOP/s ({result['peak_source']})" if result.get("mfu") is not None else ""
    lines = [
        f"{result['model']} on {result['accelerator']} ×{result['accelerator_count']} "
        f"({result['replicas']} replica(s), batch {result['global_batch_size']}, {result['precision']}"
        f"{', XLA' if result['xla'] else ''}): {result['examples_per_sec']:,.1f} {unit}/s{ci}",
        f"step time median {result['step_time_median_s'] * 1e3:.2f} ms (p10 {result['step_time_p10_s'] * 1e3:.2f}, "
        f"p90 {result['step_time_p90_s'] * 1e3:.2f}, {result['samples']} samples); compile {result['compile_s']:.2f} s",
        f"achieved {result['achieved_tflops'] or 0:.4g} TFLOP/s{mfu}",
        f"flags: {', '.join(result['flags']) or 'none'}" + (f"; run id {result['run_id']}" if result.get("run_id") else ""),
    ]
    return "\n".join(lines)


def json_safe(value):
    """Strict JSON: non-finite floats become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


@contextlib.contextmanager
def _stdout_to_stderr(active: bool):
    """While the run goes, file descriptor 1 and sys.stdout point at stderr; stdout stays for the JSON."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _one_line(exc) -> str:
    text = " ".join(str(exc).split())
    return text[:500] if text else "(no message)"
