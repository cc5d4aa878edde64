"""The measured training loop on Keras's JAX backend: RunSpec in, RunResult out.

How it measures (the same rules as the TensorFlow loop, engine/tensorflow/loop.py):
- data parallel through `keras.distribution.DataParallel` over the run's devices: variables are
  replicated, each batch is split along its first axis, XLA inserts the gradient all-reduce;
- one jitted function runs `steps_per_loop` steps (written out on a CPU, a `fori_loop` elsewhere) of a step built from
  `model.stateless_call` and the optimizer's `stateless_apply`; the state is donated, so the
  device holds one copy of it; on a CPU, several steps are scheduled for memory (`loop_compiler_options`);
- synthetic data is the same numpy global batch as on TensorFlow, put on the devices once;
  real data comes from the host, `steps_per_loop` batches per host call;
- the first host call (tracing + XLA compilation + one loop) is `compile_s`, apart from the samples;
- on a CPU, one step is compiled before the run, for the memory guard (`before_run`): its XLA
  memory and cost analysis (engine/jax/compiled_step.py) give the estimate and the compiler's FLOPs.
  Where the run's loop is that one step on one device, the run's own model and loop are built and
  compiled then, and the run takes them: its first call finds the loop compiled, and that compile's
  seconds are counted in its compile_s; otherwise the step is compiled apart from the run's loop;
- each host call is timed until the loss is on the host and the optimizer's step counter (the last
  thing a step writes) is ready, so asynchronous dispatch cannot make a step look faster.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

from dashbench.core import stats
from dashbench.core.spec import RunSpec
from dashbench.engine import backends, measured, workloads
from dashbench.engine.jax import compiled_step
from dashbench.engine.jax import devices as jax_devices
from dashbench.engine.jax import seed as jax_seed
from dashbench.results.result import RunResult
from dashbench.workloads import catalog, memory_estimate, registry

Event = Callable[[dict], None]

# JAX's default float32 matmul precision on a GPU lets tensor cores use TF32 (jax_default_matmul_precision).
_TF32_PRECISIONS = (None, "default", "fastest", "bfloat16", "tensorfloat32", "DEFAULT", "FASTEST")


def run(spec: RunSpec, on_event: Optional[Event] = None) -> RunResult:
    emit = on_event or (lambda event: None)
    workload = registry.get(spec.model)
    shapes = catalog.check_spec(spec)
    keras_side = workloads.of(spec)
    emit({"event": "phase", "phase": "setup"})
    target = jax_devices.create(spec)
    import keras

    previous_policy = keras.mixed_precision.global_policy()
    previous_distribution = keras.distribution.distribution()
    jax_seed.set_random_seed(spec.seed)  # not keras.utils': it imports TensorFlow
    keras.mixed_precision.set_global_policy(spec.precision)
    distribution = keras.distribution.DataParallel(devices=target.strategy)
    keras.distribution.set_distribution(distribution)
    try:
        return _measure(keras, spec, workload, keras_side, shapes, target, distribution, emit)
    finally:
        keras.distribution.set_distribution(previous_distribution)
        keras.mixed_precision.set_global_policy(previous_policy)


def _measure(keras, spec, workload, keras_side, shapes, target, distribution, emit) -> RunResult:
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    program = _take_prepared(spec) or program_of(jax, keras, spec, keras_side, shapes, target, distribution)
    model, optimizer, step = program.model, program.optimizer, program.step
    flops = keras_side.flops_per_example(model)
    parameters = int(sum(int(np.prod(v.shape)) for v in model.trainable_variables))

    real = spec.data == "real"
    k = spec.steps_per_loop
    mesh, batch_axis, compiled = program.mesh, program.batch_axis, program.jitted
    counter = _iterations_index(optimizer)

    sharded = lambda leading: NamedSharding(mesh, PartitionSpec(*leading, batch_axis))
    process, processes = jax.process_index(), jax.process_count()
    local = spec.batch_size // processes  # this host's part of every global batch

    def to_devices(array, leading=()):
        return jax.make_array_from_process_local_data(sharded(leading), array)

    if real:
        # Each host reads its own batches of `local` examples; k of them stacked feed one host call.
        batches = keras_side.real_batches(spec.data_path, local, spec.seed + process)

        def inputs():
            xs, ys = zip(*(next(batches) for _ in range(k)))
            return to_devices(np.stack(xs), (None,)), to_devices(np.stack(ys), (None,))
    else:
        # Every host makes the same global batch from the seed and puts its own part on its devices.
        x, y = keras_side.synthetic_batch(shapes, spec.batch_size, spec.seed)
        part = slice(process * local, (process + 1) * local)
        # A model of several inputs takes a tuple of arrays: each goes to the devices alike.
        placed = (jax.tree_util.tree_map(lambda a: to_devices(a[part]), x), to_devices(y[part]))
        inputs = lambda: placed

    holder = {"state": program.state, "inputs": ()}
    # A program compiled before the run (_prepare_program) is found compiled by its first call: that
    # compile's seconds are added to the first call's, so compile_s stays tracing + compilation + one loop.
    compiled_before = [program.compile_s]

    def host_loop() -> tuple[float, float]:
        start = time.perf_counter()
        holder["inputs"] = inputs()
        loss, holder["state"] = compiled(holder["state"], *holder["inputs"])
        loss_value = float(loss)  # the host sync: the loss comes back from the device
        jax.block_until_ready(holder["state"][2][counter] if counter is not None else holder["state"])
        return time.perf_counter() - start + (compiled_before.pop() if compiled_before else 0.0), loss_value

    gpus = tuple(d.id for d in target.strategy if d.platform == "gpu" and d.process_index == jax.process_index())
    compile_s, samples, host_load = measured.run_loops(host_loop, spec, emit, jax_devices.native_stderr_silenced, gpus)
    flops["compiler"] = _compiler_flops(step, holder, real, spec, workload, shapes)
    analysed = compiled_step.reused(spec) or {}
    placement = {
        "variables": _devices_of(jax.tree_util.tree_leaves(holder["state"])),
        "ops": _devices_of(holder["inputs"]),  # where the step's inputs, and so its work, were split
    }
    return measured.result(
        setting(jax, spec, workload, shapes, target, parameters, mesh),
        flops,
        compile_s,
        samples,
        placement,
        emit,
        host_load=host_load,
        model_info=keras_side.identity(model),
        sizes=measured.variable_sizes(model, optimizer),
        bytes_accessed=None if real else analysed.get("bytes_accessed"),
    )


def setting(jax, spec, workload, shapes, target, parameters: int, mesh) -> measured.Setting:
    """What the result builder takes from a JAX run, the measured loop's and the Trainer's alike."""
    return measured.Setting(
        spec,
        workload,
        shapes,
        target,
        backend=("jax", jax.__version__),
        xla=True,  # JAX compiles every step with XLA
        tf32=target.kind == "gpu"
        and spec.precision == "float32"
        and jax.config.jax_default_matmul_precision in _TF32_PRECISIONS,
        cpu_probe=jax_devices.cpu_peak_tflops,
        strategy=f"keras.distribution.DataParallel over {len(target.strategy)} device(s)",
        parameters=parameters,
        env_extra={"mesh": {str(name): int(size) for name, size in mesh.shape.items()}},
    )


@dataclasses.dataclass
class Program:
    """What a run times: its model, built optimizer and step, the jitted loop of `steps_per_loop` steps,
    and the step's state placed on the mesh. `compile_s`: the seconds the loop was compiled for before
    the run (_prepare_program), 0 where its first call compiles it."""

    model: Any
    optimizer: Any
    step: Callable
    jitted: Callable
    state: tuple
    mesh: Any
    batch_axis: str
    compile_s: float = 0.0


def program_of(jax, keras, spec, keras_side, shapes, target, distribution) -> Program:
    """A run's Program, under the seed, precision policy and distribution already set."""
    from jax.sharding import NamedSharding, PartitionSpec

    model, optimizer, step = model_and_step(keras, spec, keras_side, shapes)
    k = spec.steps_per_loop
    train_loop = train_loop_of(step, k, written_out=target.kind == "cpu", stacked=spec.data == "real")
    mesh = distribution.device_mesh.backend_mesh
    # DataParallel replicates every variable; on one device Keras leaves them unplaced, and the
    # step's outputs (placed on the mesh) would then differ in type from its first inputs: a recompile.
    replicated = NamedSharding(mesh, PartitionSpec())
    placed_on_mesh = lambda a: a if a.sharding == replicated else jax.device_put(a, replicated)
    state = jax.tree_util.tree_map(placed_on_mesh, state_of(model, optimizer))
    state_shardings = jax.tree_util.tree_map(lambda a: a.sharding, state)
    # The loss replicated: every host of a multi-host run can read it.
    jitted = jax.jit(
        train_loop,
        donate_argnums=0,
        out_shardings=(replicated, state_shardings),
        compiler_options=loop_compiler_options(target.kind, k),
    )
    return Program(model, optimizer, step, jitted, state, mesh, distribution.batch_dim_name)


