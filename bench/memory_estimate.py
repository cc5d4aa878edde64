"""Is a run's memory estimate (dashbench.workloads.memory) above what the run really takes, and by how much?

Each workload runs at its full shapes at two batch sizes, each point in a process of its own
(1 warm-up + 2 measured steps through the engine on the CPU), and the process's peak resident
memory (ru_maxrss, from wait4) is set beside `memory_estimate.estimate`. The estimate must not fall below
the peak (a refused run would not have fit; a run let through must not surprise the host's
guard), and the ratio says how much it errs high. The growth between the two batches, per
example, checks the per-example term alone. Writes a table between <!-- memory-BACKEND -->
markers in docs/MEMORY.md.

    python bench/memory_estimate.py                  # every workload, ~15 min on 2 CPU cores
    python bench/memory_estimate.py --models resnet50 --no-write
    python bench/memory_estimate.py --device gpu     # on a GPU box: the devices' measured peak
    python bench/memory_estimate.py --from-store DB  # every stored run's measured peak beside its estimate
    python bench/memory_estimate.py --xla            # JAX at quick shapes: XLA's estimate beside the counts

With --device gpu or tpu each point runs through the runner (not recorded) and its result's `memory`
record (dashbench/engine/peak_memory.py: the devices' peak bytes) is set beside the estimate of one
device's share, as memory.check counts it. --from-store reads that record from every done run of a
store that has one: the measured-peak column grows with every user's runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from docs_block import write_block  # bench/, on sys.path when a script here runs

from dashbench.core.spec import MODELS, RunSpec
from dashbench.workloads import memory_estimate, registry

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "MEMORY.md"
# Two batches per workload at full shapes, the larger a few times the smaller: CPU-sized.
BATCHES = {
    "conv2d": (16, 128),
    "fashion_mnist_cnn": (64, 512),
    "resnet50": (8, 32),
    "inception_v3": (8, 32),
    "bilstm": (8, 32),
}


def spec_for(model: str, batch: int, backend: str, device: str = "cpu") -> RunSpec:
    return RunSpec(model=model, batch_size=batch, steps=2, warmup=1, seed=0, device=device, backend=backend)


def child(model: str, batch: int, backend: str, device: str = "cpu") -> None:
    """The measured process: one run through the engine, nothing else (on an accelerator through the
    runner, not recorded, printing its result's memory record)."""
    spec = spec_for(model, batch, backend, device)
    if device != "cpu":
        from dashbench.jobs import runner

        print(json.dumps(runner.execute(spec, record=False).memory))
        return
    if backend == "jax":
        from dashbench.engine.jax import loop as engine
    else:
        from dashbench.engine import loop as engine
    engine.run(spec)


def peak_rss(model: str, batch: int, backend: str) -> tuple[float, float, int]:
    """(peak resident bytes, seconds, exit status) of one run in a process of its own."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    began = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", model, str(batch), backend],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024.0, time.monotonic() - began, proc.returncode


def device_peak(model: str, batch: int, backend: str, device: str) -> tuple[float, float, int, dict]:
    """(the devices' summed peak bytes, seconds, exit status, memory record) of one run in its own process."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, __file__, "--child", model, str(batch), backend, "--device", device],
        env=env,
        capture_output=True,
        text=True,
    )
    record = {}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            record = json.loads(line)
            break
    return float(record.get("peak_bytes") or 0.0), time.monotonic() - began, done.returncode, record


def xla_child(model: str, batch: int) -> None:
    """A JAX run at quick shapes in this process, as `run` does it: the step compiled first for the memory
    guard, then the engine; prints the estimate the guard checked and its source."""
    from dashbench.engine.jax import loop as jax_loop

    spec = quick_spec(model, batch)
    jax_loop.before_run(spec)
    need = memory_estimate.estimate(spec)
    print(json.dumps({"estimate": need.total, "source": need.source}), flush=True)
    jax_loop.run(spec)


def quick_spec(model: str, batch: int) -> RunSpec:

    return RunSpec(
        model=model,
        batch_size=batch,
        steps=2,
        warmup=1,
        seed=0,
        device="cpu",
        backend="jax",
        **registry.get(model).quick_shapes(),
    )


def xla_point(model: str, batch: int) -> tuple[float, float, str, float]:
    """(XLA's estimate, the counts' estimate, the source the guard used, peak RSS) of one point."""
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen(
        [sys.executable, __file__, "--xla-child", model, str(batch)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{model} at batch {batch} exited {os.waitstatus_to_exitcode(status)}: run it alone")
    said = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    return (
        said["estimate"],
        memory_estimate.estimate(quick_spec(model, batch)).total,
        said["source"],
        usage.ru_maxrss * 1024.0,
    )


XLA_BATCHES = {
    "conv2d": (16, 128),
    "fashion_mnist_cnn": (64, 512),
    "resnet50": (8, 32),
    "inception_v3": (4, 16),
    "bilstm": (32, 256),
    "llama": (8, 32),
}


def xla_table(models: list[str], write: bool) -> int:
    lines = [
        "| workload | batch | XLA estimate (GB) | counts estimate (GB) | peak RSS (GB) | XLA ÷ peak | counts ÷ peak |",
        "|---|---|---|---|---|---|---|",
    ]
    below, began = [], time.monotonic()
    for model in models:
        for batch in XLA_BATCHES[model]:
            xla, counts, source, peak = xla_point(model, batch)
            print(
                f"{model:<18} batch {batch:<4} xla {gb(xla)} GB ({source}), counts {gb(counts)} GB, peak {gb(peak)} GB",
                file=sys.stderr,
                flush=True,
            )
            if source != "xla" or xla < peak:
                below.append(f"{model} at {batch}" + ("" if source == "xla" else f" (source {source})"))
            lines.append(
                f"| {model} | {batch} | {gb(xla)} | {gb(counts)} | {gb(peak)} | {xla / peak:.2f} "
                f"| {counts / peak:.2f} |"
            )
    text = (
        "## XLA's memory analysis against the counts (jax, quick shapes, CPU)\n\n"
        "`bench/memory_estimate.py --xla`: each point one `run`-like process at the workload's quick shapes "
        "(`models`), 1 warm-up + 2 measured steps: the estimate the guard checked (XLA's memory analysis of the "
        "compiled step, plus the framework and the numpy batch), the counts' estimate of the same spec, and the "
        "process's peak RSS.\n"
        f"Machine: {os.cpu_count()} CPU cores ({platform.machine()}), Python {platform.python_version()}, "
        f"measured {dt.date.today().isoformat()}, {time.monotonic() - began:.0f} s in all, load average "
        f"{os.getloadavg()[0]:.1f} at the end.\n\n"
        + "\n".join(lines)
        + "\n\n"
        + (
            "XLA's estimate is above the peak everywhere."
            if not below
            else "XLA's estimate BELOW the peak or not used: " + ", ".join(below)
        )
    )
    print(text)
    if write:
        write_block(DOC, "memory-xla", text, title="# Memory")
    return 0 if not below else 1


def stored_rows(db: str) -> list[str]:
    """A table row per done run of `db` with a measured peak: its estimate, peak, window peak, capacity."""
    from dashbench.store import Store

    rows = []
    with Store(db, read_only=True) as store:
        frame = store.runs(status="done")
        for run_id in frame["run_id"]:
            run = store.get_run(run_id)
            result = run["result"]
            mem = result.memory if result is not None and isinstance(result.memory, dict) else None
            if not mem or not mem.get("peak_bytes"):
                continue
            spec = run["spec"]
            where = f"{result.accelerator or result.device} ×{result.accelerator_count or 1}"
            ratio = mem.get("estimate_ratio")
            window = mem.get("window_peak_bytes")
            capacity = mem.get("capacity_bytes")
            rows.append(
                f"| {spec['model']} | {result.backend_name()} | {where} | {spec['batch_size']} "
                f"| {gb(mem['estimate_bytes']) if mem.get('estimate_bytes') else ''} | {gb(mem['peak_bytes'])} "
                f"| {gb(window) if window else ''} | {gb(capacity) if capacity else ''} "
                f"| {f'{1 / ratio:.2f}' if ratio else ''} |"
            )
    return rows


def from_store(db: str, write: bool) -> int:
    rows = stored_rows(db)
    lines = [
        "| workload | backend | ran on | batch | estimate (GB) | measured peak (GB) | window peak (GB) "
        "| device memory (GB) | estimate ÷ peak |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    text = (
        "## The memory estimate against stored runs' measured peak\n\n"
        "`bench/memory_estimate.py --from-store`: every done run with a `memory` record: the "
        "process's peak resident memory on a CPU, the devices' peak bytes summed on a GPU or TPU.\n\n"
        + "\n".join(lines)
        + f"\n\n{len(rows)} runs."
    )
    print(text)
    if write:
        write_block(DOC, "memory-stored", text, title="# Memory")
    return 0


def gb(value: float) -> str:
    return f"{value / 1e9:.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--backend", default="tensorflow", choices=("tensorflow", "jax"))
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "gpu", "tpu"),
        help="gpu/tpu: the devices' measured peak (the run's memory record) beside the estimate",
    )
    parser.add_argument("--from-store", metavar="DB", help="the measured peak of every stored run that has one")
    parser.add_argument("--xla", action="store_true", help="jax at quick shapes: XLA's estimate beside the counts")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "BATCH", "BACKEND"), help=argparse.SUPPRESS)
    parser.add_argument("--xla-child", nargs=2, metavar=("MODEL", "BATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.xla_child:
        xla_child(args.xla_child[0], int(args.xla_child[1]))
        return 0
    if args.xla:
        chosen = [m for m in args.models.split(",") if m]
        return xla_table([m for m in chosen if m in XLA_BATCHES], not args.no_write)
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2], args.device)
        return 0
    if args.from_store:
        return from_store(args.from_store, not args.no_write)
    lines = [
        "| workload | batch | estimate (GB) | peak RSS (GB) | estimate ÷ peak "
        "| per example: estimate / measured (MB) |",
        "|---|---|---|---|---|---|",
    ]
    below, began = [], time.monotonic()
    for model in [m for m in args.models.split(",") if m]:
        points = []
        for batch in BATCHES[model]:
            spec = spec_for(model, batch, args.backend, args.device)
            if args.device == "cpu":
                need = memory_estimate.estimate(spec)
                peak, seconds, code = peak_rss(model, batch, args.backend)
            else:  # the record's estimate counts every device together, as its summed peak does
                peak, seconds, code, record = device_peak(model, batch, args.backend, args.device)
                need = memory_estimate.estimate(spec)
                devices = max(1, len(record.get("devices") or []))
                if devices > 1:
                    share = memory_estimate.estimate(spec.replace(batch_size=-(-batch // devices)))
                    need = memory_estimate.Estimate(share.params, share.per_example, share.fixed * devices, batch)
            points.append((batch, need, peak))
            print(
                f"{model:<18} batch {batch:<4} estimate {gb(need.total)} GB, peak {gb(peak)} GB "
                f"({seconds:.0f} s, exit {code})",
                file=sys.stderr,
                flush=True,
            )
            if code != 0:
                raise SystemExit(f"{model} at batch {batch} exited {code}: run it alone to see why")
            if need.total < peak:
                below.append(f"{model} at {batch}")
        (b1, need1, peak1), (b2, _need2, peak2) = points
        grown = (peak2 - peak1) / (b2 - b1)
        for batch, need, peak in points:
            slope = f"{need1.per_example / 1e6:.1f} / {grown / 1e6:.1f}" if batch == b2 else ""
            lines.append(f"| {model} | {batch} | {gb(need.total)} | {gb(peak)} | {need.total / peak:.2f} | {slope} |")
    load = os.getloadavg()[0]
    text = (
        f"## The memory estimate against a run's peak ({args.backend}, full shapes, {args.device.upper()})\n\n"
        "`bench/memory_estimate.py`: each point one process, 1 warm-up + 2 measured steps; peak RSS is the "
        "process's ru_maxrss (the framework, the model, the batch and every step). Per example: the estimate's "
        "per-example term beside the growth of the peak between the two batches, divided by their difference.\n"
        f"Machine: {os.cpu_count()} CPU cores ({platform.machine()}), Python {platform.python_version()}, "
        f"measured {dt.date.today().isoformat()}, {time.monotonic() - began:.0f} s in all, load average {load:.1f} "
        "at the end.\n\n"
        + "\n".join(lines)
        + "\n\n"
        + (
            "The estimate is above the peak everywhere."
            if not below
            else "Estimate BELOW the peak: " + ", ".join(below)
        )
    )
    print(text)
    if not args.no_write:
        marker = f"memory-{args.backend}" + ("" if args.device == "cpu" else f"-{args.device}")
        write_block(DOC, marker, text, title="# Memory")
    return 0 if not below else 1


if __name__ == "__main__":
    raise SystemExit(main())
