"""The workloads' Keras side, for either backend. The engine holds one workload *object* per run
(`of(spec)`) and asks it for everything: the model, the optimizer, the per-example loss, the synthetic
and real batches, the FLOPs and the model's identity; it never asks which workload it holds. The five
built-ins are instances of `KerasWorkload`; a user's model file is one too (workloads/user.py). What each
built-in workload *is* (shapes, units, defaults, FLOPs formula, memory count) is its entry in
dashbench.workloads.registry, which needs no Keras; this module keeps one object per name listed there.

Synthetic data is one global batch made in numpy from the seed — the same examples on TensorFlow
and JAX — put on the devices once and reused every step. Losses use keras.ops, not tf.*.
"""

from __future__ import annotations

from dashbench.core.spec import SpecError
from dashbench.engine.workloads import images, llama, text
from dashbench.engine.workloads.base import KerasWorkload, real_batches, real_dataset
from dashbench.engine.workloads.flops import count_flops
from dashbench.workloads import registry
from dashbench.workloads.registry import Shapes

__all__ = ["KerasWorkload", "BUILTINS", "of", "real_batches", "real_dataset"]

# Steps over which momentum SGD's learning rate ramps up linearly to its target.
WARMUP_STEPS = 10

# The BiLSTM's Adam learning rate times its width stays at or below this (see make_optimizer).
LSTM_LR_TIMES_WIDTH = 0.1


def _sgd_with_warmup(shapes: Shapes):
    import keras

    # tf_cnn_benchmarks (seed 003's GPU runs) trained these with momentum SGD, after a linear
    # warm-up (Goyal et al., 2017). Without it a fresh BatchNorm network on one small batch
    # overshoots within a few steps and its loss climbs back (ResNet-50, batch 8: 5.9 → 1.9 → 6.0).
    return keras.optimizers.SGD(learning_rate=_linear_warmup(0.01, WARMUP_STEPS), momentum=0.9)


def _lstm_adam(shapes: Shapes):
    import keras

    # Adam moves every weight by about the learning rate a step, so a unit's input moves by up to
    # lr × its fan-in. At 1e-3 the full-width (1024) BiLSTM's loss leapt within three steps
    # (seed 0: 0.52 → 7.3; seed 2 even after a linear warm-up: 0.57 → 2.6) while width 64 fell
    # smoothly; capping lr × width keeps the step the same size at every width.
    return keras.optimizers.Adam(learning_rate=min(1e-3, LSTM_LR_TIMES_WIDTH / shapes.width))


def _linear_warmup(target: float, steps: int):
    import keras

    class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            done = keras.ops.cast(step, "float32") + 1.0
            return target * keras.ops.minimum(1.0, done / steps)

        def get_config(self):
            return {"target": target, "steps": steps}

    return LinearWarmup()


BUILTINS: dict[str, KerasWorkload] = {
    w.name: w
    for w in (
        KerasWorkload("conv2d", images.conv2d_model, images.conv2d_batch, loss="mse"),
        # the Colab article's CNN: Adam 1e-3, ending in a softmax
        KerasWorkload(
            "fashion_mnist_cnn",
            images.fashion_model,
            images.classified_images,
            loss="crossentropy_probabilities",
        ),
        KerasWorkload("resnet50", images.resnet50_model, images.classified_images, optimizer=_sgd_with_warmup),
        KerasWorkload("inception_v3", images.inception_model, images.classified_images, optimizer=_sgd_with_warmup),
        KerasWorkload("bilstm", text.bilstm_model, text.bilstm_batch, optimizer=_lstm_adam),
        llama.LanguageModel("llama", llama.llama_model, llama.llama_batch),
    )
}
assert tuple(BUILTINS) == registry.names(), "every built-in of the registry has its Keras side here"


def of(spec) -> KerasWorkload:
    """The workload object of a run: a built-in by name, or the user's model file the spec names."""
    if not registry.get(spec.model).is_file:
        return BUILTINS[spec.model]
    if getattr(spec, "model_path", None):
        from dashbench.engine.workloads import user

        return user.workload(spec)
    raise SpecError("model", f"unknown model {spec.model!r}; choose one of: {', '.join(BUILTINS)}")


# By-name helpers for the bench scripts and tests that build one built-in by hand.
def build_model(name: str, shapes: Shapes):
    return BUILTINS[name].build_model(shapes)


def make_optimizer(name: str, shapes: Shapes):
    return BUILTINS[name].make_optimizer(shapes)


def synthetic_batch(name: str, shapes: Shapes, global_batch: int, seed: int):
    return BUILTINS[name].synthetic_batch(shapes, global_batch, seed)


def per_example_loss(name: str, y_true, y_pred):
    return BUILTINS[name].per_example_loss(y_true, y_pred)


def flops_per_example(model) -> dict:
    """A built model's analytic FLOPs per example: its own formula where it carries one (the LM's,
    per token), else the layers' count."""
    analytic = getattr(model, "analytic_flops", None)
    return dict(analytic) if analytic else count_flops(model)
