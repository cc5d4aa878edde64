"""Training to a target accuracy on Keras's JAX backend (engine/to_accuracy.py holds the rules): the
stateless step, k-step loop, data parallelism and compiler options of the measured loop
(engine/jax/loop.py), fed host batches; the evaluation a jitted function of one batch."""

from __future__ import annotations

from typing import Optional

from dashbench.engine import accuracy_data, compiler_flops, measured, to_accuracy, workloads
from dashbench.engine.jax import devices as jax_devices
from dashbench.engine.jax import loop as jax_loop
from dashbench.engine.jax import seed as jax_seed
from dashbench.results.result import RunResult


def run(spec, on_event: Optional[to_accuracy.Event] = None) -> RunResult:
    emit = on_event or (lambda event: None)
    workload, shapes, data, plan = to_accuracy.prepare(spec, emit)
    emit({"event": "phase", "phase": "setup"})
    target = jax_devices.create(spec)
    import jax
    import keras

    previous_policy = keras.mixed_precision.global_policy()
    previous_distribution = keras.distribution.distribution()
    keras.mixed_precision.set_global_policy(spec.precision)
    distribution = keras.distribution.DataParallel(devices=target.strategy)
    keras.distribution.set_distribution(distribution)
    try:
        trainer = Trainer(keras, spec, shapes, target, distribution, data, plan.steps_per_call)
        gpus = tuple(d.id for d in target.strategy if d.platform == "gpu" and d.process_index == jax.process_index())
        record, samples, compile_s, host_load = to_accuracy.train(
            spec, trainer, data, plan, emit, jax_devices.native_stderr_silenced, gpus
        )
        placement = {
            "variables": jax_loop._devices_of(jax.tree_util.tree_leaves(trainer.state)),
            "ops": jax_loop._devices_of(trainer.eval_inputs[0]),
        }
        mesh = distribution.device_mesh.backend_mesh
        result = measured.result(
            jax_loop.setting(jax, spec, workload, shapes, target, trainer.parameters, mesh),
            trainer.flops,
            compile_s,
            samples,
            placement,
            emit,
            host_load=host_load,
            model_info=trainer.workload.identity(trainer.model),
        )
    finally:
        keras.distribution.set_distribution(previous_distribution)
        keras.mixed_precision.set_global_policy(previous_policy)
    return to_accuracy.finish(result, record, samples, plan)


class Trainer:
    """to_accuracy's Trainer on JAX: the state (trainable, non-trainable, optimizer values) lives
    on the devices and is donated to each call."""

    def __init__(self, keras, spec, shapes, target, distribution, data, k: int):
        import jax
        import numpy as np
        from jax.sharding import NamedSharding, PartitionSpec

        self.keras, self.spec, self.shapes = keras, spec, shapes
        loss_scaling = spec.precision == "mixed_float16"
        jax_seed.set_random_seed(spec.seed)  # not keras.utils': it imports TensorFlow
        self.workload = workloads.of(spec)
        model = self.model = self.workload.build_model(shapes)
        optimizer = self.workload.make_optimizer(shapes)
        if loss_scaling:
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
        self.optimizer = optimizer
        self.initial_optimizer = [np.asarray(variable.value) for variable in optimizer.variables]
        self.flops = self.workload.flops_per_example(model)
        self.parameters = int(sum(int(np.prod(v.shape)) for v in model.trainable_variables))

        step = jax_loop.step_of(model, optimizer, self.workload, loss_scaling)
        # Token ids go in as they are; images are scaled to [0, 1] here, on the device.
        scaled = (lambda x: x) if data.tokens else (lambda x: x.astype("float32") / 255.0)
        scaled_step = lambda state, x, y: step(state, scaled(x), y)
        loop = jax_loop.train_loop_of(scaled_step, k, written_out=target.kind == "cpu", stacked=True)

        mesh = distribution.device_mesh.backend_mesh
        batch_axis = distribution.batch_dim_name
        self.replicated = NamedSharding(mesh, PartitionSpec())
        self.state = self._initial_state()
        state_shardings = jax.tree_util.tree_map(lambda a: a.sharding, self.state)
        self.compiled = jax.jit(
            loop,
            donate_argnums=0,
            out_shardings=(self.replicated, state_shardings),
            compiler_options=jax_loop.loop_compiler_options(target.kind, k),
        )
        self.counter = jax_loop._iterations_index(optimizer)

        def evaluate_batch(state, x, y, mask):
            trainable, non_trainable, _ = state
            predictions, _ = model.stateless_call(trainable, non_trainable, scaled(x), training=False)
            losses = self.workload.per_example_loss(y, predictions)
            correct = (jax.numpy.argmax(predictions, axis=-1) == y).astype("float32")
            if data.tokens:  # a sequence's share of next tokens predicted right, as its loss is its mean
                correct = correct.mean(axis=-1)
            return jax.numpy.sum(losses * mask), jax.numpy.sum(correct * mask)

        self.evaluate_batch = jax.jit(evaluate_batch, out_shardings=(self.replicated, self.replicated))

        sharded = lambda leading: NamedSharding(mesh, PartitionSpec(*leading, batch_axis))
        process, processes = jax.process_index(), jax.process_count()
        local = spec.batch_size // processes  # this host's part of every global batch

        def to_devices(arrays, leading=()):
            # Every host makes the same global batch; each puts its own part on its devices.
            part = (slice(None),) * len(leading) + (slice(process * local, (process + 1) * local),)
            return tuple(jax.make_array_from_process_local_data(sharded(leading), a[part]) for a in arrays)

        self.to_devices = to_devices
        # The held-out split goes to the devices once; each evaluation reads it there.
        self.eval_inputs = [to_devices(batch) for batch in accuracy_data.evaluation_batches(data, spec.batch_size)]
        self.validation_examples = len(data.y_val)
        one = lambda a: jax.ShapeDtypeStruct((spec.batch_size, *a.shape[1:]), a.dtype)
        self.flops["compiler"] = compiler_flops.jax_step(
            scaled_step, self.state, one(data.x_train), one(data.y_train), spec.batch_size
        )

    def _initial_state(self, model=None):
        import jax

        model = model or self.model
        placed = lambda a: a if a.sharding == self.replicated else jax.device_put(a, self.replicated)
        return jax.tree_util.tree_map(
            placed,
            (
                [v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables],
                [jax.numpy.asarray(value) for value in self.initial_optimizer],
            ),
        )

    def set_seed(self, seed: int) -> None:
        """The weights of a model built from `seed`, and the optimizer's initial state."""
        jax_seed.set_random_seed(seed)
        self.state = self._initial_state(self.workload.build_model(self.shapes))

    def train(self, xs, ys) -> float:
        import jax

        loss, self.state = self.compiled(self.state, *self.to_devices((xs, ys), (None,)))
        value = float(loss)  # the host sync: the loss comes back from the device
        jax.block_until_ready(self.state[2][self.counter] if self.counter is not None else self.state)
        return value

    def evaluate(self) -> tuple[float, float]:
        loss = correct = 0.0
        for inputs in self.eval_inputs:
            batch_loss, batch_correct = self.evaluate_batch(self.state, *inputs)
            loss += float(batch_loss)
            correct += float(batch_correct)
        return loss / self.validation_examples, correct / self.validation_examples
