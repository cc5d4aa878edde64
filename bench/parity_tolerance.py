"""Where the convergence-parity tolerance comes from (views.parity).

Trains one setup at several seeds on TensorFlow and on JAX, plus broken versions of it, and counts
how often views.parity's rule (a run departs where it is more than K × the reference's seed-to-seed
RMS difference from the reference's run of its seed, at PERSISTENT_POINTS steps in a row) flags:
- every same-seed TensorFlow/JAX pair, each backend taken as the reference with every subset of 2
  and 3 of its seeds: the false alarms (the two backends train the same setup);
- the broken runs against TensorFlow's seeds: the detections.
Two kinds of curve, as the rule meets them:
- loss per host loop of throughput runs (synthetic data; fashion_mnist_cnn quick, batch 64, 2 + 20
  steps); broken: Adam at 3e-2 instead of 1e-3 (the rate in the child process replaced);
- to-accuracy runs on the tests' learnable set (batch 32, target 0.9, 2 epochs at most, an
  evaluation every 3 steps); broken: the training labels shuffled apart from their images.
Writes a table between <!-- parity-tolerance --> markers in docs/CONVERGENCE.md.

    python bench/parity_tolerance.py            # seeds 0-3 (about 10 CPU minutes)
    python bench/parity_tolerance.py --no-write
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from docs_block import write_block  # bench/, on sys.path when a script here runs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
DOC = ROOT / "docs" / "CONVERGENCE.md"
KS = (2.0, 3.0, 4.0)

CHILD = """
import json, sys
args = json.loads(sys.argv[1])
from dashbench.engine import loop, workloads
from dashbench.core.spec import RunSpec
if args.get("lr"):
    import keras
    workloads.KerasWorkload.make_optimizer = lambda self, shapes: keras.optimizers.Adam(learning_rate=args["lr"])
out = []
for spec in args["specs"]:
    result = loop.run(RunSpec(**spec)).to_dict()
    out.append({"run_id": f"{spec['backend']}-{spec['seed']}-{args.get('tag', 'ok')}", "status": "done",
                "result": result})
print(json.dumps(out))
"""


def child(specs: list[dict], lr: float | None = None, tag: str = "ok") -> list[dict]:
    env = {**os.environ, "DASHBENCH_CPU_PROBE_SIZE": "512"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps({"specs": specs, "lr": lr, "tag": tag})],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def throughput_specs(backend: str, seeds) -> list[dict]:
    return [
        dict(
            model="fashion_mnist_cnn",
            batch_size=64,
            image_size=28,
            width=16,
            steps=20,
            warmup=2,
            device="cpu",
            backend=backend,
            seed=seed,
        )
        for seed in seeds
    ]


def accuracy_specs(backend: str, seeds, data_path: str) -> list[dict]:
    return [
        dict(
            model="fashion_mnist_cnn",
            batch_size=32,
            image_size=28,
            width=16,
            device="cpu",
            backend=backend,
            data="real",
            data_path=data_path,
            target_accuracy=0.9,
            max_epochs=2,
            eval_every=3,
            seed=seed,
        )
        for seed in seeds
    ]


def judge(runs: dict, seeds: list[int], k: float) -> tuple[int, int, int, int]:
    """(false alarms, pairs, detections, broken runs) of the rule at K = k."""
    from dashbench.views.compare import parity

    old = parity.TOLERANCE_SIGMAS
    parity.TOLERANCE_SIGMAS = k
    try:
        alarms = pairs = found = broken = 0
        for ref_backend, other in (("tensorflow", "jax"), ("jax", "tensorflow")):
            for size in (2, 3):
                for subset in itertools.combinations(seeds, size):
                    reference = [runs[(ref_backend, s)] for s in subset]
                    for seed in subset:
                        verdicts = parity.compare(
                            [x for r in reference + [runs[(other, seed)]] for x in parity.series_of(r)]
                        )
                        pairs += 1
                        alarms += any(v.flags for v in verdicts)
                        if ref_backend == "tensorflow" and ("broken", seed) in runs:
                            verdicts = parity.compare(
                                [x for r in reference + [runs[("broken", seed)]] for x in parity.series_of(r)]
                            )
                            broken += 1
                            found += any(v.flags for v in verdicts)
        return alarms, pairs, found, broken
    finally:
        parity.TOLERANCE_SIGMAS = old


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    import numpy as np
    from fixtures import learnable_data

    from dashbench.workloads.datasets import read_idx, write_idx

    seeds = list(range(args.seeds))
    began, load = time.monotonic(), os.getloadavg()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        good = learnable_data.write_learnable_idx(Path(tmp) / "good")
        bad = Path(tmp) / "shuffled"
        bad.mkdir()
        for name in os.listdir(good):
            data = read_idx(good / name)
            write_idx(
                bad / name, np.random.default_rng(7).permutation(data) if name.startswith("train-labels") else data
            )
        kinds = {
            "loss per host loop (throughput, synthetic)": (
                lambda backend: throughput_specs(backend, seeds),
                lambda: child(throughput_specs("tensorflow", seeds[:2]), lr=3e-2, tag="broken"),
                "Adam 3e-2",
            ),
            "evaluations (to 0.9 on the learnable set)": (
                lambda backend: accuracy_specs(backend, seeds, str(good)),
                lambda: child(accuracy_specs("tensorflow", seeds[:2], str(bad)), tag="broken"),
                "training labels shuffled",
            ),
        }
        for kind, (specs, broken, how) in kinds.items():
            runs = {}
            for backend in ("tensorflow", "jax"):
                for run, seed in zip(child(specs(backend)), seeds):
                    runs[(backend, seed)] = run
            for run, seed in zip(broken(), seeds[:2]):
                run["result"]["backend"] = "broken"  # a device of its own beside TensorFlow's
                runs[("broken", seed)] = run
            for k in KS:
                alarms, pairs, found, total = judge(runs, seeds, k)
                lines.append(f"| {kind} | {k:g} | {alarms}/{pairs} | {found}/{total} ({how}) |")
                print(lines[-1], flush=True)
    took = time.monotonic() - began
    text = "\n".join(
        [
            f"`bench/parity_tolerance.py`: fashion_mnist_cnn at quick shapes, seeds {seeds[0]}-{seeds[-1]} on TensorFlow "
            f"and on JAX, judged by views.parity's rule at K × the reference's seed-to-seed RMS difference, "
            "departing at 2 evaluations (or host loops) in a row. False alarms: each same-seed TensorFlow/JAX pair, "
            "either backend as the reference with every 2 and 3 of its seeds. Detections: the broken runs (seeds "
            "0-1) against TensorFlow's seeds.",
            f"Machine: 2 CPU cores, load average {load[0]:.1f} at the start (other work running), "
            f"measured {dt.date.today()}, {took:.0f} s in all.",
            "",
            "| curve | K | false alarms | detected |",
            "|---|---|---|---|",
            *lines,
        ]
    )
    if not args.no_write:
        write_block(DOC, "parity-tolerance", text, title="# Convergence")
    print(text)


if __name__ == "__main__":
    main()
