"""Time to accuracy: the seed CNN trained to a target validation accuracy on the learnable 10-class
set (tests/fixtures/learnable_data.py, written as Fashion-MNIST IDX files), TensorFlow and JAX side by side,
several seeds each (the median time to target, its spread, how many seeds reached it), with the
share of the timed region spent evaluating the held-out split. Each backend runs as
`python -m dashbench run … --target-accuracy … --seeds …` in a process of its own (Keras takes one
backend per process), with nothing stored. Writes the table into docs/PERFORMANCE.md between
<!-- time-to-accuracy --> markers, with the load average before and after each backend's run.

    python bench/time_to_accuracy.py                  # quick shapes on this CPU (width 16, batch 64)
    python bench/time_to_accuracy.py --full --device gpu   # full width 64, batch 1024, 60k/10k images
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the learnable set's generator is the tests' (no download here)

from docs_block import write_block  # noqa: E402 (bench/, on sys.path when a script here runs)
from fixtures.learnable_data import write_learnable_idx  # noqa: E402

BACKENDS = ("tensorflow", "jax")


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def run_backend(backend: str, data: Path, args) -> dict:
    command = [
        sys.executable,
        "-m",
        "dashbench",
        "run",
        "--backend",
        backend,
        "--device",
        args.device,
        "--model",
        "fashion_mnist_cnn",
        "--batch-size",
        str(args.batch_size),
        "--width",
        str(args.width),
        "--data",
        "real",
        "--data-path",
        str(data),
        "--target-accuracy",
        str(args.target),
        "--max-epochs",
        str(args.max_epochs),
        "--seeds",
        str(args.seeds),
        "--no-store",
        "--json",
    ]
    before = load_average()
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 4):  # 4: trained, target not reached by most seeds
        raise SystemExit(f"{backend} run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {
        "backend": backend,
        "result": json.loads(done.stdout),
        "wall_s": wall,
        "load": f"{before} → {load_average()}",
    }


def row(measured: dict) -> dict:
    """One backend's figures from its run's result JSON."""
    result = measured["result"]
    record = result["accuracy"]
    runs = record["runs"]
    total = sum(r["total_s"] for r in runs)
    return {
        "backend": measured["backend"],
        "reached": f"{record['reached']}/{len(runs)}",
        "median_s": record["time_to_target_median_s"],
        "min_s": record["time_to_target_min_s"],
        "max_s": record["time_to_target_max_s"],
        "epochs": record["epochs_to_target_median"],
        "eval_share": sum(r["eval_s"] for r in runs) / total if total else None,
        "final": statistics.median(r["final_val_accuracy"] for r in runs),
        "compile_s": record["compile_s"],
        "load_s": record["load_s"],
        "examples_per_sec": result["examples_per_sec"],
        "status": result["status"],
        "wall_s": measured["wall_s"],
        "load": measured["load"],
    }


def table(rows: list[dict], args, train: int, validation: int) -> str:
    fmt = lambda v, spec=".1f": "—" if v is None else format(v, spec)
    lines = [
        f"Time to {args.target:.0%} validation accuracy: the seed CNN (width {args.width}) at batch "
        f"{args.batch_size} on the learnable 10-class set ({train:,} training / {validation:,} held-out "
        f"28×28 images, 4% of labels wrong on purpose), on {args.device.upper()}, {args.seeds} seeds per "
        f"backend, the whole held-out split evaluated after every epoch (max {args.max_epochs} epochs). "
        "Time to target runs from a seed's first training step to the end of the evaluation that reached "
        "it, evaluations included; compile and data loading are apart. Measured "
        f"{time.strftime('%Y-%m-%d', time.gmtime())} with `python bench/time_to_accuracy.py"
        f"{' --full' if args.full else ''}` on a 2-core machine shared with other work (load average "
        "1 min/5 min beside each row; figures move with it).",
        "",
        "| backend | seeds reached | time to target, median (min–max) | epochs to target (median) | "
        "evaluation's share of the timed region | final accuracy (median) | compile | data loading | "
        "training examples/s | load average (before → after) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        spread = f" ({fmt(r['min_s'])}–{fmt(r['max_s'])})" if r["min_s"] is not None else ""
        lines.append(
            f"| {r['backend']} | {r['reached']} | {fmt(r['median_s'])} s{spread} | {fmt(r['epochs'], 'g')} | "
            f"{fmt(None if r['eval_share'] is None else 100 * r['eval_share'])}% | {r['final']:.3f} | "
            f"{r['compile_s']:.1f} s | {r['load_s']:.2f} s | {r['examples_per_sec']:,.0f} | {r['load']} |"
        )
    if len(rows) == 2 and all(r["median_s"] for r in rows):
        ratio = rows[1]["median_s"] / rows[0]["median_s"]
        lines += ["", f"JAX / TensorFlow median time to target: {ratio:.2f}×."]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--full", action="store_true", help="full shapes: width 64, batch 1024, 60,000/10,000 images")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--width", type=int, default=None)
    parser.add_argument("--train", type=int, default=None, help="training images (default 3,000; --full 60,000)")
    parser.add_argument("--validation", type=int, default=None, help="held-out images (default 1,000; --full 10,000)")
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", choices=BACKENDS, default=None)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    args = parser.parse_args(argv)
    args.batch_size = args.batch_size or (1024 if args.full else 64)
    args.width = args.width or (64 if args.full else 16)
    train = args.train or (60_000 if args.full else 3_000)
    validation = args.validation or (10_000 if args.full else 1_000)
    rows = []
    with tempfile.TemporaryDirectory(prefix="dashbench-tta-") as folder:
        data = write_learnable_idx(Path(folder), train=train, test=validation)
        for backend in (args.only,) if args.only else BACKENDS:
            print(f"{backend}: training to {args.target:g}, {args.seeds} seeds …", file=sys.stderr, flush=True)
            rows.append(row(run_backend(backend, data, args)))
    text = table(rows, args, train, validation)
    print(text)
    if not args.no_write:
        marker = "time-to-accuracy" + ("-full" if args.full else "")
        write_block(ROOT / "docs" / "PERFORMANCE.md", marker, "## Time to accuracy\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
