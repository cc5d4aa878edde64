"""`python -m dashbench doctor`: check this machine's figures (dashbench.engine.doctor) and store the
verdicts as calibration rows. Each installed backend is checked in a child process of its own
(`doctor --child BACKEND`), since Keras picks its backend once per process."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

from dashbench.cli import strict_json
from dashbench.cli.db_args import add_db_argument, one_field, read_only_requested
from dashbench.cli.terminal import shown_lines
from dashbench.core.spec import BACKENDS, SpecError, ascii_int

# One backend's whole check (imports, probes, six tiny runs per device) stays well inside this.
CHILD_TIMEOUT_S = 1800
_MARK = "DASHBENCH-DOCTOR-REPORT "
# A calibration that moves the CPU peak by more than this names the stored runs it re-prices.
REPRICE_SHARE = 0.15
REPRICE_SHOWN = 10  # the child's report line, apart from anything a framework prints


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check this machine: matmul peaks, the stopwatch, placement; stores the verdict",
        description="For each device kind and installed backend (each in its own process): a matmul probe "
        "per precision beside the datasheet peak, a stopwatch cross-check of the engine's step "
        "time, and where a tiny run's ops land. Stored as calibration rows; a CPU run on this "
        "host then uses the best CPU peak measured here for its MFU.",
    )
    add_db_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--backend",
        action="append",
        choices=BACKENDS,
        help="check only this backend (repeatable; default: every installed one)",
    )
    p.add_argument(
        "--device",
        action="append",
        choices=("cpu", "gpu", "tpu"),
        help="check only this device kind (repeatable; default: every kind the backend sees)",
    )
    p.add_argument("--steps", type=_positive, default=None, help="N: the stopwatch runs N and 3N steps")
    p.add_argument("--tries", type=_positive, default=None, help="stopwatch pairs of runs (the median counts)")
    p.add_argument("--no-store", action="store_true", help="do not store the verdicts")
    p.add_argument(
        "--busy-ok",
        action="store_true",
        help="calibrate the CPU even when other processes keep the machine busy (its peak then reads low)",
    )
    p.add_argument("--child", choices=BACKENDS, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=handle)


def _positive(text: str) -> int:
    try:
        value = ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 100000:
        raise argparse.ArgumentTypeError(f"{value} is out of range (1 to 100000)")
    return value


def installed_backends() -> list[str]:
    return [name for name in BACKENDS if importlib.util.find_spec(name) is not None]


def handle(args) -> int:
    if args.child:
        return _child(args)
    store = None
    if not args.no_store:
        from dashbench.store import Store, StoreError

        try:
            if read_only_requested(args):
                raise StoreError(
                    "cannot store the check: read-only mode (DASHBENCH_READ_ONLY=1) never writes "
                    "to the database; use --no-store"
                )
            store = Store(args.db)
            store.check_writable("store the check")
        except StoreError as exc:
            if store is not None:
                store.close()
            raise SpecError("db", one_field(str(exc))) from None
    try:
        backends = args.backend or installed_backends()
        if not backends:
            raise SpecError("backend", "neither TensorFlow nor JAX is installed here: nothing to check")
        reports = []
        for backend in dict.fromkeys(backends):
            print(f"checking {backend} …", file=sys.stderr, flush=True)
            reports.extend(_run_child(backend, args))
        summary = summarize(reports)
        if store is not None:
            before = cpu_peak_now(store)
            summary["stored"] = [store.add_calibration(calibration_row(summary["host"], r)) for r in reports]
            summary["repriced"] = repriced(store, summary["host"], before, cpu_peak_now(store))
    finally:
        if store is not None:
            store.close()
    if args.json:
        print(strict_json.dumps(summary))
    else:
        print(shown_lines(render(summary)))
    return 1 if summary["verdict"] == "error" else 0


def cpu_peak_now(store) -> float | None:
    """The CPU peak (TFLOP/s) a CPU run on this host would measure against now: the best calibration,
    else the first probe (the runner's rule)."""
    from dashbench.jobs import runner

    peaks, _ = runner.calibrated_cpu_peak(store)
    if not peaks:
        peaks, _ = runner.first_cpu_probe(store)
    return next(iter(peaks.values()), None)


def repriced(store, host: str, before: float | None, after: float | None) -> dict | None:
    """When this calibration moves the host's CPU peak by more than REPRICE_SHARE: the old and new
    peaks and the stored CPU runs of this host whose MFU was against another peak, by id."""
    if not before or not after or abs(after / before - 1.0) <= REPRICE_SHARE:
        return None
    runs = store.runs(host=host, device="cpu")
    ids = [
        str(run_id)
        for run_id, peak in zip(runs["run_id"], runs["peak_tflops"])
        if peak == peak and peak and abs(peak / after - 1.0) > REPRICE_SHARE  # peak == peak: not NaN
    ]
    return {"before_tflops": before, "after_tflops": after, "runs": ids}


def repriced_line(moved: dict) -> str:
    """The one line that names the runs a calibration re-prices."""
    change = moved["after_tflops"] / moved["before_tflops"] - 1.0
    ids = moved["runs"]
    shown = ", ".join(ids[:REPRICE_SHOWN]) + (
        f", and {len(ids) - REPRICE_SHOWN} more" if len(ids) > REPRICE_SHOWN else ""
    )
    return (
        f"the CPU peak moves from {moved['before_tflops']:.4g} to {moved['after_tflops']:.4g} TFLOP/s "
        f"({change:+.0%}): later CPU runs here divide by the new one; "
        + (
            f"{len(ids)} stored run(s) divided by another and keep their MFU: {shown}"
            if ids
            else "no stored run used another"
        )
    )


def _child(args) -> int:
    from dashbench.engine import doctor

    kwargs = {k: v for k, v in (("steps", args.steps), ("tries", args.tries)) if v is not None}
    report = doctor.check(args.child, kinds=args.device, busy_ok=args.busy_ok, **kwargs)
    print(_MARK + strict_json.dumps(report), flush=True)
    return 0


def _run_child(backend: str, args) -> list[dict]:
    """The device reports of one backend's child process; a child that fails is an error report."""
    from dashbench.engine.calibration import CPU_PEAKS_ENV

    argv = [sys.executable, "-m", "dashbench", "doctor", "--child", backend, "--no-store"]
    for kind in args.device or ():
        argv += ["--device", kind]
    if getattr(args, "busy_ok", False):
        argv.append("--busy-ok")
    for name in ("steps", "tries"):
        if getattr(args, name) is not None:
            argv += [f"--{name}", str(getattr(args, name))]
    env = {k: v for k, v in os.environ.items() if k != CPU_PEAKS_ENV}  # the check probes for itself
    # Its temporary files (TensorFlow's autograph sources) in a folder removed here: a child killed at
    # its timeout runs no atexit hook of its own (jobs/temp_folder.py says why runs need the same).
    with tempfile.TemporaryDirectory(prefix="dashbench-doctor-", ignore_cleanup_errors=True) as tmp:
        env["TMPDIR"] = tmp
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                timeout=CHILD_TIMEOUT_S,
                env=env,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [_failed(backend, f"the check process did not finish: {exc}")]
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_MARK):
            try:
                return json.loads(line[len(_MARK) :])["devices"]
            except (ValueError, KeyError, TypeError):
                break
    tail = " | ".join((proc.stderr.strip().splitlines() or ["no output"])[-3:])
    return [_failed(backend, f"the check process exited with code {proc.returncode}: {tail}")]


