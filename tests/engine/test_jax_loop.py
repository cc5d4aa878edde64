"""The JAX engine's jitted loop (engine/jax/loop.py) is k single steps, whichever way it is built:
written out step by step (as on a CPU) or as a `fori_loop` (as on accelerators), one batch for every
step (synthetic data) or k stacked batches (real data); and on a CPU its k steps fit in one step's
scratch memory, so a faster loop cannot be a different one, nor a slower one a bigger one.

Keras picks its backend once per process, and this test process runs TensorFlow: the checks run in
a child process with Keras on JAX, at tiny shapes."""

import json
import os
import subprocess
import sys

import pytest
from fixtures.xla import FAST_XLA_COMPILE

CHILD = """
import json
import jax, keras, numpy as np
from dashbench.workloads import registry
from dashbench.engine import workloads
from dashbench.engine.jax import seed as jax_seed
from dashbench.engine.jax.loop import loop_compiler_options, step_of, train_loop_of
from dashbench.core.spec import RunSpec

K = 2  # two steps a host call: a skipped, repeated or reordered step still moves the losses
spec = RunSpec(model="fashion_mnist_cnn", batch_size=8, image_size=16, width=4, steps=K, warmup=1,
               steps_per_loop=K, device="cpu", backend="jax")
shapes = registry.get(spec.model).shapes(spec)
jax_seed.set_random_seed(spec.seed)  # Keras's own imports TensorFlow (~3 s here); the engine's does not
model = workloads.build_model(spec.model, shapes)  # convolutions, max pooling and dropout
optimizer = workloads.make_optimizer(spec.model, shapes)
optimizer.build(model.trainable_variables)

step = step_of(model, optimizer, spec.model, loss_scaling=False)  # the engine's step

def first_state():
    return jax.tree_util.tree_map(jax.numpy.array, ([v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables], [v.value for v in optimizer.variables]))

x, y = workloads.synthetic_batch(spec.model, shapes, spec.batch_size, spec.seed)
rng = np.random.default_rng(1)  # 2K different batches: real data's stacked host calls
xs = rng.normal(size=(2 * K, *x.shape)).astype(x.dtype)
ys = rng.integers(0, shapes.classes, size=(2 * K, *y.shape)).astype(y.dtype)

# The engine's loop of k steps, compiled once (each compile costs seconds here): the same
# executable runs the steps and reports its scratch memory.
def compiled(k, written_out, stacked, *inputs):
    loop = jax.jit(train_loop_of(step, k, written_out, stacked), donate_argnums=0,
                   compiler_options=loop_compiler_options("cpu" if written_out else "tpu", k))
    return loop.lower(first_state(), *inputs).compile()

single = compiled(1, True, False, x, y)  # one step: train_loop_of(step, 1) is the step itself
out = {"scratch": {"1": single.memory_analysis().temp_size_in_bytes}}
for stacked in (False, True):
    state, singles = first_state(), []
    for i in range(2 * K):
        loss, state = single(state, *((xs[i], ys[i]) if stacked else (x, y)))
        singles.append(float(loss))
    reference = [np.asarray(a).tolist() for a in jax.tree_util.tree_leaves(state)]
    for written_out in (True, False):
        loop = compiled(K, written_out, stacked, *((xs[:K], ys[:K]) if stacked else (x, y)))
        if written_out and not stacked:
            out["scratch"]["k"] = loop.memory_analysis().temp_size_in_bytes
        state, losses = first_state(), []
        for call in range(2):  # two host calls: the second starts where the first ended
            part = slice(call * K, (call + 1) * K)
            loss, state = loop(state, *((xs[part], ys[part]) if stacked else (x, y)))
            losses.append(float(loss))
        out[f"{'written_out' if written_out else 'fori_loop'}/{'stacked' if stacked else 'one batch'}"] = {
            "singles": singles, "losses": losses,
            "state": [np.asarray(a).tolist() for a in jax.tree_util.tree_leaves(state)], "reference": reference}
print("RESULT " + json.dumps(out))
"""


# One xdist worker runs every test here, so the module's child runs once per suite, not once per worker.
pytestmark = pytest.mark.xdist_group("jax_loop")


@pytest.fixture(scope="module")
def child():
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS", "JAX_PLATFORMS")}
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", XLA_FLAGS=FAST_XLA_COMPILE)
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


@pytest.mark.parametrize(
    "path", ["written_out/one batch", "written_out/stacked", "fori_loop/one batch", "fori_loop/stacked"]
)
def test_the_jitted_loop_gives_the_losses_and_state_of_k_single_steps(child, path):
    import numpy as np

    run = child[path]
    k = len(run["singles"]) // 2
    # Each host call hands back its last step's loss: steps k and 2k of the single steps.
    np.testing.assert_allclose(run["losses"], [run["singles"][k - 1], run["singles"][2 * k - 1]], rtol=1e-5)
    for leaf, expected in zip(run["state"], run["reference"]):
        np.testing.assert_allclose(leaf, expected, rtol=1e-4, atol=1e-6)
    assert len(set(run["singles"])) == len(run["singles"])  # every step moved the loss: a skipped one would show


def test_steps_written_out_on_a_cpu_fit_in_one_steps_scratch_memory(child):
    """XLA:CPU's default schedule kept every written-out step's max-pool iotas allocated from the
    first step on: scratch memory grew with steps_per_loop (38.7 MiB at 10 steps of the bench's model,
    past glibc's mmap threshold: page faults on every call). Scheduled for memory, k steps need no
    more than one (at these shapes the default schedule needs 1.6x one step's for two)."""
    one, k = child["scratch"]["1"], child["scratch"]["k"]
    assert k <= 1.1 * one, (one, k)
