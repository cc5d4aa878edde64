"""The measured training loop on TensorFlow: RunSpec in, RunResult out.

How it measures (docs/measuring.md, "What a run reports"; the rules both backends keep):
- a custom loop: `strategy.run` inside one `tf.function` that runs `steps_per_loop` steps per host
  call; the optimizer is built inside the strategy scope before the function is traced;
- with XLA, only the per-replica forward/backward is compiled (`jit_compile=True`) and
  `apply_gradients` stays outside it — a whole-step jit fails under MirroredStrategy;
- synthetic data is one global batch generated on the devices once; each replica keeps its slice;
- the first host call (tracing, graph optimisation, XLA compilation) is timed as `compile_s` and
  kept out of the samples; warm-up loops are samples marked `warmup` and left out of the statistics;
- each host call is timed until the loss and the optimizer's step counter are on the host, so
  asynchronous dispatch cannot make a step look faster than the device ran it.
"""

from __future__ import annotations

import re
import time
from typing import Callable, Optional

from dashbench.core import stats
from dashbench.core.spec import RunSpec
from dashbench.engine import backends, compiler_flops, measured, workloads
from dashbench.engine.tensorflow import devices
from dashbench.results.result import RunResult
from dashbench.workloads import catalog, registry

# Op types whose placement says where the training work ran (not loop counters or host copies).
_COMPUTE_OPS = re.compile(
    r"^_?(Fused)?(Conv2D|Conv2DBackprop|MatMul|BatchMatMul|DepthwiseConv2dNative|FusedBatchNorm|CudnnRNN|"
    r"ResourceApply|BiasAdd|Elu|Relu|Softmax|SparseSoftmaxCrossEntropy)"
)

Event = Callable[[dict], None]


def run(spec: RunSpec, on_event: Optional[Event] = None) -> RunResult:
    """Train `spec.model` as the spec says, on TensorFlow, and return the measured result."""
    backends.select(spec.backend)
    emit = on_event or (lambda event: None)
    workload = registry.get(spec.model)
    shapes = catalog.check_spec(spec)  # bad input is a SpecError before TF starts
    keras_side = workloads.of(spec)
    emit({"event": "phase", "phase": "setup"})
    tf = devices.import_tensorflow()
    import keras

    target = devices.create(spec)
    previous_policy = keras.mixed_precision.global_policy()
    keras.utils.set_random_seed(spec.seed)
    keras.mixed_precision.set_global_policy(spec.precision)
    try:
        return _measure(tf, keras, spec, workload, keras_side, shapes, target, emit)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


def _measure(tf, keras, spec, workload, keras_side, shapes, target, emit) -> RunResult:
    strategy = target.strategy
    global_batch = spec.batch_size
    per_replica_batch = global_batch // target.replicas
    loss_scaling = spec.precision == "mixed_float16"

    with strategy.scope():
        model = keras_side.build_model(shapes)
        optimizer = keras_side.make_optimizer(shapes)
        if loss_scaling:
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)  # before tracing: slots must exist in the scope
    flops = keras_side.flops_per_example(model)
    variables = model.trainable_variables

    def forward_backward(x, y):
        with tf.GradientTape() as tape:
            predictions = model(x, training=True)
            # Sum over this replica's examples / GLOBAL batch: summed over replicas it is the mean.
            loss = tf.reduce_sum(keras_side.per_example_loss(y, predictions)) / global_batch
            scaled = optimizer.scale_loss(loss) if loss_scaling else loss
        return loss, tape.gradient(scaled, variables)

    plain_forward_backward = forward_backward
    if spec.xla and target.kind != "tpu":  # a TPU compiles everything with XLA anyway
        forward_backward = tf.function(forward_backward, jit_compile=True)

    def replica_step(x, y, forward_backward=forward_backward):
        loss, grads = forward_backward(x, y)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    if spec.data == "real":
        dataset = keras_side.real_dataset(spec.data_path, global_batch, spec.seed)
        source = iter(strategy.experimental_distribute_dataset(dataset))
    else:
        source = _synthetic_on_devices(tf, strategy, keras_side, shapes, global_batch, per_replica_batch, spec.seed)
    train_loop = train_loop_of(tf, strategy, replica_step, optimizer, spec.steps_per_loop, spec.data == "real")
    steps_per_loop = tf.constant(spec.steps_per_loop)

    def host_loop() -> tuple[float, float]:
        start = time.perf_counter()
        loss, iterations = train_loop(source, steps_per_loop)
        loss_value = float(loss.numpy())  # the host sync: both values come from the device
        int(iterations.numpy())
        return time.perf_counter() - start, loss_value

    # XLA and graph optimisers log to the C++ stderr on first use ("Compiled cluster using XLA!");
    # a failure still arrives as a Python exception with its message.
    compile_s, samples, host_load = measured.run_loops(
        host_loop, spec, emit, devices.native_stderr_silenced, devices.gpu_indices(target)
    )

    flops["compiler"] = _compiler_flops(
        tf,
        strategy,
        replica_step,
        plain_forward_backward,
        workload,
        keras_side,
        shapes,
        spec,
        per_replica_batch,
        target,
    )
    placement = {
        "variables": devices.variable_devices(model, optimizer),
        "ops": _op_devices(train_loop, source, steps_per_loop),
    }
    return measured.result(
        setting(tf, spec, workload, shapes, target, model),
        flops,
        compile_s,
        samples,
        placement,
        emit,
        host_load=host_load,
        model_info=keras_side.identity(model),
        sizes=measured.variable_sizes(model, optimizer),
    )