_prepared: dict = {}  # the one Program compiled before its run, under its spec


def _take_prepared(spec) -> Optional[Program]:
    """The Program _prepare_program compiled for this very spec, handed over once; one made for another
    spec is let go (its model's memory is not held through a run it is not for)."""
    found = _prepared.get("program") if _prepared.get("spec") == spec else None
    _prepared.clear()
    return found


# Batch the synthetic example arrays are made at before a run, to learn their shapes and dtypes: the
# step is compiled for the run's batch from them, and never made at that size then.
SHAPE_BATCH = 8


def before_run(spec) -> Optional[str]:
    """In a JAX run's own process, before its memory check: compile its step and tell the memory
    guard XLA's bytes. Returns the estimate's source ("xla"), or None where the counts stand: not a
    CPU run of synthetic data's throughput, a multi-host run (JAX must join its peers first), or a
    compile that failed."""
    if (
        spec.backend != "jax"
        or spec.to_accuracy
        or spec.data != "synthetic"
        or not memory_estimate.on_host_cpu(spec)
        or jax_devices.distributed_settings() is not None
    ):
        return None
    try:
        found = _analyse_before(spec)
    except Exception:  # the counts stand; the run itself says what is wrong with it
        return None
    return "xla" if found and found.get("memory") else None


def _analyse_before(spec) -> Optional[dict]:
    backends.select("jax")
    jax_devices.prepare(spec)
    jax = jax_devices.import_jax()
    import keras

    shapes = catalog.check_spec(spec)
    keras_side = workloads.of(spec)
    target = jax_devices.create(spec)
    x, y = keras_side.synthetic_batch(shapes, min(spec.batch_size, SHAPE_BATCH), spec.seed)
    at_batch = lambda tree: jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct((spec.batch_size, *a.shape[1:]), a.dtype), tree
    )
    example = (at_batch(x), at_batch(y))  # the run's batch, described
    examples = spec.batch_size * stats.examples_per_item(registry.get(spec.model).unit, shapes.seq_len)
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(spec.precision)
    try:
        if spec.steps_per_loop == 1 and len(target.strategy) == 1:
            found = _prepare_program(jax, keras, spec, keras_side, shapes, target, example, examples)
        else:
            model, optimizer, step = model_and_step(keras, spec, keras_side, shapes)
            found = compiled_step.analyse(step, state_of(model, optimizer), *example, examples)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    compiled_step.remember(spec, found)
    return found


