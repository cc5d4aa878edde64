"""The JAX backend: every workload trains on it, data parallel over emulated CPU devices gives the
1-device loss, results carry the same keys and FLOPs as TensorFlow's, and a missing TPU is a clear error.

Keras picks its backend once per process, and this test process runs TensorFlow: every JAX run here
is its own process, as every run launched by dashbench is."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from fixtures.child_env import child_env

from dashbench.core import stats
from dashbench.core.spec import RunSpec, SpecError
from dashbench.engine import backends
from dashbench.engine.jax import devices as jax_devices
from dashbench.workloads import catalog, registry

FOUR_DEVICES = "--xla_force_host_platform_device_count=4"
TINY_FASHION = [
    "--model",
    "fashion_mnist_cnn",
    "--batch-size",
    "16",
    "--image-size",
    "16",
    "--width",
    "4",
    "--steps",
    "4",
    "--warmup",
    "2",
    "--device",
    "cpu",
]
# On JAX: trains the workloads whose loop differs (conv2d in the three precisions, the Fashion CNN's
# BatchNorm and dropout, the BiLSTM) with the FLOPs TensorFlow's build counts, and steps the
# keras.applications models' own part, momentum SGD with its warm-up schedule, through the JAX
# loop's step on a small model. Neither ResNet-50 nor Inception-v3 is built here: each is one
# keras.applications call on either backend, so compiling them (~90 s) or only building them
# (~20 s of JAX compiling its initializers per weight shape) would prove Keras's layers on JAX, not
# dashbench; the FLOP count is the same code over layer shapes, and test_workloads trains both on TensorFlow.
ALL_WORKLOADS = """
import json, sys
import numpy as np
from dashbench.workloads import catalog, registry
from dashbench.engine import loop, workloads
from dashbench.engine.jax import loop as jax_loop, seed as jax_seed
from dashbench.core.spec import RunSpec
out = {"runs": {}}
for model, precision in [(m, "float32") for m in ("conv2d", "fashion_mnist_cnn")] + [
        ("conv2d", "mixed_float16"), ("conv2d", "mixed_bfloat16"), ("bilstm", "float32")]:
    if model == "bilstm":  # Keras's LSTM layer loads TensorFlow, even on JAX
        out["tensorflow_imported"] = "tensorflow" in sys.modules
    quick = dict(registry.get(model).quick)
    spec = RunSpec(model=model, batch_size=quick.pop("batch_size"), steps=4, warmup=2, backend="jax",
                   device="cpu", precision=precision, **quick)
    out["runs"][f"{model}/{precision}"] = loop.run(spec).to_dict()
import jax, keras
assert keras.backend.backend() == "jax"
shapes = catalog.check_spec(RunSpec(model="resnet50", batch_size=8, image_size=32))
small = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(10)])
optimizer = workloads.make_optimizer("resnet50", shapes)
optimizer.build(small.trainable_variables)
step = jax.jit(jax_loop.step_of(small, optimizer, "resnet50", loss_scaling=False))
state = tuple([v.value for v in variables] for variables in
              (small.trainable_variables, small.non_trainable_variables, optimizer.variables))
x = np.random.default_rng(0).normal(size=(32, 8)).astype("float32")
y = np.argmax(x @ np.random.default_rng(1).normal(size=(8, 10)), axis=1)
out["sgd_losses"] = []
for _ in range(12):
    loss, state = step(state, x, y)
    out["sgd_losses"].append(float(loss))
# dashbench's seeding without TensorFlow gives what Keras's own gives (which imports it).
out["seeded_draws"] = []
for seed_with in (jax_seed.set_random_seed, keras.utils.set_random_seed):
    seed_with(7)
    layer = keras.layers.Dense(3)
    layer.build((None, 2))
    out["seeded_draws"].append([np.asarray(layer.kernel).tolist(), np.asarray(keras.random.normal((4,))).tolist(),
                                np.random.rand(2).tolist()])
