"""Does the engine cost throughput? Same model, same data, one process, three ways:

  engine — dashbench.engine.loop.run (strategy, custom loop, steps_per_loop, host sync per loop)
  hand   — a minimal hand-written tf.function step, called in a Python loop, synced at the end
  fit    — Keras model.fit on a repeated tf.data batch (the seeds' way)

After each of the engine's host loops, the same number of steps runs by hand and by fit, so
drifting load on a shared machine hits all three alike; the report is the median over loops.
Compilation and warm-up are excluded from all three. Writes the table into docs/PERFORMANCE.md between <!-- engine --> markers.

    python bench/engine_overhead.py                  # short CPU settings, writes docs/PERFORMANCE.md
    python bench/engine_overhead.py --model fashion_mnist_cnn --batch-size 1024 --width 64 --steps 50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from dashbench import catalog
from dashbench.engine import devices, envinfo, loop, workloads
from dashbench.spec import RunSpec

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "PERFORMANCE.md"
START, END = "<!-- engine -->", "<!-- /engine -->"


def _setup(spec: RunSpec):
    """TensorFlow, the model, its optimizer and one synthetic batch, seeded as the engine seeds them."""
    tf = devices.import_tensorflow()
    import keras

    shapes = catalog.get(spec.model).shapes(spec)
    keras.utils.set_random_seed(spec.seed)
    model = workloads.build_model(spec.model, shapes)
    batch = workloads.synthetic_batch(spec.model, shapes, spec.batch_size, spec.seed)
    return tf, model, workloads.make_optimizer(spec.model), batch


def hand_loop(spec: RunSpec):
    """A minimal hand-written loop; returns chunk(n) → (wall, CPU) seconds for n steps and a host sync."""
    tf, model, optimizer, (x, y) = _setup(spec)
    optimizer.build(model.trainable_variables)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(workloads.per_example_loss(spec.model, y, model(x, training=True)))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    def chunk(n: int) -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            loss = step()
        loss.numpy()
        return time.perf_counter() - start, time.process_time() - cpu

    chunk(1 + spec.warmup)  # trace, compile, warm up
    return chunk


def fit_loop(spec: RunSpec):
    """Keras model.fit; returns chunk(n) → (wall, CPU) seconds of one n-step epoch (the epoch's own time)."""
    import keras

    tf, model, optimizer, (x, y) = _setup(spec)
    model.compile(optimizer=optimizer, loss=lambda y, p: workloads.per_example_loss(spec.model, y, p),
                  jit_compile=False)
    data = tf.data.Dataset.from_tensors((x, y)).repeat()

    class Timer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start, self.cpu = time.perf_counter(), time.process_time()

        def on_epoch_end(self, epoch, logs=None):
            # Keras has already turned the logs (the loss) into Python floats: the host has synced.
            self.seconds = (time.perf_counter() - self.start, time.process_time() - self.cpu)

    timer = Timer()

    def chunk(n: int) -> tuple[float, float]:
        model.fit(data, steps_per_epoch=n, epochs=1, verbose=0, shuffle=False, callbacks=[timer])
        return timer.seconds

    chunk(1 + spec.warmup)
    return chunk


def measure(spec: RunSpec) -> dict:
    """Run the engine; after each of its measured host loops, run the same steps by hand and by fit.

    Interleaving at the scale of one host loop means that a burst of load from other processes
    hits all three alike. Wall time is what a user gets; process CPU time (all threads) is the work
    done, which other processes' load barely changes, so on a shared machine it shows overhead
    that wall-clock noise hides. On a CPU, TensorFlow runs a function synchronously, so no device
    idles while the host works and CPU time misses no stall.
    """
    k = spec.steps_per_loop
    others = {"hand": hand_loop(spec), "fit": fit_loop(spec)}
    wall = {"engine": [], "hand": [], "fit": []}
    cpu = {"engine": [], "hand": [], "fit": []}
    last_cpu = [None]

    def after_each_loop(event: dict) -> None:
        if event.get("event") != "sample":
            return
        now = time.process_time()
        if not event["warmup"] and last_cpu[0] is not None:
            wall["engine"].append(event["duration_s"])
            cpu["engine"].append(now - last_cpu[0])  # the engine's loop and its own bookkeeping
            order = list(others) if len(wall["engine"]) % 2 else list(others)[::-1]  # neither always first
            for name in order:
                seconds, cpu_seconds = others[name](k)
                wall[name].append(seconds)
                cpu[name].append(cpu_seconds)
            rates = "  ".join(f"{n} {spec.batch_size * k / s[-1]:8.1f}" for n, s in wall.items())
            print(f"loop {len(wall['engine'])}: examples/s  {rates}", file=sys.stderr, flush=True)
        last_cpu[0] = time.process_time()

    loop.run(spec, on_event=after_each_loop)
    out = {}
    for name in wall:
        examples = spec.batch_size * k
        out[name] = {
            "median": statistics.median(examples / s for s in wall[name]),
            "total": examples * len(wall[name]) / sum(wall[name]),
            "cpu": examples * len(cpu[name]) / sum(cpu[name]),
            "loops": len(wall[name]),
        }
    return out


def render(spec: RunSpec, result: dict) -> str:
    env = envinfo.record([], spec.precision, spec.xla)
    hand = result["hand"]
    ratio = {name: {key: result[name][key] / hand[key] for key in ("median", "total", "cpu")} for name in result}
    loops = result["engine"]["loops"]
    lines = [
        START,
        "## Engine overhead (`bench/engine_overhead.py`)",
        "",
        f"Same model and data in one process: `{spec.model}`, global batch {spec.batch_size}, "
        f"shapes {catalog.get(spec.model).shapes(spec).to_dict()}, {spec.precision}, on the CPU. "
        f"{loops} measured host loops of {spec.steps_per_loop} steps; after each engine loop the same number of "
        "steps ran by a minimal hand-written `tf.function` loop and by Keras `model.fit`, so load from other "
        f"processes hits all three alike. Host: {env['cpu_model']} ({env['cpu_count']} cores), TensorFlow "
        f"{env['tensorflow']}, Keras {env['keras']}, commit {env['git_commit']}.",
        "",
        "| loop | examples/s (median of loops) | examples/s (total) | examples per CPU-second | "
        "ratio to hand: median / total / CPU |",
        "|---|---:|---:|---:|---|",
    ]
    for name, label in (("engine", "dashbench engine"), ("hand", "hand-written tf.function"), ("fit", "Keras model.fit")):
        row, r = result[name], ratio[name]
        lines.append(f"| {label} | {row['median']:.1f} | {row['total']:.1f} | {row['cpu']:.1f} | "
                     f"{r['median']:.3f} / {r['total']:.3f} / {r['cpu']:.3f} |")
    e_cpu, f_cpu = ratio["engine"]["cpu"], ratio["fit"]["cpu"]
    lines += [
        "",
        f"Work per example (CPU time, the figure that load from other processes barely moves): engine "
        f"{e_cpu:.3f}× the hand loop's throughput ({'within' if e_cpu >= 0.98 else 'NOT within'} 2%), "
        f"model.fit {f_cpu:.3f}× (engine {'no slower' if e_cpu >= f_cpu else 'SLOWER'} than fit). "
        "Wall-clock ratios on a shared 2-core machine move by several percent between runs; on a quiet "
        "machine or an accelerator, rerun this script to get them cleanly.",
        END,
    ]
    return "\n".join(lines)


def write_section(text: str) -> None:
    DOC.parent.mkdir(exist_ok=True)
    old = DOC.read_text() if DOC.exists() else "# Performance\n"
    if START in old and END in old:
        head, rest = old.split(START, 1)
        new = head + text + rest.split(END, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    DOC.write_text(new)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="fashion_mnist_cnn")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--steps-per-loop", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    args = parser.parse_args(argv)
    spec = RunSpec(model=args.model, batch_size=args.batch_size, width=args.width, image_size=args.image_size,
                   steps=args.steps, warmup=args.steps_per_loop, steps_per_loop=args.steps_per_loop, device="cpu")
    result = measure(spec)
    text = render(spec, result)
    print(text)
    if not args.no_write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
