"""Training to a target accuracy on TensorFlow (engine/to_accuracy.py holds the rules): the
strategy, model, optimizer and XLA choice of the measured loop (engine/tensorflow/loop.py), a tf.function of
k steps over host-fed batches split per replica, and one of an evaluation batch."""

from __future__ import annotations

from typing import Optional

from dashbench.engine import accuracy_data, backends, compiler_flops, measured, to_accuracy, workloads
from dashbench.engine.tensorflow import devices
from dashbench.engine.tensorflow import loop as tf_loop
from dashbench.results.result import RunResult


def run(spec, on_event: Optional[to_accuracy.Event] = None) -> RunResult:
    backends.select(spec.backend)
    emit = on_event or (lambda event: None)
    workload, shapes, data, plan = to_accuracy.prepare(spec, emit)
    emit({"event": "phase", "phase": "setup"})
    tf = devices.import_tensorflow()
    import keras

    target = devices.create(spec)
    previous_policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(spec.precision)
    try:
        trainer = Trainer(tf, keras, spec, shapes, target, data, plan.steps_per_call)
        record, samples, compile_s, host_load = to_accuracy.train(
            spec, trainer, data, plan, emit, devices.native_stderr_silenced, devices.gpu_indices(target)
        )
        model, optimizer = trainer.model, trainer.optimizer
        placement = {"variables": devices.variable_devices(model, optimizer), "ops": []}
        result = measured.result(
            tf_loop.setting(tf, spec, workload, shapes, target, model),
            trainer.flops,
            compile_s,
            samples,
            placement,
            emit,
            host_load=host_load,
            model_info=trainer.workload.identity(trainer.model),
        )
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)
    return to_accuracy.finish(result, record, samples, plan)


class Trainer:
    """to_accuracy's Trainer on a tf.distribute strategy."""

    def __init__(self, tf, keras, spec, shapes, target, data, k: int):
        self.tf, self.keras, self.spec, self.shapes, self.target = tf, keras, spec, shapes, target
        strategy = self.strategy = target.strategy
        self.per_replica = spec.batch_size // target.replicas
        loss_scaling = spec.precision == "mixed_float16"
        keras.utils.set_random_seed(spec.seed)
        with strategy.scope():
            self.workload = workloads.of(spec)
            model = self.model = self.workload.build_model(shapes)
            optimizer = self.workload.make_optimizer(shapes)
            if loss_scaling:
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(model.trainable_variables)
        self.optimizer = optimizer
        self.initial_optimizer = [variable.numpy() for variable in optimizer.variables]
        self.flops = self.workload.flops_per_example(model)
        variables = model.trainable_variables
        global_batch = spec.batch_size
        # Token ids go in as they are; images are scaled to [0, 1] here, on the device.
        as_inputs = (lambda x: x) if data.tokens else (lambda x: tf.cast(x, tf.float32) / 255.0)

        def forward_backward(x, y):
            with tf.GradientTape() as tape:
                predictions = model(as_inputs(x), training=True)
                loss = tf.reduce_sum(self.workload.per_example_loss(y, predictions)) / global_batch
                scaled = optimizer.scale_loss(loss) if loss_scaling else loss
            return loss, tape.gradient(scaled, variables)

        self._count_compiler_flops(forward_backward, variables, data)
        if spec.xla and target.kind != "tpu":
            forward_backward = tf.function(forward_backward, jit_compile=True)

        def replica_step(xs, ys, i):
            loss, grads = forward_backward(xs[i], ys[i])
            optimizer.apply_gradients(zip(grads, variables))
            return loss

        @tf.function
        def train_chunk(xs, ys):
            total = tf.constant(0.0)
            for i in tf.range(k):
                per_replica = strategy.run(replica_step, args=(xs, ys, i))
                total += strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
            return total / k, tf.convert_to_tensor(optimizer.iterations)

        def replica_eval(x, y, mask):
            predictions = model(as_inputs(x), training=False)
            losses = self.workload.per_example_loss(y, predictions)
            correct = tf.cast(tf.equal(tf.argmax(predictions, axis=-1, output_type=tf.int32), y), tf.float32)
            if data.tokens:  # a sequence's share of next tokens predicted right, as its loss is its mean
                correct = tf.reduce_mean(correct, axis=-1)
            return tf.reduce_sum(losses * mask), tf.reduce_sum(correct * mask)

        @tf.function
        def eval_batch(x, y, mask):
            loss, correct = strategy.run(replica_eval, args=(x, y, mask))
            reduce = lambda value: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
            return reduce(loss), reduce(correct)

        self.train_chunk, self.eval_batch = train_chunk, eval_batch
        # The held-out split goes to the devices once, split per replica; each evaluation reads it there.
        self.eval_inputs = [
            self._distribute(batch, stacked=False) for batch in accuracy_data.evaluation_batches(data, spec.batch_size)
        ]
        self.validation_examples = len(data.y_val)

    def _count_compiler_flops(self, forward_backward, variables, data) -> None:
        """The graph profiler's count of one step, unjitted (the profiler does not open an XLA cluster)."""
        tf, optimizer = self.tf, self.optimizer

        def replica_step(x, y):
            loss, grads = forward_backward(x, y)
            optimizer.apply_gradients(zip(grads, variables))
            return loss

        as_spec = lambda a: tf.TensorSpec((self.per_replica, *a.shape[1:]), tf.as_dtype(a.dtype))
        specs = [as_spec(data.x_train), as_spec(data.y_train)]
        one_step = lambda x, y: self.strategy.run(replica_step, args=(x, y))
        replicas = self.strategy.num_replicas_in_sync
        self.flops["compiler"] = compiler_flops.tf_step(tf, one_step, specs, self.per_replica * replicas)

    def _distribute(self, arrays, stacked: bool):
        """Numpy global batches → per-replica values, replica r taking its slice of the batch axis."""
        tf, width = self.tf, self.per_replica

        def part(context):
            start = context.replica_id_in_sync_group * width
            return tuple(
                tf.constant(a[:, start : start + width] if stacked else a[start : start + width]) for a in arrays
            )

        return self.strategy.experimental_distribute_values_from_function(part)

    def set_seed(self, seed: int) -> None:
        """The weights a model built from `seed` starts with (built apart, copied in: the traced
        functions keep their variables), and the optimizer's initial state."""
        self.keras.utils.set_random_seed(seed)
        fresh = self.workload.build_model(self.shapes)
        self.model.set_weights(fresh.get_weights())
        for variable, value in zip(self.optimizer.variables, self.initial_optimizer):
            variable.assign(value)

    def train(self, xs, ys) -> float:
        loss, iterations = self.train_chunk(*self._distribute((xs, ys), stacked=True))
        value = float(loss.numpy())  # the host sync: both values come from the device
        int(iterations.numpy())
        return value

    def evaluate(self) -> tuple[float, float]:
        loss = correct = 0.0
        for inputs in self.eval_inputs:
            batch_loss, batch_correct = self.eval_batch(*inputs)
            loss += float(batch_loss.numpy())
            correct += float(batch_correct.numpy())
        return loss / self.validation_examples, correct / self.validation_examples
