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


@pytest.mark.parametrize(("backend", "source"), [("jax", "xla"), ("tensorflow", "tf_profiler")])
def test_a_stored_run_carries_its_profile_and_show_prints_it(tmp_path, backend, source):
    db = str(tmp_path / "runs.sqlite")
    tiny = ["--model", "conv2d", "--device", "cpu", "--batch-size", "4", "--image-size", "16", "--width", "4"]
    run = [sys.executable, "-m", "dashbench", "run", *tiny, "--steps", "2", "--warmup", "1", "--backend", backend]
    done = subprocess.run([*run, "--db", db, "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    p = StepProfile.from_dict(result["profile"])
    # conv2d's one 5×5 convolution, 3 → 4 channels, no bias: 300 weights; Adam keeps two slots of each.
    assert (p.params, p.param_bytes, p.grad_bytes) == (300, 1200, 1200) and p.optimizer_bytes >= 2400
    assert p.flops_source == source and p.flops > 0 and p.batch_size == 4 and p.unit == "examples"
    assert (p.bytes_source == "xla") == (backend == "jax")
    shown = subprocess.run(
        [sys.executable, "-m", "dashbench", "show", result["run_id"], "--db", db], capture_output=True, text=True
    )
    assert "step profile: " in shown.stdout and "300 parameters" in shown.stdout, shown.stdout


def test_a_stored_profile_is_checked_like_every_result_field():
    from dashbench.results.result import RunResult

    good = StepProfile("conv2d", 4, "fp32", 1e6, "xla", 2e5, "xla", 300, 1200.0, 2400.0, 1200.0, None, "examples")
    RunResult.check({"profile": good.to_dict()})
    for bad, field in (
        ({"flops": -1.0}, "profile.flops"),
        ({"params": 1.5}, "profile.params"),
        ({"x": 1}, "profile.x"),
    ):
        with pytest.raises(ValueError, match=f"^{field}: must be "):
            RunResult.check({"profile": good.to_dict() | bad})