print(json.dumps(out))
"""


def run_cli(args, **env):
    done = subprocess.run(
        [sys.executable, "-m", "dashbench", "run", "--backend", "jax", "--no-store", "--json", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(**env),
    )
    return done, json.loads(done.stdout)


def test_every_workload_trains_on_jax_with_tensorflows_keys_and_flops():
    """One child process for all workloads (a fixture would run once per xdist worker)."""
    from dashbench.engine import loop, workloads

    child = subprocess.Popen(
        [sys.executable, "-c", ALL_WORKLOADS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        # While the child trains, this process's TensorFlow side: each model's FLOP count as built on
        # TensorFlow (once a model: precision is no shape), and a TensorFlow run's result to hold the
        # JAX run's keys against. The contention it adds is among the flags allowed below.
        tf_flops = {}
        for model in ("conv2d", "fashion_mnist_cnn", "bilstm"):
            quick = dict(registry.get(model).quick)
            spec = RunSpec(model=model, batch_size=quick.pop("batch_size"), **quick)
            tf_flops[model] = workloads.flops_per_example(workloads.build_model(model, catalog.check_spec(spec)))
        tf_spec = RunSpec(model="conv2d", batch_size=8, image_size=16, width=8, steps=2, warmup=0)
        tf_result = loop.run(tf_spec).to_dict()
        stdout, stderr = child.communicate(timeout=900)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, stderr[-3000:]
    results = json.loads(stdout)
    for name, result in results["runs"].items():
        model, precision = name.split("/")
        losses = result["losses"]
        assert result["backend"] == "jax" and result["backend_version"] == result["env"]["jax"]
        assert result["env"]["keras_backend"] == "jax" and result["xla"] is True
        assert result["precision"] == precision
        assert len(losses) == 6 and all(np.isfinite(losses)), (name, losses)
        assert not stats.loss_not_falling(losses) and np.mean(losses[-3:]) < np.mean(losses[:3]), (name, losses)
        # A 512² probe peak is rough; the other test worker keeps this machine busy (contended, and
        # a tail of slow steps: skewed). XLA counts the BiLSTM's recurrence once: its counts disagree.
        allowed = {"above_peak", "contended", "skewed"} | ({"flops_disagree"} if model == "bilstm" else set())
        assert set(result["flags"]) <= allowed, (name, result["flags"])
        assert result["placement"]["variables"] == ["/device:CPU:0"] == result["placement"]["ops"]
        assert result["unit"] == registry.get(model).unit and result["examples_per_sec"] > 0
        # The same FLOP count as the model built on TensorFlow (this process's backend).
        assert result["flops_per_example"] == tf_flops[model]["training"] > 0, name
    assert {"conv2d", "fashion_mnist_cnn", "bilstm"} <= {name.split("/")[0] for name in results["runs"]}
    sgd = results["sgd_losses"]  # ResNet-50's and Inception-v3's optimizer, warm-up and all, on JAX
    assert all(np.isfinite(sgd)) and all(b < a for a, b in zip(sgd, sgd[1:])), sgd
    # A JAX run of a CNN never loads TensorFlow (~4 s of CPU a run process); its seeding is still Keras's.
    assert results["tensorflow_imported"] is False
    ours, keras_own = results["seeded_draws"]
    np.testing.assert_array_equal(ours[0], keras_own[0])
    assert ours[1:] == keras_own[1:]
    # The same keys, in the same order, and the same environment record as a TensorFlow run.
    jax_result = results["runs"]["conv2d/float32"]
    assert list(tf_result) == list(jax_result)
    assert set(tf_result["env"]) == set(jax_result["env"]) - {"mesh", "jax_devices", "process_count"}
    assert tf_result["backend"] == "tensorflow" and tf_result["env"]["keras_backend"] == "tensorflow"


ONE_THEN_FOUR = """
import json
from dashbench.engine import loop
from dashbench.core.spec import RunSpec
tiny = dict(model="fashion_mnist_cnn", batch_size=16, image_size=16, width=4, steps=4, warmup=2, device="cpu",
            backend="jax")
