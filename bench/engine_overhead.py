"""Does the engine cost throughput? Same model, same data, one process, three ways:

  engine — dashbench.engine.loop.run (strategy, custom loop, steps_per_loop, host sync per loop)
  hand   — a minimal hand-written tf.function step, called in a Python loop, synced at the end
  fit    — Keras model.fit on a repeated tf.data batch (the seeds' way)

After each of the engine's host loops, the same number of steps runs by hand and by fit, so
drifting load on a shared machine hits all three alike; the report is the median over loops.
Compilation and warm-up are excluded from all three. Writes the table into docs/PERFORMANCE.md between <!-- engine --> markers.

The JAX column (between <!-- engine-jax --> markers) compares the engine on Keras's JAX backend
(dashbench.engine.jax.loop) with a minimal hand-written `jax.jit` step on the same model, optimizer
and numpy batch: model.stateless_call + optimizer.stateless_apply, donated state, one step per call,
float(loss) after every call. Keras picks its backend once per process, so each JAX measurement runs
in a child process of this script (`--jax-child`); in it, after each engine host loop the same number
of steps runs by hand (engine, hand, engine, hand, ...), and the ratios are taken pair by pair.

    python bench/engine_overhead.py                  # short CPU settings, writes docs/PERFORMANCE.md
    python bench/engine_overhead.py --model fashion_mnist_cnn --batch-size 1024 --width 64 --steps 50
    python bench/engine_overhead.py --only jax       # the JAX column only (steps_per_loop 1, 10 and 50)
    python bench/engine_overhead.py --model llama --seq-len 64 --width 64 --layers 2 --batch-size 8 \
        --jax-width 64 --jax-batch-size 8 --steps 60 --jax-pairs 20 --jax-steps-per-loop 1,10   # the LM

A model other than the default writes its own blocks (<!-- engine-llama -->, <!-- engine-jax-llama -->).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from docs_block import write_block  # bench/, on sys.path when a script here runs

from dashbench.models import catalog
from dashbench.engine import envinfo, loop, workloads
from dashbench.engine.tensorflow import devices
from dashbench.core.spec import RunSpec

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "PERFORMANCE.md"
CHILD_RESULT = "JAX-CHILD-RESULT "  # the line the child prints its result on (JSON after the marker)


def _setup(spec: RunSpec):
    """TensorFlow, the model, its optimizer and one synthetic batch, seeded as the engine seeds them."""
    tf = devices.import_tensorflow()
    import keras

    shapes = catalog.get(spec.model).shapes(spec)
    keras.utils.set_random_seed(spec.seed)
    model = workloads.build_model(spec.model, shapes)
    batch = workloads.synthetic_batch(spec.model, shapes, spec.batch_size, spec.seed)
    return tf, model, workloads.make_optimizer(spec.model, shapes), batch


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
    load_before = os.getloadavg()
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
    out["load"] = (load_before, os.getloadavg())
    return out


def render(spec: RunSpec, result: dict) -> str:
    env = envinfo.record([], spec.precision, spec.xla)
    hand = result["hand"]
    loads = " → ".join(" / ".join(f"{v:.2f}" for v in values) for values in result.pop("load"))
    ratio = {name: {key: result[name][key] / hand[key] for key in ("median", "total", "cpu")} for name in result}
    loops = result["engine"]["loops"]
    lines = [
        "## Engine overhead (`bench/engine_overhead.py`)" + _heading_tail(spec.model),
        "",
        f"Same model and data in one process: `{spec.model}`, global batch {spec.batch_size}, "
        f"shapes {catalog.get(spec.model).shapes(spec).to_dict()}, {spec.precision}, on the CPU. "
        f"{loops} measured host loops of {spec.steps_per_loop} steps: the engine runs them in one `tf.function` call "
        "(a `tf.range` loop inside, under its distribution strategy) and then reads the loss and step counter back; "
        f"after each engine loop, {spec.steps_per_loop} calls of a minimal hand-written one-step `tf.function` "
        f"(the loss read after the last) and one Keras `model.fit` epoch of {spec.steps_per_loop} steps ran too, so "
        f"load from other processes hits all three alike. Host: {env['cpu_model']} ({env['cpu_count']} cores), TensorFlow "
        f"{env['tensorflow']}, Keras {env['keras']}, commit {env['git_commit']}; load average (1/5/15 min) "
        f"{loads}, before → after.",
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
        f"{e_cpu:.3f}× the hand loop's throughput ({'at most 2% behind' if e_cpu >= 0.98 else 'MORE than 2% behind'}), "
        f"model.fit {f_cpu:.3f}× (engine {'no slower' if e_cpu >= f_cpu else 'SLOWER'} than fit). "
        "Wall-clock ratios on a shared 2-core machine move by several percent between runs; on a quiet "
        "machine or an accelerator, rerun this script to get them cleanly.",
    ]
    return "\n".join(lines)


# --- JAX: the engine's jax_loop against a hand-written jax.jit step (in a child process) ---------


def jax_hand_loop(spec: RunSpec):
    """A minimal hand-written JAX step; returns chunk(n) → (wall, CPU) seconds for n calls, each
    followed by float(loss). Built (and compiled) before the engine sets its distribution."""
    from dashbench.engine.jax import devices as jax_devices

    jax = jax_devices.import_jax()
    import keras

    shapes = catalog.get(spec.model).shapes(spec)
    keras.utils.set_random_seed(spec.seed)
    model = workloads.build_model(spec.model, shapes)
    optimizer = workloads.make_optimizer(spec.model, shapes)
    optimizer.build(model.trainable_variables)
    x, y = (jax.device_put(a) for a in workloads.synthetic_batch(spec.model, shapes, spec.batch_size, spec.seed))

    def compute_loss(trainable, non_trainable, x, y):
        predictions, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
        return keras.ops.mean(workloads.per_example_loss(spec.model, y, predictions)), non_trainable

    gradients = jax.value_and_grad(compute_loss, has_aux=True)

    def step(state, x, y):
        trainable, non_trainable, optimizer_state = state
        (loss, non_trainable), grads = gradients(trainable, non_trainable, x, y)
        trainable, optimizer_state = optimizer.stateless_apply(optimizer_state, grads, trainable)
        return loss, (trainable, non_trainable, optimizer_state)

    step = jax.jit(step, donate_argnums=0)
    holder = [(
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
    )]

    def chunk(n: int) -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            loss, holder[0] = step(holder[0], x, y)
            float(loss)
        return time.perf_counter() - start, time.process_time() - cpu

    chunk(1 + spec.warmup)  # trace, compile, warm up
    return chunk


def measure_jax(spec: RunSpec) -> dict:
    """In a process whose Keras runs on JAX: the engine's host loops, each followed by the same
    number of hand-written steps. Returns the per-pair seconds (wall and CPU) and the load."""
    load_before = os.getloadavg()
    hand = jax_hand_loop(spec)
    wall = {"engine": [], "hand": []}
    cpu = {"engine": [], "hand": []}
    last_cpu = [None]
    k = spec.steps_per_loop

    def after_each_loop(event: dict) -> None:
        if event.get("event") != "sample":
            return
        now = time.process_time()
        if not event["warmup"] and last_cpu[0] is not None:
            wall["engine"].append(event["duration_s"])
            cpu["engine"].append(now - last_cpu[0])  # the engine's loop and its own bookkeeping
            seconds, cpu_seconds = hand(k)
            wall["hand"].append(seconds)
            cpu["hand"].append(cpu_seconds)
            ratio = wall["hand"][-1] / wall["engine"][-1]
            print(f"jax k={k} loop {len(wall['engine'])}: ms/step engine {1000 * wall['engine'][-1] / k:7.2f}  "
                  f"hand {1000 * seconds / k:7.2f}  engine/hand throughput {ratio:.3f}", file=sys.stderr, flush=True)
        last_cpu[0] = time.process_time()

    result = loop.run(spec, on_event=after_each_loop)
    import jax

    return {
        "wall": wall, "cpu": cpu, "load_before": load_before, "load_after": os.getloadavg(),
        "jax": jax.__version__, "devices": [str(d) for d in jax.devices()], "engine_device": result.device,
    }


def summarize_jax(spec: RunSpec, raw: dict) -> dict:
    """Throughputs and engine/hand ratios (>1: the engine is faster): the median of the per-pair
    ratios, and the ratios of the totals, for wall and CPU time."""
    n = spec.batch_size * spec.steps_per_loop
    wall, cpu = raw["wall"], raw["cpu"]
    pairs = list(zip(wall["hand"], wall["engine"]))
    cpu_pairs = list(zip(cpu["hand"], cpu["engine"]))
    return {
        "steps_per_loop": spec.steps_per_loop,
        "loops": len(pairs),
        "engine_ms": 1000 * statistics.median(wall["engine"]) / spec.steps_per_loop,
        "hand_ms": 1000 * statistics.median(wall["hand"]) / spec.steps_per_loop,
        "engine_eps": n * len(pairs) / sum(wall["engine"]),
        "hand_eps": n * len(pairs) / sum(wall["hand"]),
        "wall_median": statistics.median(h / e for h, e in pairs),
        "wall_total": sum(wall["hand"]) / sum(wall["engine"]),
        "cpu_median": statistics.median(h / e for h, e in cpu_pairs),
        "cpu_total": sum(cpu["hand"]) / sum(cpu["engine"]),
        "load_before": raw["load_before"],
        "load_after": raw["load_after"],
        "jax": raw["jax"],
        "devices": raw["devices"],
    }


def _jax_spec(args, steps_per_loop: int) -> RunSpec:
    if args.jax_steps is None:
        steps = args.jax_pairs * steps_per_loop  # one pair per engine host loop
    else:
        steps = max(steps_per_loop, args.jax_steps // steps_per_loop * steps_per_loop)
    return RunSpec(model=args.model, batch_size=args.jax_batch_size, width=args.jax_width,
                   image_size=args.image_size, steps=steps, warmup=max(steps_per_loop, 5),
                   steps_per_loop=steps_per_loop, device="cpu", backend="jax", **_lm_shape(args))


def _lm_shape(args) -> dict:
    """The LM's --seq-len and --layers, where given."""
    return {k: getattr(args, k, None) for k in ("seq_len", "layers") if getattr(args, k, None) is not None}