def _prepare_program(jax, keras, spec, keras_side, shapes, target, example, examples: int) -> Optional[dict]:
    """The analysis of a run whose jitted loop is one step on one device: that loop is the step the
    guard needs, so it is built as the run builds it (seed, distribution, placement) and compiled
    here, once; the run then takes this Program (_take_prepared) and its first call finds it compiled."""
    from jax.sharding import NamedSharding, PartitionSpec

    previous = keras.distribution.distribution()
    jax_seed.set_random_seed(spec.seed)
    distribution = keras.distribution.DataParallel(devices=target.strategy)
    keras.distribution.set_distribution(distribution)
    try:
        program = program_of(jax, keras, spec, keras_side, shapes, target, distribution)
        split = NamedSharding(program.mesh, PartitionSpec(program.batch_axis))  # as the run puts its batch
        split_as_run = lambda tree: jax.tree_util.tree_map(
            lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=split), tree
        )
        start = time.perf_counter()
        found = compiled_step.analyse(
            program.step, program.state, *map(split_as_run, example), examples, jitted=program.jitted
        )
        program.compile_s = time.perf_counter() - start
    finally:
        keras.distribution.set_distribution(previous)
    _prepared.clear()
    if found is not None:
        _prepared.update(spec=spec, program=program)
    return found


def model_and_step(keras, spec, keras_side, shapes):
    """(model, built optimizer, `step_of` them) of a run, under the precision policy already set."""
    loss_scaling = spec.precision == "mixed_float16"
    model = keras_side.build_model(shapes)
    optimizer = keras_side.make_optimizer(shapes)
    if loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)
    return model, optimizer, step_of(model, optimizer, keras_side, loss_scaling)


def state_of(model, optimizer) -> tuple:
    """A step's state: the values of the trainable, non-trainable and optimizer variables."""
    return (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
    )