def setting(tf, spec, workload, shapes, target, model) -> measured.Setting:
    """What the result builder takes from a TensorFlow run, the measured loop's and the Trainer's alike."""
    return measured.Setting(
        spec,
        workload,
        shapes,
        target,
        backend=("tensorflow", tf.__version__),
        xla=spec.xla or target.kind == "tpu",
        tf32=bool(tf.config.experimental.tensor_float_32_execution_enabled()),
        cpu_probe=devices.cpu_peak_tflops,
        strategy=type(target.strategy).__name__,
        parameters=int(sum(int(tf.size(v)) for v in model.trainable_variables)),
    )


def train_loop_of(tf, strategy, replica_step, optimizer, k: int, real: bool):
    """The host call's `tf.function`: `train_loop(batches, steps) → (last loss, optimizer step counter)`,
    `steps` steps of `replica_step` under `strategy` (`k`: the run's steps_per_loop). `real`: `batches`
    is a distributed iterator, one batch a step; otherwise the same batch every step."""

    def one_step(batches):
        batch = next(batches) if real else batches
        per_replica_loss = strategy.run(replica_step, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_loss, axis=None)

    @tf.function
    def train_loop(batches, steps):
        if k == 1:
            # A `tf.range` loop of one iteration is a While op that the executor runs on every call,
            # overhead the one step alone does not need (docs/PERFORMANCE.md, engine overhead).
            loss = one_step(batches)
        else:
            loss = tf.constant(0.0)
            for _ in tf.range(steps):
                loss = one_step(batches)
        return loss, tf.convert_to_tensor(optimizer.iterations)

    return train_loop


def _compiler_flops(
    tf, strategy, replica_step, plain_forward_backward, workload, keras_side, shapes, spec, per_replica_batch, target
):
    """The graph profiler's FLOPs per example of one step on every replica. The profiler does not open
    an XLA cluster (a function call), so the step it counts runs the forward/backward unjitted."""
    x, y = keras_side.synthetic_batch(shapes, min(spec.batch_size, 2), spec.seed)
    as_spec = lambda a: tf.TensorSpec((per_replica_batch, *a.shape[1:]), tf.as_dtype(a.dtype))
    specs = [tf.nest.map_structure(as_spec, x), as_spec(y)]  # a model of several inputs takes a tuple
    one_step = lambda x, y: strategy.run(replica_step, args=(x, y), kwargs={"forward_backward": plain_forward_backward})
    examples = per_replica_batch * target.replicas * stats.examples_per_item(workload.unit, shapes.seq_len)
    return compiler_flops.tf_step(tf, one_step, specs, examples)


def _synthetic_on_devices(tf, strategy, keras_side, shapes, global_batch, per_replica_batch, seed):
    """The global batch made once on the host (numpy, as on JAX); each replica gets its own slice,
    copied to its device once: a run with N replicas sees exactly the examples of a 1-replica run."""
    x, y = keras_side.synthetic_batch(shapes, global_batch, seed)

    def replica_slice(context):
        start = context.replica_id_in_sync_group * per_replica_batch
        part = lambda a: tf.constant(a[start : start + per_replica_batch])
        return tf.nest.map_structure(part, x), part(y)  # a model of several inputs takes a tuple

    return strategy.experimental_distribute_values_from_function(replica_slice)


def _op_devices(train_loop, source, steps) -> list[str]:
    """Devices the compute ops of the traced step were placed on (per-replica device scopes)."""
    try:
        graph_def = train_loop.get_concrete_function(source, steps).graph.as_graph_def()
    except Exception:  # placement is a record, never a reason to lose a finished run
        return []
    nodes = list(graph_def.node) + [node for function in graph_def.library.function for node in function.node_def]
    found = set()
    for node in nodes:
        compute = _COMPUTE_OPS.match(node.op) or "_XlaMustCompile" in node.attr
        if not compute:
            continue
        if node.device:
            found.add(node.device)
        elif "_tpu_replicate" in node.attr:
            found.add("/device:TPU_REPLICATED_CORE:0")
    return sorted(found)