def _heading_tail(model: str) -> str:
    return "" if model == "fashion_mnist_cnn" else f": {model}"


def _marker(args, base: str) -> str:
    """The docs block a model's table goes to: the default model's keeps its historical name."""
    return base if args.model == "fashion_mnist_cnn" else f"{base}-{args.model}"


def jax_child(args) -> int:
    """The --jax-child side: Keras on JAX in this process, one measurement, its result as JSON on stdout."""
    from dashbench.engine import backends

    backends.select("jax")
    spec = _jax_spec(args, args.steps_per_loop)
    raw = measure_jax(spec)
    print(CHILD_RESULT + json.dumps(summarize_jax(spec, raw)), flush=True)
    return 0


def run_jax_child(args, steps_per_loop: int) -> dict:
    """Run one JAX measurement in a fresh process (Keras cannot switch backends inside one)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--jax-child", "--model", args.model,
               "--jax-batch-size", str(args.jax_batch_size), "--jax-width", str(args.jax_width),
               "--jax-pairs", str(args.jax_pairs), "--steps-per-loop", str(steps_per_loop)]
    if args.jax_steps is not None:
        command += ["--jax-steps", str(args.jax_steps)]
    if args.image_size is not None:
        command += ["--image-size", str(args.image_size)]
    for name, value in _lm_shape(args).items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith(CHILD_RESULT)]
    if done.returncode or not lines:
        raise RuntimeError(f"the JAX child (steps_per_loop {steps_per_loop}) failed, exit {done.returncode}")
    return json.loads(lines[-1][len(CHILD_RESULT):])


def render_jax(args, rows: list[dict]) -> str:
    spec = _jax_spec(args, rows[0]["steps_per_loop"])
    env = envinfo.record([], spec.precision, True)
    load = lambda values: " / ".join(f"{v:.2f}" for v in values)
    lines = [
        "## Engine overhead on JAX (`bench/engine_overhead.py`, JAX column)" + _heading_tail(spec.model),
        "",
        f"`{spec.model}`, global batch {spec.batch_size}, shapes {catalog.get(spec.model).shapes(spec).to_dict()}, "
        f"{spec.precision}, on the CPU ({', '.join(rows[0]['devices'])}). The dashbench engine on Keras's JAX "
        "backend (`engine/jax/loop.py`: DataParallel, one jitted function of `steps_per_loop` steps — written out "
        "on a CPU, with XLA's memory-optimised schedule when there are several — donated state, one host call per "
        "`steps_per_loop` steps, after which the host waits for the loss and the step counter) against a minimal "
        "hand-written `jax.jit` step on the same model, optimizer and numpy batch (`stateless_call` + "
        "`stateless_apply`, donated state, XLA's defaults, one step per call, `float(loss)` after every call). "
        "Each row is its own child process; in it, "
        "after every measured engine host loop the same number of steps ran by hand (engine, hand, engine, "
        "hand, ...), compilation and warm-up excluded. Ratios are engine throughput / hand throughput "
        "(above 1: the engine is faster), as the median of the per-pair ratios and as the ratio of the "
        f"totals. Host: {env['cpu_model']} ({env['cpu_count']} cores), JAX {rows[0]['jax']}, Keras "
        f"{env['keras']}, commit {env['git_commit']}.",
        "",
        "| steps_per_loop | pairs | ms/step engine | ms/step hand | wall ratio: median / total | "
        "CPU ratio: median / total | load average (1/5/15 min) before → after |",
        "|---:|---:|---:|---:|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['steps_per_loop']} | {row['loops']} | {row['engine_ms']:.2f} | {row['hand_ms']:.2f} | "
            f"{row['wall_median']:.3f} / {row['wall_total']:.3f} | {row['cpu_median']:.3f} / {row['cpu_total']:.3f} | "
            f"{load(row['load_before'])} → {load(row['load_after'])} |"
        )
    lines.append("")
    for row in rows:
        lines.append(f"- {_measured_words(row['steps_per_loop'])}: the engine is {_verdict(row)} the hand "
                     f"step by CPU time (median {row['cpu_median']:.3f}, total {row['cpu_total']:.3f}); wall "
                     f"{row['wall_median']:.3f} / {row['wall_total']:.3f}.")
    lines += [
        "",
        "The machine is shared (2 cores, see the load average), so wall ratios move by a few percent between runs; "
        "CPU time, which other processes' load barely changes, is the steadier figure.",
    ]
    return "\n".join(lines)


def _measured_words(k: int) -> str:
    """What one pair of a row compares, in words."""
    if k == 1:
        return "steps_per_loop 1 (one step per host call on both sides)"
    return (f"steps_per_loop {k} (the engine: {k} steps in one jitted call, then the loss and step counter read "
            f"back; by hand: {k} calls of one step, `float(loss)` after each)")


def _verdict(row: dict) -> str:
    return "at most 2% behind" if min(row["cpu_median"], row["cpu_total"]) >= 0.98 else "MORE than 2% behind"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="fashion_mnist_cnn")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--seq-len", type=int, default=None, help="the LM's (or BiLSTM's) sequence length")
    parser.add_argument("--layers", type=int, default=None, help="the LM's layers")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--steps-per-loop", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    parser.add_argument("--only", choices=("tf", "jax"), default=None, help="measure one backend only")
    # XLA:CPU runs this CNN's convolutions ~10x slower than TensorFlow's oneDNN (batch 128, width 16:
    # ~0.4 s a step by hand, several seconds in the engine), so the JAX rows default to smaller shapes.
    parser.add_argument("--jax-batch-size", type=int, default=32)
    parser.add_argument("--jax-width", type=int, default=4)
    parser.add_argument("--jax-pairs", type=int, default=100,
                        help="engine/hand pairs per JAX row (measured steps: pairs × steps_per_loop)")
    parser.add_argument("--jax-steps", type=int, default=None, help="measured steps per JAX row, instead of --jax-pairs")
    parser.add_argument("--jax-steps-per-loop", default="1,10,50",
                        help="the JAX rows' steps_per_loop, comma-separated (the first is the verdict)")
    parser.add_argument("--jax-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jax_child:
        return jax_child(args)
    if args.only != "jax":
        spec = RunSpec(model=args.model, batch_size=args.batch_size, width=args.width, image_size=args.image_size,
                       steps=args.steps, warmup=args.steps_per_loop, steps_per_loop=args.steps_per_loop, device="cpu",
                       **_lm_shape(args))
        result = measure(spec)
        text = render(spec, result)
        print(text)
        if not args.no_write:
            write_block(DOC, _marker(args, "engine"), text)
    if args.only != "tf":
        rows = [run_jax_child(args, int(k)) for k in args.jax_steps_per_loop.split(",")]
        text = render_jax(args, rows)
        print(text)
        if not args.no_write:
            write_block(DOC, _marker(args, "engine-jax"), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
