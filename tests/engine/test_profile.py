"""A training step's cost profile, counted by XLA with no device and no weights: a hand count of a
tiny model, the full-size 8B and a 70B-shaped llama on this host within bounded memory, and the CLI."""

import json
import resource
import subprocess
import sys

import pytest
from fixtures.child_env import child_env

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


# Several `dashbench profile` commands in one child, each with its own stdout and stderr: one
# interpreter's start (Keras, JAX) for all of them, as a script profiling several shapes would.
SEVERAL = """
import contextlib, io, json, sys
from dashbench.cli import main
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["profile", "--json", *argv])
    print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}), flush=True)
"""


def profiles(*commands, timeout=900, env=None) -> tuple[list[tuple[int, dict | None, str]], float]:
    """([(exit code, the JSON profile, stderr) of each command], the child's peak RSS in GB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run(
        [sys.executable, "-c", SEVERAL, json.dumps(commands)], capture_output=True, text=True, timeout=timeout, env=env
    )
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert done.returncode == 0, done.stderr[-3000:]
    each = [json.loads(line) for line in done.stdout.strip().splitlines()]
    assert len(each) == len(commands), done.stdout[-3000:]
    found = [
        (r["code"], json.loads(r["out"].strip().splitlines()[-1]) if r["code"] == 0 else None, r["err"]) for r in each
    ]
    return found, max(peak, before) / 1e6


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


LLAMAS = {"8B": (4096, 32), "70B": (8192, 80)}  # Llama 3.1 8B at sequence 8192, and a 70B shape


@pytest.fixture(scope="module")
def llama_profiles(tmp_path_factory):
    """Both full-size profiles, counted in one child: {id: (exit code, the JSON profile, stderr)}, and
    the child's peak RSS in GB (the larger of the two: each must stay under the limit)."""
    # Made before conftest's per-test settings apply: the child gets them (fast XLA compiles, a
    # database of its own) from child_env and here.
    env = child_env(DASHBENCH_DB=str(tmp_path_factory.mktemp("default-db") / "dashbench.sqlite"))
    found, peak_gb = profiles(
        *(
            ["--model", "llama", "--batch-size", "1", "--precision", "mixed_bfloat16",
             "--width", str(width), "--layers", str(layers), "--seq-len", "8192"]
            for width, layers in LLAMAS.values()
        ),
        env=env,
    )  # fmt: skip
    return dict(zip(LLAMAS, found)), peak_gb


@pytest.mark.xdist_group("full_size_llamas")  # one worker: the module fixture's child is made once
@pytest.mark.parametrize("name", list(LLAMAS))
def test_full_size_llamas_profile_on_this_host_without_their_weights(llama_profiles, name):
    width, layers = LLAMAS[name]
    each, peak_gb = llama_profiles
    code, found, err = each[name]
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
    cases = (
        (["--model", "nope", "--batch-size", "1"], "model"),
        (["--model", "llama", "--batch-size", "0"], "batch_size"),
        (["--model", "llama", "--batch-size", "1", "--steps", "3"], "steps"),
        (["--model", "conv2d", "--batch-size", "1", "--layers", "2"], "layers"),
    )
    found, _ = profiles(*(args for args, _ in cases), timeout=120)
    for (args, field), (code, _, err) in zip(cases, found):
        lines = [line for line in err.splitlines() if line.startswith("error: ")]
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {field}: "), (args, err)


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
