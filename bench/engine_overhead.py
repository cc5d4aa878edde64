"""Does the engine cost throughput? Same model, same data, one process, three ways:

  engine — dashbench.engine.loop.run (strategy, custom loop, steps_per_loop, host sync per loop)
  hand   — a minimal hand-written tf.function step, called in a Python loop, synced at the end
  fit    — Keras model.fit on a repeated tf.data batch (the seeds' way)

After each of the engine's host loops, the same number of steps runs by hand and by fit, so
drifting load on a shared machine hits all three alike. The report is the median of per-round
ratios with their spread, by wall and CPU time, and the machine's load (bench/paired.py).
Compilation and warm-up are excluded from all three. Writes the table into docs/PERFORMANCE.md between <!-- engine --> markers.

The JAX column (between <!-- engine-jax --> markers) compares the engine on Keras's JAX backend
(dashbench.engine.jax.loop) with a minimal hand-written `jax.jit` step on the same model, optimizer
and numpy batch: model.stateless_call + optimizer.stateless_apply, donated state, one step per call,
float(loss) after every call. Keras picks its backend once per process, so each JAX measurement runs
in a child process of this script (`--jax-child`); in it, after each engine host loop the same number
of steps runs by hand (engine, hand, engine, hand, ...), and the ratios are taken round by round.

    python bench/engine_overhead.py                  # short CPU settings, writes docs/PERFORMANCE.md
    python bench/engine_overhead.py --model fashion_mnist_cnn --batch-size 1024 --width 64 --steps 50
    python bench/engine_overhead.py --only jax       # the JAX column only (steps_per_loop 1, 10 and 50)
    python bench/engine_overhead.py --model llama --seq-len 64 --width 64 --layers 2 --batch-size 8 \
        --steps 300 --steps-per-loop 1 --skip-fit \
        --jax-width 64 --jax-batch-size 8 --jax-pairs 200 --jax-steps-per-loop 1,10   # the LM

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
from datetime import date
from pathlib import Path

import paired  # bench/, on sys.path when a script here runs
from docs_block import write_block

from dashbench.core.spec import RunSpec
from dashbench.engine import envinfo, loop, workloads
from dashbench.engine.tensorflow import devices
from dashbench.workloads import registry

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "PERFORMANCE.md"
CHILD_RESULT = "JAX-CHILD-RESULT "  # the line the child prints its result on (JSON after the marker)


def _setup(spec: RunSpec):
    """TensorFlow, the model, its optimizer and one synthetic batch, seeded as the engine seeds them."""
    tf = devices.import_tensorflow()
    import keras

    shapes = registry.get(spec.model).shapes(spec)
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
    model.compile(
        optimizer=optimizer, loss=lambda y, p: workloads.per_example_loss(spec.model, y, p), jit_compile=False
    )
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


def measure(spec: RunSpec, with_fit: bool = True) -> dict:
    """Run the engine; after each of its measured host loops, run the same steps by hand and by fit.

    Interleaving at the scale of one host loop means that a burst of load from other processes
    hits all three alike; the ratios are taken round by round (bench/paired.py). Wall time is what a
    user gets; process CPU time (all threads) is the work done, which other processes' load barely
    changes, so on a shared machine it shows overhead that wall-clock noise hides. On a CPU,
    TensorFlow runs a function synchronously, so no device idles while the host works and CPU time
    misses no stall. Returns the per-round seconds, the load and the engine's own host-load record.
    """
    k = spec.steps_per_loop
    load_before = paired.load_now()
    others = {"hand": hand_loop(spec), **({"fit": fit_loop(spec)} if with_fit else {})}
    seconds = {name: {"wall": [], "cpu": []} for name in ("engine", *others)}
    one_minute: list[float] = []
    last_cpu = [None]

    def after_each_loop(event: dict) -> None:
        if event.get("event") != "sample":
            return
        now = time.process_time()
        if not event["warmup"] and last_cpu[0] is not None:
            seconds["engine"]["wall"].append(event["duration_s"])
            seconds["engine"]["cpu"].append(now - last_cpu[0])  # the engine's loop and its own bookkeeping
            rounds = len(seconds["engine"]["wall"])
            order = list(others) if rounds % 2 else list(others)[::-1]  # neither always first
            for name in order:
                wall, cpu = others[name](k)
                seconds[name]["wall"].append(wall)
                seconds[name]["cpu"].append(cpu)
            one_minute.append(os.getloadavg()[0])
            rates = "  ".join(f"{n} {spec.batch_size * k / s['wall'][-1]:8.1f}" for n, s in seconds.items())
            print(f"loop {rounds}: examples/s  {rates}", file=sys.stderr, flush=True)
        last_cpu[0] = time.process_time()

    result = loop.run(spec, on_event=after_each_loop)
    return {
        "seconds": seconds,
        "load_before": load_before,
        "load_after": paired.load_now(),
        "one_minute": one_minute,
        "host_load": result.host_load,
    }


def summarize(spec: RunSpec, raw: dict) -> dict:
    """The engine against the hand loop and against fit, round by round; ms per step of each."""
    seconds, k = raw["seconds"], spec.steps_per_loop
    return {
        "ms_per_step": {name: 1000 * statistics.median(s["wall"]) / k for name, s in seconds.items()},
        "against": {name: paired.compare(seconds["engine"], seconds[name]) for name in seconds if name != "engine"},
        **_measured_at(),
        **{key: raw[key] for key in ("seconds", "load_before", "load_after", "one_minute", "host_load")},
    }


def _measured_at() -> dict:
    """When and at which commit figures were measured (a --render-json later keeps them)."""
    return {"measured": date.today().isoformat(), "commit": envinfo.git_commit()}


def render(spec: RunSpec, summary: dict) -> str:
    env = envinfo.record([], spec.precision, spec.xla)
    measured, commit = summary.get("measured", date.today().isoformat()), summary.get("commit", env["git_commit"])
    k, ms = spec.steps_per_loop, summary["ms_per_step"]
    rounds = summary["against"]["hand"]["wall"]["rounds"]
    with_fit = "fit" in summary["against"]
    lines = [
        "## Engine overhead (`bench/engine_overhead.py`)" + _heading_tail(spec.model),
        "",
        f"`{spec.model}`, global batch {spec.batch_size}, shapes {registry.get(spec.model).shapes(spec).to_dict()}, "
        f"{spec.precision}, on the CPU, measured {measured}. One process, the loops of the same model and data "
        f"taking turns in {rounds} rounds of {_steps(k)}: the engine's host loop (one `tf.function` call: "
        + (
            "the step under its distribution strategy"
            if k == 1
            else "a `tf.range` loop under its distribution strategy"
        )
        + f", then the loss and step counter read back), then {k} call{'s' if k > 1 else ''} of a minimal "
        "hand-written one-step `tf.function` (the loss read after the last)"
        + (f" and one Keras `model.fit` epoch of {_steps(k)}, those two in alternating order. " if with_fit else ". ")
        + f"{paired.METHOD} "
        f"Host: {env['cpu_model']}, TensorFlow {env['tensorflow']}, Keras {env['keras']}, commit "
        f"{commit}; {paired.render_load(summary['load_before'], summary['load_after'], summary['one_minute'])}"
        f"{_other_cores(summary['host_load'])}.",
        "",
        "| engine against | rounds | ms/step engine | ms/step other | wall ratio: median [IQR] (95% CI) | "
        "CPU ratio: median [IQR] (95% CI) | verdict |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for name, label in (("hand", "hand-written tf.function"), ("fit", "Keras model.fit")):
        if name not in summary["against"]:
            continue
        ratios = summary["against"][name]
        goal = paired.verdict(ratios) if name == "hand" else "(a reference, not the goal)"
        lines.append(
            f"| {label} | {ratios['wall']['rounds']} | {ms['engine']:.2f} | {ms[name]:.2f} | "
            f"{paired.render_spread(ratios['wall'])} | {paired.render_spread(ratios['cpu'])} | {goal} |"
        )
    return "\n".join(lines)


def _steps(k: int) -> str:
    return f"{k} step{'s' if k > 1 else ''}"


def _other_cores(host_load, short: bool = False) -> str:
    """What the engine's own record says the rest of the machine used during its measured loops."""
    if not host_load or "other_cores" not in host_load:
        return ""
    if short:
        return f"; others used {host_load['other_cores']:.2f} of {host_load['cores']} cores"
    return f"; other processes used {host_load['other_cores']:.2f} of {host_load['cores']} cores over the rounds"