def _failed(backend: str, error: str) -> dict:
    from dashbench.engine import doctor

    report = {"backend": backend, "device": "cpu", "error": error, "versions": {}}
    report["verdict"], report["reasons"] = doctor.verdict(report)
    return report


def summarize(reports: list[dict]) -> dict:
    from dashbench.engine import doctor
    from dashbench.store import this_host

    rank = {"ok": 0, "warning": 1, "error": 2}
    worst = max((r["verdict"] for r in reports), key=rank.__getitem__, default="error")
    return {"host": this_host(), "verdict": worst, "tolerance": doctor.STOPWATCH_TOLERANCE, "checks": reports}


def calibration_row(host: str, report: dict) -> dict:
    probes = report.get("probes") or {}
    return {
        "host": host,
        "device": report["device"],
        "accelerator": report.get("accelerator"),
        "backend": report["backend"],
        "versions": report.get("versions") or {},
        "peaks": {dtype: p.get("measured_tflops") for dtype, p in probes.items()},
        "stopwatch_ratio": (report.get("stopwatch") or {}).get("ratio"),
        "verdict": report["verdict"],
        "reasons": report.get("reasons") or [],
        "detail": report,
    }


def render(summary: dict) -> str:
    """The verdict as a table: one block per device and backend."""
    lines = [f"{'device':<8}{'backend':<12}{'check':<11}{'measured':>16}{'datasheet':>13}  note"]
    for report in summary["checks"]:
        device, backend = report["device"], report["backend"]
        head = f"{device:<8}{backend:<12}"
        for dtype, probe in (report.get("probes") or {}).items():
            measured, datasheet = probe.get("measured_tflops"), probe.get("datasheet_tflops")
            if measured is None:
                note = probe.get("note") or "not supported here"
            elif datasheet:
                note = f"{measured / datasheet:.0%} of datasheet"
            else:
                note = "no datasheet: this probe is the CPU peak for MFU" if device == "cpu" else "no datasheet peak"
            lines.append(f"{head}{dtype:<11}{_tflops(measured):>16}{_tflops(datasheet):>13}  {note}")
            head = " " * 20
        stopwatch = report.get("stopwatch") or {}
        ratio = stopwatch.get("ratio")
        if stopwatch:
            steps = stopwatch.get("steps") or ["N", "3N"]
            lines.append(
                f"{head}{'stopwatch':<11}{(f'{ratio:.3f}×' if ratio is not None else '—'):>16}{'1.000×':>13}"
                f"  wall ({steps[1]}−{steps[0]} steps) / engine step time, "
                f"within {summary['tolerance']:.0%}"
            )
            head = " " * 20
        placement = report.get("placement") or {}
        if placement:
            where = ", ".join(placement.get("devices") or []) or "—"
            lines.append(
                f"{head}{'placement':<11}{('MISMATCH' if placement.get('mismatch') else 'ok'):>16}{'':>13}  {where}"
            )
            head = " " * 20
        lines.append(f"{head}{'verdict':<11}{report['verdict'].upper():>16}")
        for reason in report.get("reasons") or []:
            lines.append(f"{' ' * 20}  - {reason}")
    if summary.get("repriced"):
        lines.append(repriced_line(summary["repriced"]))
    lines.append(f"this machine ({summary['host']}): {summary['verdict'].upper()}")
    return "\n".join(lines)


def _tflops(value) -> str:
    return "—" if value is None else f"{value:.4g} TFLOP/s"
