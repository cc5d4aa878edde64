"""Is a run's memory estimate (dashbench.memory) above what the run really takes, and by how much?

Each workload runs at its full shapes at two batch sizes, each point in a process of its own
(1 warm-up + 2 measured steps through the engine on the CPU), and the process's peak resident
memory (ru_maxrss, from wait4) is set beside `memory.estimate`. The estimate must not fall below
the peak (a refused run would not have fit; a run let through must not surprise the host's
guard), and the ratio says how much it errs high. The growth between the two batches, per
example, checks the per-example term alone. Writes a table between <!-- memory-BACKEND -->
markers in docs/MEMORY.md.

    python bench/memory_estimate.py                  # every workload, ~15 min on 2 CPU cores
    python bench/memory_estimate.py --models resnet50 --no-write
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from docs_block import write_block  # bench/, on sys.path when a script here runs

from dashbench import memory
from dashbench.spec import MODELS, RunSpec

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "MEMORY.md"
# Two batches per workload at full shapes, the larger a few times the smaller: CPU-sized.
BATCHES = {"conv2d": (16, 128), "fashion_mnist_cnn": (64, 512), "resnet50": (8, 32), "inception_v3": (8, 32),
           "bilstm": (8, 32)}


def spec_for(model: str, batch: int, backend: str) -> RunSpec:
    return RunSpec(model=model, batch_size=batch, steps=2, warmup=1, seed=0, device="cpu", backend=backend)


def child(model: str, batch: int, backend: str) -> None:
    """The measured process: one run through the engine, nothing else."""
    spec = spec_for(model, batch, backend)
    if backend == "jax":
        from dashbench.engine import jax_loop as engine
    else:
        from dashbench.engine import loop as engine
    engine.run(spec)


def peak_rss(model: str, batch: int, backend: str) -> tuple[float, float, int]:
    """(peak resident bytes, seconds, exit status) of one run in a process of its own."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, __file__, "--child", model, str(batch), backend], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024.0, time.monotonic() - began, proc.returncode


def gb(value: float) -> str:
    return f"{value / 1e9:.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--backend", default="tensorflow", choices=("tensorflow", "jax"))
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "BATCH", "BACKEND"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    lines = ["| workload | batch | estimate (GB) | peak RSS (GB) | estimate ÷ peak "
             "| per example: estimate / measured (MB) |", "|---|---|---|---|---|---|"]
    below, began = [], time.monotonic()
    for model in [m for m in args.models.split(",") if m]:
        points = []
        for batch in BATCHES[model]:
            need = memory.estimate(spec_for(model, batch, args.backend))
            peak, seconds, code = peak_rss(model, batch, args.backend)
            points.append((batch, need, peak))
            print(f"{model:<18} batch {batch:<4} estimate {gb(need.total)} GB, peak {gb(peak)} GB "
                  f"({seconds:.0f} s, exit {code})", file=sys.stderr, flush=True)
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
        f"## The memory estimate against a run's peak ({args.backend}, full shapes, CPU)\n\n"
        "`bench/memory_estimate.py`: each point one process, 1 warm-up + 2 measured steps; peak RSS is the "
        "process's ru_maxrss (the framework, the model, the batch and every step). Per example: the estimate's "
        "per-example term beside the growth of the peak between the two batches, divided by their difference.\n"
        f"Machine: {os.cpu_count()} CPU cores ({platform.machine()}), Python {platform.python_version()}, "
        f"measured {dt.date.today().isoformat()}, {time.monotonic() - began:.0f} s in all, load average {load:.1f} "
        "at the end.\n\n" + "\n".join(lines) + "\n\n"
        + ("The estimate is above the peak everywhere." if not below
           else "Estimate BELOW the peak: " + ", ".join(below))
    )
    print(text)
    if not args.no_write:
        write_block(DOC, f"memory-{args.backend}", text, title="# Memory")
    return 0 if not below else 1


if __name__ == "__main__":
    raise SystemExit(main())