# --- JAX: the engine's jax_loop against a hand-written jax.jit step (in a child process) ---------


def jax_hand_loop(spec: RunSpec):
    """A minimal hand-written JAX step; returns chunk(n) → (wall, CPU) seconds for n calls, each
    followed by float(loss). Built (and compiled) before the engine sets its distribution."""
    from dashbench.engine.jax import devices as jax_devices

    jax = jax_devices.import_jax()
    import keras

    shapes = registry.get(spec.model).shapes(spec)
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
    holder = [
        (
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
            [v.value for v in optimizer.variables],
        )
    ]

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
    number of hand-written steps. Returns the per-round seconds (wall and CPU) and the load."""
    load_before = paired.load_now()
    hand = jax_hand_loop(spec)
    seconds = {name: {"wall": [], "cpu": []} for name in ("engine", "hand")}
    one_minute: list[float] = []
    last_cpu = [None]
    k = spec.steps_per_loop

    def after_each_loop(event: dict) -> None:
        if event.get("event") != "sample":
            return
        now = time.process_time()
        if not event["warmup"] and last_cpu[0] is not None:
            seconds["engine"]["wall"].append(event["duration_s"])
            seconds["engine"]["cpu"].append(now - last_cpu[0])  # the engine's loop and its own bookkeeping
            wall, cpu = hand(k)
            seconds["hand"]["wall"].append(wall)
            seconds["hand"]["cpu"].append(cpu)
            one_minute.append(os.getloadavg()[0])
            print(
                f"jax k={k} loop {len(one_minute)}: ms/step engine {1000 * event['duration_s'] / k:7.2f}  "
                f"hand {1000 * wall / k:7.2f}",
                file=sys.stderr,
                flush=True,
            )
        last_cpu[0] = time.process_time()

    result = loop.run(spec, on_event=after_each_loop)
    import jax

    return {
        "seconds": seconds,
        "load_before": load_before,
        "load_after": paired.load_now(),
        "one_minute": one_minute,
        "host_load": result.host_load,
        "jax": jax.__version__,
        "devices": [str(d) for d in jax.devices()],
    }


def summarize_jax(spec: RunSpec, raw: dict) -> dict:
    """ms per step of each loop and the engine/hand ratios (>1: the engine is faster), round by round."""
    seconds, k = raw["seconds"], spec.steps_per_loop
    return {
        "steps_per_loop": k,
        "engine_ms": 1000 * statistics.median(seconds["engine"]["wall"]) / k,
        "hand_ms": 1000 * statistics.median(seconds["hand"]["wall"]) / k,
        "ratios": paired.compare(seconds["engine"], seconds["hand"]),
        **_measured_at(),
        **{
            key: raw[key]
            for key in ("seconds", "load_before", "load_after", "one_minute", "host_load", "jax", "devices")
        },
    }


def _jax_spec(args, steps_per_loop: int) -> RunSpec:
    if args.jax_steps is None:
        steps = args.jax_pairs * steps_per_loop  # one pair per engine host loop
    else:
        steps = max(steps_per_loop, args.jax_steps // steps_per_loop * steps_per_loop)
    return RunSpec(
        model=args.model,
        batch_size=args.jax_batch_size,
        width=args.jax_width,
        image_size=args.image_size,
        steps=steps,
        warmup=max(steps_per_loop, 5),
        steps_per_loop=steps_per_loop,
        device="cpu",
        backend="jax",
        **_lm_shape(args),
    )


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
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--jax-child",
        "--model",
        args.model,
        "--jax-batch-size",
        str(args.jax_batch_size),
        "--jax-width",
        str(args.jax_width),
        "--jax-pairs",
        str(args.jax_pairs),
        "--steps-per-loop",
        str(steps_per_loop),
    ]
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
    return json.loads(lines[-1][len(CHILD_RESULT) :])


def render_jax(args, rows: list[dict]) -> str:
    spec = _jax_spec(args, rows[0]["steps_per_loop"])
    env = envinfo.record([], spec.precision, True)
    measured, commit = rows[0].get("measured", date.today().isoformat()), rows[0].get("commit", env["git_commit"])
    lines = [
        "## Engine overhead on JAX (`bench/engine_overhead.py`, JAX column)" + _heading_tail(spec.model),
        "",
        f"`{spec.model}`, global batch {spec.batch_size}, shapes {registry.get(spec.model).shapes(spec).to_dict()}, "
        f"{spec.precision}, on the CPU ({', '.join(rows[0]['devices'])}), measured {measured}. The "
        "dashbench engine on Keras's JAX backend (`engine/jax/loop.py`: DataParallel, one jitted function of "
        "`steps_per_loop` steps — written out on a CPU, with XLA's memory-optimised schedule when there are several "
        "— donated state, one host call per `steps_per_loop` steps, after which the host waits for the loss and the "
        "step counter) against a minimal hand-written `jax.jit` step on the same model, optimizer and numpy batch "
        "(`stateless_call` + `stateless_apply`, donated state, XLA's defaults, one step per call, `float(loss)` after "
        "every call). Each row is its own child process; in it the engine's host loops and the same number of "
        f"hand-written steps take turns (engine, hand, engine, hand, ...). {paired.METHOD} Host: "
        f"{env['cpu_model']} ({rows[0]['load_before']['cpus']} CPUs), JAX {rows[0]['jax']}, Keras {env['keras']}, "
        f"commit {commit}.",
        "",
        "| steps_per_loop | rounds | ms/step engine | ms/step hand | wall ratio: median [IQR] (95% CI) | "
        "CPU ratio: median [IQR] (95% CI) | load average (1/5/15 min) before → after (1-min range over the rounds) |",
        "|---:|---:|---:|---:|---|---|---|",
    ]
    for row in rows:
        ratios = row["ratios"]
        lines.append(
            f"| {row['steps_per_loop']} | {ratios['wall']['rounds']} | {row['engine_ms']:.2f} | {row['hand_ms']:.2f} | "
            f"{paired.render_spread(ratios['wall'])} | {paired.render_spread(ratios['cpu'])} | "
            f"{paired.render_load(row['load_before'], row['load_after'], row['one_minute'], short=True)}"
            f"{_other_cores(row['host_load'], short=True)} |"
        )
    lines.append("")
    for row in rows:
        lines.append(f"- {_measured_words(row['steps_per_loop'])}: the engine {paired.verdict(row['ratios'])}.")
    return "\n".join(lines)


def _measured_words(k: int) -> str:
    """What one pair of a row compares, in words."""
    if k == 1:
        return "steps_per_loop 1 (one step per host call on both sides)"
    return (
        f"steps_per_loop {k} (the engine: {k} steps in one jitted call, then the loss and step counter read "
        f"back; by hand: {k} calls of one step, `float(loss)` after each)"
    )


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
    parser.add_argument("--skip-fit", action="store_true", help="TensorFlow: the engine and the hand loop only")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the figures to PATH as JSON")
    parser.add_argument(
        "--render-json",
        default=None,
        metavar="PATH",
        help="measure nothing: write the tables from figures --json saved (give the same shapes)",
    )
    parser.add_argument("--only", choices=("tf", "jax"), default=None, help="measure one backend only")
    # XLA:CPU runs this CNN's convolutions ~10x slower than TensorFlow's oneDNN (batch 128, width 16:
    # ~0.4 s a step by hand, several seconds in the engine), so the JAX rows default to smaller shapes.
    parser.add_argument("--jax-batch-size", type=int, default=32)
    parser.add_argument("--jax-width", type=int, default=4)
    parser.add_argument(
        "--jax-pairs",
        type=int,
        default=100,
        help="engine/hand rounds per JAX row (measured steps: rounds × steps_per_loop)",
    )
    parser.add_argument(
        "--jax-steps", type=int, default=None, help="measured steps per JAX row, instead of --jax-pairs"
    )
    parser.add_argument(
        "--jax-steps-per-loop",
        default="1,10,50",
        help="the JAX rows' steps_per_loop, comma-separated (the first is the verdict)",
    )
    parser.add_argument("--jax-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.jax_child:
        return jax_child(args)
    saved = json.loads(Path(args.render_json).read_text()) if args.render_json else None
    results: dict = {}
    if args.only != "jax" and (saved is None or "tf" in saved):
        spec = RunSpec(
            model=args.model,
            batch_size=args.batch_size,
            width=args.width,
            image_size=args.image_size,
            steps=args.steps,
            warmup=args.steps_per_loop,
            steps_per_loop=args.steps_per_loop,
            device="cpu",
            **_lm_shape(args),
        )
        summary = saved["tf"] if saved else summarize(spec, measure(spec, with_fit=not args.skip_fit))
        results["tf"] = summary
        _save(args, results)
        text = render(spec, summary)
        print(text)
        if not args.no_write:
            write_block(DOC, _marker(args, "engine"), text)
    if args.only != "tf" and (saved is None or "jax" in saved):
        rows = saved["jax"] if saved else [run_jax_child(args, int(k)) for k in args.jax_steps_per_loop.split(",")]
        results["jax"] = rows
        _save(args, results)
        text = render_jax(args, rows)
        print(text)
        if not args.no_write:
            write_block(DOC, _marker(args, "engine-jax"), text)
    return 0


def _save(args, results: dict) -> None:
    """--json: the figures so far, so a later failure loses none of them."""
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
