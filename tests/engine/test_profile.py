"""A training step's cost profile, counted by XLA with no device and no weights: a hand count of a
tiny model, the full-size 8B and a 70B-shaped llama on this host within bounded memory, and the CLI."""

import json
import resource
import subprocess
import sys

import pytest

from dashbench.workloads import lm_shape
from dashbench.workloads.profile import StepProfile

N_IN, N_OUT, BATCH = 256, 128, 128
DENSE_FILE = f"""
import keras

def build():
    inputs = keras.Input(({N_IN},))
    model = keras.Model(inputs, keras.layers.Dense({N_OUT}, use_bias=False)(inputs))
    return {{"model": model, "loss": "mse", "optimizer": "adam"}}
"""
# The host is shared: a profile that took the weights' memory (70B × 4 bytes) would be killed long
# before this; the abstract one stays far under it.
RSS_LIMIT_GB = 6


def profile(*args, timeout=900) -> tuple[int, dict | None, str, float]:
    """(exit code, the JSON profile, stderr, the child's peak RSS in GB) of `dashbench profile`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run(
        [sys.executable, "-m", "dashbench", "profile", "--json", *args], capture_output=True, text=True, timeout=timeout
    )
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = done.stdout.strip().splitlines()
    return done.returncode, json.loads(out[-1]) if done.returncode == 0 else None, done.stderr, max(peak, before) / 1e6


def test_a_dense_layer_costs_its_hand_count(tmp_path):
    path = tmp_path / "dense.py"
    path.write_text(DENSE_FILE)
    code, found, err, _ = profile("--model", f"{path}:build", "--batch-size", str(BATCH))
    assert code == 0, err
    p = StepProfile.from_dict(found)
    # Forward x·W and the weight gradient xᵀ·dy, each 2·B·n·m (no input gradient: x is data); the
    # loss and Adam's update are elementwise, a few percent here.
    matmuls = 2 * (2 * BATCH * N_IN * N_OUT)
    assert matmuls <= p.flops <= 1.1 * matmuls and p.flops_source == "xla"
    assert p.params == N_IN * N_OUT and p.param_bytes == p.grad_bytes == 4 * N_IN * N_OUT
    assert 2 * 4 * N_IN * N_OUT <= p.optimizer_bytes <= 2 * 4 * N_IN * N_OUT + 64  # Adam's m and v, + scalars
    assert p.bytes_accessed and p.bytes_source == "xla" and p.unit == "examples" and p.tokens_per_example is None
    assert p.batch_size == BATCH and p.precision == "fp32"
    assert StepProfile.from_dict(p.to_dict() | {"newer": 1}) == p


@pytest.mark.parametrize(
    ("width", "layers"),
    [(4096, 32), (8192, 80)],  # Llama 3.1 8B at sequence 8192, and a 70B shape
    ids=["8B", "70B"],
)
def test_full_size_llamas_profile_on_this_host_without_their_weights(width, layers):
    code, found, err, peak_gb = profile(
        "--model", "llama", "--batch-size", "1", "--precision", "mixed_bfloat16",
        "--width", str(width), "--layers", str(layers), "--seq-len", "8192",
    )  # fmt: skip
    assert code == 0, err
    p = StepProfile.from_dict(found)
    d = lm_shape.dims(width, layers, 8192)
    assert p.params == d.parameters and p.param_bytes == 4 * d.parameters  # float32 master weights
    assert p.optimizer_bytes >= 8 * d.parameters and p.grad_bytes == 4 * d.parameters
    assert p.unit == "tokens" and p.tokens_per_example == 8192 and p.precision == "bf16"
    # XLA counts the embedding as a gather, not the matmul PaLM's 6N charges it as.
    palm = d.palm_flops()["training"] * 8192
    embedding = 6 * d.vocab * d.width * 8192
    assert 0.9 * (palm - embedding) <= p.flops <= 1.05 * palm, (p.flops, palm)
    assert "extrapolated to" in p.note and p.bytes_accessed > p.param_bytes
    assert peak_gb < RSS_LIMIT_GB


def test_bad_input_is_one_line_naming_the_field():
    for args, field in (
        (["--model", "nope", "--batch-size", "1"], "model"),
        (["--model", "llama", "--batch-size", "0"], "batch_size"),
        (["--model", "llama", "--batch-size", "1", "--steps", "3"], "steps"),
        (["--model", "conv2d", "--batch-size", "1", "--layers", "2"], "layers"),
    ):
        code, _, err, _ = profile(*args, timeout=120)
        lines = [line for line in err.splitlines() if line.startswith("error: ")]
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {field}: "), err
