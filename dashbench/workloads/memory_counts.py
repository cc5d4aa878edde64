"""Each workload's memory count at its resolved shapes: (parameters, activation values per example,
input values per example), the figures dashbench.workloads.memory_estimate turns into bytes; each
takes the run's resolved shapes (registry.Shapes, which imports this module). A
built-in's count is its registry entry's (dashbench.workloads.registry); a user's model file is
counted from the model itself, in the run's own process. No framework here.
"""

from __future__ import annotations

from dashbench.workloads import lm_shape

FLOAT = 4  # bytes: float32, also under mixed precision (master weights, and an estimate that errs high)
# A user's model file is counted from the model itself, built in the run's own process (the only one
# that imports it: engine/workloads/user.py `facts`): identity → {parameters, slots, activations, inputs}.
# Elsewhere (a sweep's parent, the queue, the page) its estimate is unknown and each run process checks.
USER_MODEL_FACTS: dict[str, dict] = {}


def know(model: str, facts: dict) -> None:
    """The counts of a user's model, from the process that built it."""
    USER_MODEL_FACTS[model] = dict(facts)


def of_file(model: str) -> tuple[float, float, float]:
    facts = USER_MODEL_FACTS[model]
    return float(facts["parameters"]), float(facts["activations"]), float(facts["inputs"]) + 1


# keras.applications' models at their default shapes: parameters, and forward activations per
# example (values kept for the backward pass: conv and activation outputs, ~25M for ResNet-50 at
# 224 px, about as many for Inception-v3 at 299 px), which scale with the image area.
APPLICATIONS = {
    "resnet50": {"params": 25_636_712, "activations": 25_000_000, "image_size": 224},
    "inception_v3": {"params": 23_851_784, "activations": 25_000_000, "image_size": 299},
}
GB = 1e9
# The graph of a model of hundreds of layers, beyond the framework's own bytes: the fixed part of
# ResNet-50's and Inception-v3's peak is 1.3-1.7 GB beyond their weights over two passes (docs/MEMORY.md).
APPLICATIONS_GRAPH_BYTES = 0.5 * GB
BILSTM_EMBEDDING = 256  # as dashbench.engine.workloads.text (the registry's notes say so too)
# TensorFlow's while-loop LSTM holds about this many copies of its weights around its first step,
# whatever the batch and sequence length (measured at widths 256-1024, lengths 50-200: 1.4 GB at
# width 1024, where the weights are 42 MB; docs/MEMORY.md).
LSTM_WEIGHT_COPIES = 32


def conv2d(shapes) -> tuple[float, float, float]:
    s, c, w = shapes.image_size, shapes.channels, shapes.width
    out = -(-s // 2)
    params = 25 * c * w
    activations = s * s * c + out * out * w + 2 * w
    return params, activations, s * s * c + w


def fashion_mnist_cnn(shapes) -> tuple[float, float, float]:
    s, c, w = shapes.image_size, shapes.channels, shapes.width
    params, activations, side, c_in = 0.0, 0.0, s, c
    for filters in (w, 2 * w, 4 * w):
        pooled = (side // 2) ** 2 * filters
        params += 4 * c_in + 25 * c_in * filters + filters  # BatchNorm, conv kernel and bias
        # BatchNorm out, conv out and its ELU, pooled, dropout out and its mask
        activations += side * side * c_in + 2 * side * side * filters + 3 * pooled
        side, c_in = side // 2, filters
    flat = side * side * c_in
    params += flat * 4 * w + 4 * w + 4 * w * shapes.classes + shapes.classes
    activations += flat + 4 * 4 * w + 3 * shapes.classes
    return params, activations, s * s * c + 1


def application(name: str):
    """The count of a keras.applications model: its default shapes' figures, scaled by the image area."""
    app = APPLICATIONS[name]

    def count(shapes) -> tuple[float, float, float]:
        s, c = shapes.image_size, shapes.channels
        area = (s / app["image_size"]) ** 2
        return app["params"], app["activations"] * max(area, 0.05), s * s * c + 1

    return count


def applications_graph(shapes, backend: str) -> float:
    return APPLICATIONS_GRAPH_BYTES


def bilstm(shapes) -> tuple[float, float, float]:
    h, e, length = shapes.width, BILSTM_EMBEDDING, shapes.seq_len
    params = shapes.vocab * e + lstm_params(h, e) + 2 * h * shapes.classes + shapes.classes
    # per step and direction: 4 gates, cell, tanh(cell), hidden (Keras keeps them for backprop)
    activations = length * e + 2 * length * 7 * h + 2 * h + 2 * shapes.classes
    return params, activations, length + 1


def bilstm_graph(shapes, backend: str) -> float:
    if backend != "tensorflow":  # JAX's scan holds no such copies
        return 0.0
    return LSTM_WEIGHT_COPIES * lstm_params(shapes.width, BILSTM_EMBEDDING) * FLOAT


def lstm_params(width: int, embedding: int) -> int:
    """The bidirectional LSTM's weights: two directions, four gates, each over input, state and bias."""
    return 2 * 4 * width * (embedding + width + 1)


def llama(shapes) -> tuple[float, float, float]:
    return lm_shape.memory_counts(lm_shape.dims(shapes.width, shapes.layers, shapes.seq_len))
