"""The analytic FLOPs of every workload beside the compiler's count of one training step.

JAX: XLA's cost analysis of one compiled step (dashbench.engine.compiler_flops.jax_step), lowered for
abstract arguments and never run. The model's weights and the optimizer's slots are built inside a
Keras StatelessScope, so they are shapes only, never allocated. TensorFlow: the graph profiler over
one step's concrete function (traced, never run).

Each backend runs in its own child process (Keras picks its backend once per process). Writes the
table into docs/PERFORMANCE.md between <!-- flops --> markers.

    python bench/flops_table.py                       # every workload, both backends
    python bench/flops_table.py --only jax --models llama
    python bench/flops_table.py --from-json rows.json --json rows.json   # measure only what rows.json lacks
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (model, shape overrides, batch size): full size where this CPU host can build the model, else
# the LM at a shape a TF process can hold (121 M parameters).
CASES = [
    ("llama", {"width": 64, "layers": 2, "seq_len": 64}, 8),
    ("llama", {"width": 1024, "layers": 4, "seq_len": 1024}, 1),
    # Llama 3.1 8B's proportions at 1/16 of its width: with the vocabulary at 32 per unit of width,
    # the embedding's share of N is 32 / (13·L) and attention's term against 6N is 2T / (13·width),
    # both the 8B's at 32 layers and 512 tokens. The 8B itself does not compile here: XLA:CPU was
    # killed for memory at one layer of its full width, vocabulary and length, on this 23 GB host.
    ("llama", {"width": 256, "layers": 32, "seq_len": 512}, 1),
    ("conv2d", {}, 128),
    ("fashion_mnist_cnn", {}, 1024),
    ("bilstm", {}, 64),
    ("resnet50", {}, 32),
    ("inception_v3", {}, 32),
]
TF_SKIPS: set = set()


def _shapes(model: str, overrides: dict, spec):
    """The resolved shapes; a layer count at full width and length (which a spec refuses, so that a
    stored run is never listed as full size) is set here directly."""
    import dataclasses

    from dashbench.workloads import catalog

    if model == "llama" and set(overrides) == {"layers"}:
        return dataclasses.replace(catalog.check_spec(spec.replace(layers=None)), layers=overrides["layers"])
    return catalog.check_spec(spec)


def count_jax(model: str, overrides: dict, batch: int) -> dict:
    import jax
    import keras

    from dashbench.core import stats
    from dashbench.core.spec import RunSpec
    from dashbench.engine import compiler_flops, workloads
    from dashbench.engine.jax import loop as jax_loop
    from dashbench.workloads import registry

    spec = RunSpec(model=model, batch_size=batch, backend="jax", **overrides)
    shapes = _shapes(model, overrides, spec)
    optimizer = workloads.make_optimizer(model, shapes)  # its step counter and rate are concrete values
    with keras.StatelessScope():  # the weights and slots: shapes only, never allocated
        net = workloads.build_model(model, shapes)
        optimizer.build(net.trainable_variables)
    abstract = lambda variables: [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in variables]
    state = (abstract(net.trainable_variables), abstract(net.non_trainable_variables), abstract(optimizer.variables))
    x, y = workloads.synthetic_batch(model, shapes, 1, 0)
    batch_of = lambda a: jax.ShapeDtypeStruct((batch, *a.shape[1:]), a.dtype)
    step = jax_loop.step_of(net, optimizer, model, loss_scaling=False)
    start = time.perf_counter()
    lowered = jax.jit(step).lower(state, batch_of(x), batch_of(y))
    compiled = lowered.compile()
    seconds = time.perf_counter() - start
    examples = batch * stats.examples_per_item(registry.get(model).unit, shapes.seq_len)
    return {
        "analytic": workloads.flops_per_example(net)["training"],
        "compiler": compiler_flops.per_example(compiler_flops.program_cost(lowered, lambda: compiled), examples),
        "compile_s": seconds,
        "parameters": sum(_prod(v.shape) for v in net.trainable_variables),
    }


def count_tf(model: str, overrides: dict, batch: int) -> dict:
    import tensorflow as tf

    from dashbench.core import stats
    from dashbench.core.spec import RunSpec
    from dashbench.engine import compiler_flops, workloads
    from dashbench.workloads import registry

    spec = RunSpec(model=model, batch_size=batch, **overrides)
    shapes = _shapes(model, overrides, spec)
    net = workloads.build_model(model, shapes)
    optimizer = workloads.make_optimizer(model, shapes)
    optimizer.build(net.trainable_variables)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(workloads.per_example_loss(model, y, net(x, training=True)))
        optimizer.apply_gradients(zip(tape.gradient(loss, net.trainable_variables), net.trainable_variables))
        return loss

    x, y = workloads.synthetic_batch(model, shapes, 1, 0)
    specs = [tf.TensorSpec((batch, *a.shape[1:]), tf.as_dtype(a.dtype)) for a in (x, y)]
    start = time.perf_counter()
    examples = batch * stats.examples_per_item(registry.get(model).unit, shapes.seq_len)
    counted = compiler_flops.tf_step(tf, step, specs, examples)
    return {
        "analytic": workloads.flops_per_example(net)["training"],
        "compiler": counted,
        "compile_s": time.perf_counter() - start,
        "parameters": int(sum(_prod(v.shape) for v in net.trainable_variables)),
    }


def _prod(shape) -> int:
    out = 1
    for n in shape:
        out *= int(n)
    return out


def child(backend: str, cases: list) -> None:
    count = count_jax if backend == "jax" else count_tf
    for model, overrides, batch in cases:
        try:
            row = count(model, overrides, batch)
        except Exception as error:  # one workload's failure is a row, not the table's end
            row = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"}
        print(
            json.dumps({"model": model, "overrides": overrides, "batch": batch, "backend": backend, **row}), flush=True
        )


def measure(backend: str, cases: list) -> list[dict]:
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT)}
    if backend == "jax":
        env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run(
        [sys.executable, __file__, "--child", backend, "--cases", json.dumps(cases)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode:  # the case after the last row ended the child (killed for memory, or a crash)
        rest = cases[len(rows) :]
        last = (done.stderr.strip().splitlines() or ["no message"])[-1][:200]
        rows += [
            {
                "model": m,
                "overrides": o,
                "batch": b,
                "backend": backend,
                "error": f"child ended {done.returncode}: {last}" if i == 0 else "not reached",
            }
            for i, (m, o, b) in enumerate(rest)
        ]
    return rows


def table(rows: list[dict]) -> str:
    import platform

    import keras

    lines = [
        "## FLOPs: the formula beside the compiler (`bench/flops_table.py`)",
        "",
        "Training FLOPs per example (per token for `llama`) of one step: the analytic count MFU uses "
        "(the layers' multiply-adds; PaLM's 6N + 12·L·H·Q·T for the LM) and the compiler's "
        "(`dashbench/engine/compiler_flops.py`: XLA's cost analysis of one compiled step on JAX, never run; "
        "TensorFlow's graph profiler on one step's concrete function). "
        f"Keras {keras.__version__}, Python {platform.python_version()}, on the CPU.",
        "",
        "| workload | shape | batch | backend | parameters | analytic FLOP/example | compiler FLOP/example | compiler ÷ analytic |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        shape = ", ".join(f"{k} {v}" for k, v in r["overrides"].items()) or "full size"
        if "error" in r:
            lines.append(f"| {r['model']} | {shape} | {r['batch']} | {r['backend']} | | | | {r['error']} |")
            continue
        ratio = f"{r['compiler'] / r['analytic']:.3f}" if r.get("compiler") and r.get("analytic") else "—"
        compiler = f"{r['compiler']:.4g}" if r.get("compiler") else "none"
        lines.append(
            f"| {r['model']} | {shape} | {r['batch']} | {r['backend']} | {r['parameters']:,} | "
            f"{r['analytic']:.4g} | {compiler} | {ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=("jax", "tensorflow"))
    parser.add_argument("--cases")
    parser.add_argument("--only", choices=("jax", "tensorflow"))
    parser.add_argument("--models", help="comma-separated workloads (default: all)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--no-docs", action="store_true", help="print the table, leave docs/PERFORMANCE.md alone")
    parser.add_argument(
        "--from-json", help="start from the rows a previous --json wrote; measure only the cases it lacks (or failed)"
    )
    args = parser.parse_args()
    if args.child:
        child(args.child, json.loads(args.cases))
        return
    wanted = set(args.models.split(",")) if args.models else None
    cases = [c for c in CASES if wanted is None or c[0] in wanted]
    known = [r for r in json.loads(Path(args.from_json).read_text()) if "error" not in r] if args.from_json else []
    done = {(r["backend"], r["model"], json.dumps(r["overrides"], sort_keys=True)) for r in known}
    rows = list(known)
    for backend in [args.only] if args.only else ["jax", "tensorflow"]:
        todo = [
            c
            for c in cases
            if (backend == "jax" or (c[0], tuple(sorted(c[1].items()))) not in TF_SKIPS)
            and (backend, c[0], json.dumps(c[1], sort_keys=True)) not in done
        ]
        rows += measure(backend, todo) if todo else []
    order = {(c[0], json.dumps(c[1], sort_keys=True)): i for i, c in enumerate(CASES)}
    rows.sort(
        key=lambda r: (r["backend"] != "jax", order.get((r["model"], json.dumps(r["overrides"], sort_keys=True)), 99))
    )
    text = table(rows)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if not args.no_docs:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from docs_block import write_block

        write_block(ROOT / "docs" / "PERFORMANCE.md", "flops", text)


if __name__ == "__main__":
    main()