print(json.dumps([loop.run(RunSpec(**tiny, replicas=1)).to_dict(), loop.run(RunSpec(**tiny)).to_dict()]))
"""


def test_four_devices_and_two_hosts_give_the_one_device_loss(tmp_path):
    """The same global batch on 1 device, on 4 emulated CPU devices (the child gets the XLA_FLAGS, so the run
    uses all 4), and on two processes of two devices each joined through jax.distributed
    (JAX_COORDINATOR_ADDRESS), as the hosts of a pod slice are: the same losses. Process 1 leaves the device
    lock to process 0 on the same host (otherwise the two would wait for each other).
    The two processes, started by hand with no run id, store ONE run (jobs/multihost.py): process 0 writes
    it, process 1 takes its id through JAX (gloo collectives) and adds its host and devices to its placement."""
    import socket

    from dashbench.store import Store

    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    env = child_env(
        JAX_COORDINATOR_ADDRESS=f"localhost:{port}",
        JAX_NUM_PROCESSES="2",
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
    )
    db = tmp_path / "runs.sqlite"
    args = [sys.executable, "-m", "dashbench", "run", "--backend", "jax", "--db", str(db), "--json", *TINY_FASHION]
    hosts = [
        subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env, "JAX_PROCESS_ID": str(i)}
        )
        for i in (0, 1)
    ]
    # One process of 4 devices runs on one of them, then on all four: one JAX start fewer than two runs.
    # It trains beside the two hosts (it takes no device lock): the losses compared do not depend on
    # the machine's load, and the hosts' waits on each other leave it CPU.
    both = subprocess.Popen(
        [sys.executable, "-c", ONE_THEN_FOUR],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(XLA_FLAGS=FOUR_DEVICES),
    )
    try:
        outputs = [host.communicate(timeout=600) for host in hosts]
        both_out, both_err = both.communicate(timeout=600)
    finally:
        for child in (*hosts, both):
            if child.poll() is None:
                child.kill()
                child.wait()
    assert both.returncode == 0, both_err[-2000:]
    one_result, four_result = json.loads(both_out)
    assert four_result["replicas"] == 4 and four_result["per_replica_batch_size"] == 4
    assert four_result["device_names"] == [f"/device:CPU:{i}" for i in range(4)]
    assert four_result["placement"]["variables"] == four_result["device_names"] == four_result["placement"]["ops"]
    assert one_result["replicas"] == 1 and one_result["placement"]["ops"] == ["/device:CPU:0"]
    np.testing.assert_allclose(four_result["losses"], one_result["losses"], rtol=1e-4)
    assert "placement_mismatch" not in four_result["flags"]
    for host, (stdout, stderr) in zip(hosts, outputs):
        assert host.returncode == 0, stderr[-2000:]
        result = json.loads(stdout)
        assert result["replicas"] == 4 and len(result["device_names"]) == 4 and result["env"]["process_count"] == 2
        assert result["env"]["multi_worker"] is True
        assert result["accelerator_count"] == 2  # two hosts' CPUs
        np.testing.assert_allclose(result["losses"], one_result["losses"], rtol=1e-4)
        assert "device_shared" not in result["flags"]
    ids = [json.loads(stdout)["run_id"] for stdout, _ in outputs]
    with Store(db) as store:
        runs = store.runs()
        assert list(runs["run_id"]) == ids[:1] == ids[1:]  # one run, the same id on both
        stored = store.get_run(ids[0])["result"]
    assert stored.accelerator_count == 2 and stored.replicas == 4  # each host's devices counted once
    placement = stored.placement
    assert placement["hosts"] == [socket.gethostname()] * 2
    assert len(placement["devices:0"]) == len(placement["devices:1"]) == 2
    assert sorted(placement["devices:0"] + placement["devices:1"]) == sorted(stored.device_names)


def test_replicas_ask_for_emulated_cpu_devices_themselves():
    # conv2d: the BiLSTM's Keras LSTM layer loads TensorFlow (~5 s of CPU here), and the model is not under test.
    done, result = run_cli(
        [
            "--model",
            "conv2d",
            "--batch-size",
            "8",
            "--image-size",
            "8",
            "--width",
            "4",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--replicas",
            "2",
            "--device",
            "cpu",
        ]
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert result["replicas"] == 2 and result["device_names"] == ["/device:CPU:0", "/device:CPU:1"]


def test_a_tpu_that_is_not_there_is_a_clear_error():
    done, result = run_cli(["--model", "conv2d", "--batch-size", "8", "--device", "tpu"])
    assert done.returncode == 2
    assert result["status"] == "invalid" and result["field"] == "device"
    assert "tpu requested but JAX sees no TPU" in result["error"] and "CPU (" in result["error"]
    assert "use --device" in result["error"] and "Traceback" not in done.stderr


def test_jax_rejects_a_remote_tpu_name():
    with pytest.raises(SpecError, match="tpu: the jax backend uses the TPU of this VM"):
        RunSpec(model="conv2d", batch_size=8, backend="jax", tpu="my-tpu")
    with pytest.raises(SpecError, match="backend: unknown backend 'torch'; choose one of: tensorflow, jax"):
        RunSpec(model="conv2d", batch_size=8, backend="torch")


def test_a_process_running_keras_on_tensorflow_refuses_a_jax_run():
    import keras  # noqa: F401  (this test process runs Keras on TensorFlow)

    with pytest.raises(SpecError, match="backend: Keras is already loaded with the tensorflow backend"):
        backends.select("jax")
    backends.select("tensorflow")


def test_emulated_devices_and_multi_host_settings(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_thunk_runtime=false --xla_force_host_platform_device_count=2")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    if "jax" not in sys.modules:
        jax_devices.prepare(RunSpec(model="conv2d", batch_size=8, backend="jax", device="cpu", replicas=4))
        assert os.environ["XLA_FLAGS"] == "--xla_cpu_use_thunk_runtime=false " + FOUR_DEVICES
    assert jax_devices.distributed_settings({}) is None
    assert jax_devices.distributed_settings({"TPU_WORKER_HOSTNAMES": "10.0.0.2"}) is None
    assert jax_devices.distributed_settings({"TPU_WORKER_HOSTNAMES": "10.0.0.2,10.0.0.3"}) == {}
    assert jax_devices.distributed_settings(
        {"JAX_COORDINATOR_ADDRESS": "10.0.0.2:1234", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}
    ) == {"coordinator_address": "10.0.0.2:1234", "num_processes": 2, "process_id": 1}
    with pytest.raises(SpecError, match="JAX_PROCESS_ID: must be an integer"):
        jax_devices.distributed_settings({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_PROCESS_ID": "one"})


def test_jax_peer_processes_on_one_host_leave_the_device_lock_to_process_0():
    from dashbench.jobs import device_lock

    local = {"JAX_COORDINATOR_ADDRESS": "localhost:1234", "JAX_NUM_PROCESSES": "2"}
    assert not device_lock.peer_worker_holds_it({**local, "JAX_PROCESS_ID": "0"})
    assert device_lock.peer_worker_holds_it({**local, "JAX_PROCESS_ID": "1"})
    assert not device_lock.peer_worker_holds_it(
        {**local, "JAX_COORDINATOR_ADDRESS": "10.9.9.9:1234", "JAX_PROCESS_ID": "1"}
    )


def test_devices_shows_what_jax_sees():
    done = subprocess.run(
        [sys.executable, "-m", "dashbench", "devices", "--backend", "jax", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(XLA_FLAGS=FOUR_DEVICES),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    info = json.loads(done.stdout)
    assert info["jax"] and info["default_device"] == "cpu" and info["gpus"] == []
    assert info["devices"]["cpu"] == [f"/device:CPU:{i}" for i in range(4)] and info["devices"]["tpu"] == []
    bad = subprocess.run(
        [sys.executable, "-m", "dashbench", "devices", "--backend", "torch"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "backend: unknown backend 'torch'; choose one of: tensorflow, jax" in bad.stderr


def test_a_jax_run_needs_no_tensorflow():
    """As on a JAX-only TPU VM (requirements-tpu-jax.txt): `import tensorflow` fails, the run still measures."""
    code = (
        "import sys\n"
        "sys.modules['tensorflow'] = None  # every import of tensorflow now raises ImportError\n"
        "from dashbench.cli import main\n"
        "sys.exit(main(['run', '--backend', 'jax', '--model', 'bilstm', '--batch-size', '8', '--seq-len', '4',\n"
        "               '--width', '4', '--steps', '2', '--warmup', '1', '--device', 'cpu', '--no-store', '--json']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=child_env())
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["status"] == "done" and result["backend"] == "jax" and all(np.isfinite(result["losses"]))
