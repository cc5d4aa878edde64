"""FLOPs held against each other on keras.io's ConvMixer (depthwise and pointwise convolutions), a
tiny one, trained on both backends: the layer formula covers its layers, so a user's file is counted
by it; both backends' compiler counts are stored beside it and agree with it and with a hand count
within 10%. XLA:CPU's compiled count of a depthwise kernel gradient is C× the work (it expands the
grouped convolution to every pair of channels): the count is taken before XLA's passes."""

import json
import subprocess
import sys

import pytest

# keras.io/examples/vision/convmixer, at a tiny size: 32² images, patches of 2, 128 filters, depth 2,
# kernel 5; ReLU for its GELU, whose erf XLA counts at about a hundred FLOPs an element (elementwise
# work the formula leaves out, which at this width would stand for a third of the convolutions').
CONVMIXER = """
import keras
from keras import layers

IMAGE, PATCH, FILTERS, DEPTH, KERNEL, CLASSES = 32, 2, 128, 2, 5, 10


def activation_block(x):
    x = layers.Activation("relu")(x)
    return layers.BatchNormalization()(x)


def build():
    inputs = keras.Input((IMAGE, IMAGE, 3))
    x = layers.Rescaling(scale=1.0 / 255)(inputs)
    x = activation_block(layers.Conv2D(FILTERS, kernel_size=PATCH, strides=PATCH)(x))
    for _ in range(DEPTH):
        x0 = x
        x = activation_block(layers.DepthwiseConv2D(kernel_size=KERNEL, padding="same")(x))
        x = layers.Add()([activation_block(x), x0])
        x = activation_block(layers.Conv2D(FILTERS, kernel_size=1)(x))
    x = layers.GlobalAvgPool2D()(x)
    outputs = layers.Dense(CLASSES, activation="softmax")(x)
    return keras.Model(inputs, outputs)
"""

GRID, FILTERS, DEPTH, KERNEL = 16, 128, 2, 5


def hand_count() -> float:
    """One example's training FLOPs, multiply-adds × 2: the stem (no gradient for the images) twice,
    every later layer three times (forward, weight gradient, input gradient)."""
    stem = GRID * GRID * FILTERS * (2 * 2 * 3)
    depthwise = GRID * GRID * FILTERS * KERNEL * KERNEL
    pointwise = GRID * GRID * FILTERS * FILTERS
    dense = FILTERS * 10
    return 2 * (2 * stem + 3 * DEPTH * (depthwise + pointwise) + 3 * dense)


def run(tmp_path, backend: str) -> dict:
    argv = [sys.executable, "-m", "dashbench", "run", "--model", f"{tmp_path / 'convmixer.py'}:build"]
    argv += ["--batch-size", "8", "--steps", "2", "--warmup", "1", "--device", "cpu", "--backend", backend]
    argv += ["--db", str(tmp_path / f"{backend}.sqlite"), "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_convmixer_flops_agree_across_backends_and_with_a_hand_count(tmp_path):
    (tmp_path / "convmixer.py").write_text(CONVMIXER)
    hand = hand_count()
    results = {backend: run(tmp_path, backend) for backend in ("tensorflow", "jax")}
    for backend, result in results.items():
        assert result["flops_source"] == "analytic", backend  # the formula covers every layer: MFU uses it
        assert result["analytic_flops_per_example"] == pytest.approx(hand, rel=1e-9), backend
        assert result["compiler_flops_per_example"] == pytest.approx(hand, rel=0.10), backend
        assert "flops_disagree" not in result["flags"], backend
    tf, jax = (results[b]["compiler_flops_per_example"] for b in ("tensorflow", "jax"))
    assert jax == pytest.approx(tf, rel=0.10)


def test_a_depthwise_kernel_gradient_is_counted_as_the_program_states_it():
    import jax
    import jax.numpy as jnp
    from jax import lax

    from dashbench.engine import compiler_flops

    n, size, channels, k = 2, 16, 32, 5
    x, kernel = jnp.ones((n, size, size, channels)), jnp.ones((k, k, 1, channels))

    def conv(x, kernel):
        numbers = ("NHWC", "HWIO", "NHWC")
        return lax.conv_general_dilated(
            x, kernel, (1, 1), "SAME", dimension_numbers=numbers, feature_group_count=channels
        )

    forward = jax.jit(conv).lower(x, kernel)
    gradient = jax.jit(lambda x, kernel: jax.grad(lambda w: conv(x, w).sum())(kernel)).lower(x, kernel)
    compiled = gradient.compile()
    once = compiler_flops.program_cost(forward, forward.compile)
    assert compiler_flops.program_cost(gradient, lambda: compiled) == pytest.approx(once, rel=0.05)
    # XLA:CPU's executable multiplies every pair of channels: the count this replaces.
    assert compiler_flops.xla_cost(compiled) > channels / 2 * once
