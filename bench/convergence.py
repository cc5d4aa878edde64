"""Does every workload's loss fall, over several seeds? The engine's `loss_not_falling` flag rests on it.

Each workload runs through the engine (dashbench.engine.loop.run, or the JAX loop with --backend jax)
at its quick shapes (dashbench.workloads.registry) for seeds 0–4 with the test suite's settings (4 measured
steps after 2 warm-up steps: six losses), and, with --full, at its full shapes too (`--full-only`:
those alone), at batches a CPU can do (FULL_BATCH: the shapes are the model's, the batch is small).
A seed passes when the engine raises no `loss_not_falling` flag, every loss is finite, and the mean
of the last three losses is below the mean of the first three (what tests/workloads/test_workloads.py asks).
Writes a table between <!-- convergence-BACKEND-SHAPES[-stepsN] --> markers in docs/CONVERGENCE.md
(one section per backend, shapes and number of steps).

    python bench/convergence.py                       # quick shapes, seeds 0-4, TensorFlow
    python bench/convergence.py --seeds 0-9 --full    # more seeds, and full shapes too
    python bench/convergence.py --full-only           # full shapes only (~40 min on 2 CPU cores)
    python bench/convergence.py --models resnet50 --no-write
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import sys
import time
from pathlib import Path

from docs_block import write_block  # bench/, on sys.path when a script here runs

from dashbench.core import stats
from dashbench.core.spec import MODELS, RunSpec
from dashbench.workloads import registry

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "CONVERGENCE.md"
# Full shapes at batches a 2-core CPU runs in 1-3 minutes a seed; the learning rate and warm-up do not
# depend on the batch (dashbench.engine.workloads.make_optimizer).
FULL_BATCH = {"conv2d": 16, "fashion_mnist_cnn": 64, "resnet50": 16, "inception_v3": 16, "bilstm": 16}


def spec_for(model: str, seed: int, full: bool, steps: int, warmup: int, backend: str) -> RunSpec:
    quick = dict(registry.get(model).quick)
    batch = quick.pop("batch_size")
    if full:
        quick, batch = {}, FULL_BATCH[model]
    return RunSpec(
        model=model, batch_size=batch, steps=steps, warmup=warmup, seed=seed, device="cpu", backend=backend, **quick
    )


def verdict(losses: list) -> tuple[bool, str]:
    finite = [v for v in losses if v is not None and math.isfinite(v)]
    if len(finite) != len(losses):
        return False, "non-finite loss"
    if stats.loss_not_falling(losses):
        return False, "loss_not_falling"
    k = min(3, len(losses) // 2) or 1
    if sum(losses[-k:]) / k >= sum(losses[:k]) / k:
        return False, f"mean of last {k} not below first {k}"
    return True, "falls"


def measure(spec: RunSpec) -> dict:
    from dashbench.engine import loop

    began = time.monotonic()
    try:
        result = loop.run(spec).to_dict()
    except Exception as exc:  # one broken point is a row in the table, not the end of the script
        return {
            "ok": False,
            "why": f"{type(exc).__name__}: {str(exc)[:120]}",
            "losses": [],
            "flags": [],
            "seconds": time.monotonic() - began,
        }
    ok, why = verdict(result["losses"])
    flags = [f for f in result["flags"] if f != "above_peak"]
    return {
        "ok": ok and "loss_not_falling" not in flags,
        "why": why,
        "losses": result["losses"],
        "flags": result["flags"],
        "seconds": time.monotonic() - began,
    }


def parse_seeds(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            out.extend(range(int(low), int(high) + 1))
        elif part:
            out.append(int(part))
    return out


def table(rows: list[dict], seeds: list[int]) -> str:
    head = "| workload | shapes | batch | " + " | ".join(f"seed {s}" for s in seeds) + " | falls |"
    lines = [head, "|" + "---|" * (4 + len(seeds))]
    groups: dict[tuple, list] = {}
    for row in rows:
        groups.setdefault((row["model"], row["shapes"], row["batch"]), []).append(row)
    for (model, shapes, batch), group in groups.items():
        cells = []
        for row in group:
            losses = row["losses"]
            text = f"{losses[0]:.3g} → {losses[-1]:.3g}" if losses else "—"
            cells.append(("✓ " if row["ok"] else "✗ ") + text + ("" if row["ok"] else f" ({row['why']})"))
        passed = sum(row["ok"] for row in group)
        lines.append(f"| {model} | {shapes} | {batch} | " + " | ".join(cells) + f" | {passed}/{len(group)} |")
    return "\n".join(lines)


def write_doc(text: str, tag: str) -> None:
    write_block(DOC, f"convergence-{tag}", text, title="# Convergence")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 0,3,7")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--full", action="store_true", help="full shapes too (batches: FULL_BATCH)")
    parser.add_argument("--full-only", action="store_true", help="full shapes only")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--backend", default="tensorflow", choices=("tensorflow", "jax"))
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    models = [m for m in args.models.split(",") if m]
    full = [(m, True) for m in models] if args.full or args.full_only else []
    points = ([] if args.full_only else [(m, False) for m in models]) + full
    shapes_tag = "full" if args.full_only else "quick-full" if args.full else "quick"
    steps_tag = "" if args.steps == 4 else f"-steps{args.steps}"  # a longer check is a table of its own
    rows = []
    began = time.monotonic()
    for model, full in points:
        for seed in seeds:
            spec = spec_for(model, seed, full, args.steps, args.warmup, args.backend)
            out = measure(spec)
            shapes = registry.get(model).shapes(spec).to_dict()
            shown = (
                "full"
                if full
                else "quick "
                + ",".join(f"{k}={v}" for k, v in shapes.items() if k in ("image_size", "seq_len", "width"))
            )
            row = {"model": model, "shapes": shown, "batch": spec.batch_size, "seed": seed, **out}
            rows.append(row)
            losses = ", ".join(f"{v:.3g}" for v in out["losses"])
            print(
                f"{model:<18} {'full ' if full else 'quick'} seed {seed}: {'ok  ' if out['ok'] else 'FAIL'} "
                f"{out['why']:<22} [{losses}] ({out['seconds']:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    failed = [r for r in rows if not r["ok"]]
    when = dt.date.today().isoformat()
    command = " ".join(["bench/convergence.py", *(sys.argv[1:] if argv is None else argv)])
    text = (
        f"## Does the loss fall? ({args.backend}, {shapes_tag.replace('-', ' and ')} shapes, seeds {args.seeds})\n\n"
        f"`{command}`: each workload through the engine on the CPU, "
        f"{args.warmup} warm-up + {args.steps} measured steps (one loss per step), seeds {args.seeds}. A seed "
        "passes (✓) when every loss is finite, the engine raises no `loss_not_falling`, and the mean of the last "
        "three losses is below the mean of the first three (the test suite's check). Cells: first → last loss.\n"
        f"Machine: {os.cpu_count()} CPU cores ({platform.machine()}), Python {platform.python_version()}, "
        f"measured {when}, {time.monotonic() - began:.0f} s in all.\n\n"
        + table(rows, seeds)
        + f"\n\n{len(rows) - len(failed)} of {len(rows)} runs fall"
        + (": failing " + ", ".join(f"{r['model']} seed {r['seed']} ({r['why']})" for r in failed) if failed else ".")
    )
    print(text)
    if not args.no_write:
        write_doc(text, f"{args.backend}-{shapes_tag}{steps_tag}")
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
