"""The TensorFlow engine's host call (engine/tensorflow/loop.py `train_loop_of`): k steps a call, the optimizer's
counter moving by k, and at steps_per_loop 1 no `tf.range` loop around the one step — a While op of
one iteration costs the executor work on every call that a hand-written one-step function does not."""

import numpy as np

from dashbench.core.spec import RunSpec
from dashbench.engine import workloads
from dashbench.engine.tensorflow import devices
from dashbench.engine.tensorflow.loop import train_loop_of
from dashbench.workloads import registry


def _loop(k: int):
    tf = devices.import_tensorflow()
    import keras

    spec = RunSpec(
        model="fashion_mnist_cnn", batch_size=4, image_size=8, width=2, steps=k, steps_per_loop=k, device="cpu"
    )
    shapes = registry.get(spec.model).shapes(spec)
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = workloads.build_model(spec.model, shapes)
        optimizer = workloads.make_optimizer(spec.model, shapes)
        optimizer.build(model.trainable_variables)
    x, y = (tf.constant(a) for a in workloads.synthetic_batch(spec.model, shapes, spec.batch_size, 0))

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(workloads.per_example_loss(spec.model, y, model(x, training=True)))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    train_loop = train_loop_of(tf, strategy, replica_step, optimizer, k, real=False)
    steps = tf.constant(k)
    graph = train_loop.get_concrete_function((x, y), steps).graph.as_graph_def()
    ops = {node.op for node in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    return lambda: [a.numpy() for a in train_loop((x, y), steps)], ops


def test_one_step_a_call_runs_without_a_loop_and_advances_the_counter_by_one():
    call, ops = _loop(1)
    assert not ops & {"While", "StatelessWhile"}
    losses = []
    for expected in (1, 2, 3):
        loss, iterations = call()
        losses.append(float(loss))
        assert int(iterations) == expected
    assert np.isfinite(losses).all() and losses[0] != losses[-1]  # the weights moved


def test_several_steps_a_call_loop_in_the_graph_and_advance_the_counter_by_k():
    call, ops = _loop(3)
    assert ops & {"While", "StatelessWhile"}
    assert [int(call()[1]) for _ in range(2)] == [3, 6]