def step_of(model, optimizer, workload, loss_scaling: bool):
    """One training step, `step(state, x, y) → (loss, state)` with state (trainable, non-trainable,
    optimizer variables' values): `model.stateless_call` and the optimizer's `stateless_apply`.
    `workload`: the run's workload object (or a built-in's name), whose per-example loss it takes."""
    import jax
    import keras

    if isinstance(workload, str):
        workload = workloads.BUILTINS[workload]

    def compute_loss(trainable, non_trainable, optimizer_state, x, y):
        predictions, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
        loss = keras.ops.mean(workload.per_example_loss(y, predictions))
        scaled = loss
        if loss_scaling:  # the scale is optimizer state: read it from this step's copy
            with keras.StatelessScope(state_mapping=list(zip(optimizer.variables, optimizer_state))):
                scaled = optimizer.scale_loss(loss)
        return scaled, (loss, non_trainable)

    gradients = jax.value_and_grad(compute_loss, has_aux=True)

    def step(state, x, y):
        trainable, non_trainable, optimizer_state = state
        (_, (loss, non_trainable)), grads = gradients(trainable, non_trainable, optimizer_state, x, y)
        trainable, optimizer_state = optimizer.stateless_apply(optimizer_state, grads, trainable)
        return loss, (trainable, non_trainable, optimizer_state)

    return step


def train_loop_of(step, k: int, written_out: bool, stacked: bool):
    """The jitted function's body: `k` calls of `step(state, x, y) → (loss, state)`, returning the
    last loss and the state. `stacked`: x and y hold k batches along a new first axis (real data),
    step i takes batch i; otherwise every step takes the same x and y."""
    import jax

    batch = (lambda x, y, i: (x[i], y[i])) if stacked else (lambda x, y, i: (x, y))

    def train_loop(state, x, y):
        if k == 1 or written_out:
            # Steps written out one after another: inside a fori_loop body XLA:CPU leaves the gradient
            # convolutions in layouts its fast (Eigen) kernels do not take — 1.5× the CPU time per step
            # (docs/PERFORMANCE.md). Compile time grows with steps_per_loop instead.
            loss = None
            for i in range(k):
                loss, state = step(state, *batch(x, y, i))
            return loss, state
        # On accelerators the loop stays one compiled body, whatever steps_per_loop is.
        return jax.lax.fori_loop(
            0, k, lambda i, carry: step(carry[1], *batch(x, y, i)), (jax.numpy.zeros((), "float32"), state)
        )

    return train_loop


def loop_compiler_options(kind: str, k: int) -> dict:
    """XLA options for the jitted loop of `k` steps on a device of `kind`.

    XLA:CPU's default (concurrency-optimised) schedule starts every operand-free instruction, such as
    the iotas of each max-pool gradient, at the top of the program, so in k written-out steps each
    step's stay allocated from the first step on: the scratch memory grows ~3.7 MiB a step at the
    bench's shapes (38.7 MiB at k = 10, one step 5.6). Above glibc's 32 MiB mmap threshold every
    call maps it fresh and page-faults it in (~1,000 faults and 2–3 ms of system time a step):
    the 6–8% the engine lost to the hand step at steps_per_loop 10. The memory-optimised schedule
    keeps k steps in one step's memory (4.3 MiB at k = 10, or 50). One step keeps XLA's defaults,
    so steps_per_loop 1 compiles what a hand-written jitted step compiles to."""
    if kind == "cpu" and k > 1:
        return {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"}
    return {}


def _compiler_flops(step, holder, real: bool, spec, workload, shapes):
    """XLA's FLOPs per example of one step on the global batch (one batch of the stacked real ones):
    from the step compiled before the run for the memory guard, else compiled now, when its memory
    analysis gives the result's estimate too (a synthetic batch's: the real one's k batches differ)."""
    import jax

    found = compiled_step.reused(spec)
    if found is None:
        x, y = holder["inputs"]
        skip = 2 if real else 1  # the stacked real batches lead with the loop's steps
        # A model of several inputs takes a tuple of arrays: each is described alike.
        one = lambda a: jax.tree_util.tree_map(
            lambda b: jax.ShapeDtypeStruct((spec.batch_size, *b.shape[skip:]), b.dtype), a
        )
        examples = spec.batch_size * stats.examples_per_item(workload.unit, shapes.seq_len)
        found = compiled_step.analyse(step, holder["state"], one(x), one(y), examples)
        if not real:
            compiled_step.remember(spec, found)
    return found["flops_per_example"] if found else None


def _iterations_index(optimizer) -> Optional[int]:
    """Where the optimizer's step counter sits in its variables (stateless_apply writes it last)."""
    iterations = getattr(optimizer, "iterations", None)
    for index, variable in enumerate(optimizer.variables):
        if variable is iterations:
            return index
    return None


def _devices_of(arrays) -> list[str]:
    found = set()
    for array in arrays:
        for device in getattr(getattr(array, "sharding", None), "device_set", ()):
            found.add(f"/device:{device.platform.upper()}:{device.id}")
    return sorted(found)
