"""A GPU or TPU that is not on this host is bad input: `run`, `preset` and
`sweep` exit 2 with one line naming the device, and store nothing, not a `failed` row per try;
a sweep asks for its device once, before its first point. This machine has no GPU and no TPU."""

import json
import subprocess
import sys

import pytest

from dashbench.cli import main
from dashbench.core.spec import RunSpec
from dashbench.engine import driverless
from dashbench.jobs import device_check, queue
from dashbench.store import Store

TINY = ["--model", "conv2d", "--batch-size", "8", "--image-size", "16", "--width", "8", "--steps", "2"]


def dashbench(*argv):
    return subprocess.run(
        [sys.executable, "-m", "dashbench", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def stored_runs(db) -> int:
    with Store(db, read_only=True) as store:
        return store.count_runs()


def one_error(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0]


def test_run_on_a_gpu_that_is_not_here_stores_nothing(tmp_path, capfd):
    """Told without TensorFlow (engine.driverless: this host has no GPU driver), so in this process."""
    db = tmp_path / "r.sqlite"
    assert main(["run", *TINY, "--device", "gpu", "--db", str(db), "--json"]) == 2
    done = capfd.readouterr()
    obj = json.loads(done.out)
    assert (obj["status"], obj["field"], obj["device"]) == ("invalid", "device", "gpu") and "run_id" not in obj
    said = one_error(done.err)
    assert said.startswith("error: device: gpu requested but TensorFlow sees no GPU; found: CPU")
    assert "no GPU (no GPU driver on this host" in said and said.endswith("use --device cpu or auto")
    assert stored_runs(db) == 0  # it was a failed row before


def test_preset_and_a_jax_run_on_a_tpu_that_is_not_here_store_nothing(tmp_path, capfd):
    db = tmp_path / "p.sqlite"
    assert main(["preset", "riseml-resnet50", "--quick", "--device", "tpu", "--db", str(db), "--json"]) == 2
    done = capfd.readouterr()
    obj = json.loads(done.out)
    assert (obj["status"], obj["field"], obj["device"]) == ("invalid", "device", "tpu")
    assert one_error(done.err).startswith("error: device: tpu requested but this host shows no TPU")
    # Its own process: a JAX run points Keras at JAX, for good.
    done = dashbench("run", *TINY, "--device", "tpu", "--backend", "jax", "--db", db, "--json")
    assert done.returncode == 2 and json.loads(done.stdout)["field"] == "device", done.stderr[-2000:]
    assert one_error(done.stderr).startswith("error: device: tpu requested but JAX sees no TPU")
    assert stored_runs(db) == 0


def test_a_sweep_on_a_gpu_that_is_not_here_asks_once_and_queues_nothing(tmp_path, monkeypatch, capsys):
    """On a host with a GPU driver (faked) only the framework can tell: the discovery and the run command
    are stand-ins that note each start, the discovery answering what TensorFlow says on a CPU box. The
    sweep of three points asks once, starts no point and stores no row."""
    asked, started = tmp_path / "asked", tmp_path / "started"
    noting = tmp_path / "noting.py"
    noting.write_text(
        "import json, subprocess, sys\n"
        "open(sys.argv[1], 'a').write('x\\n')\n"
        "if sys.argv[2] == 'devices':\n"
        f"    print(json.dumps({TF_CPU_ONLY!r}))\n"
        "    sys.exit(0)\n"
        "sys.exit(subprocess.call([sys.executable, '-m', 'dashbench', *sys.argv[2:]]))\n"
    )
    monkeypatch.setattr(driverless, "gpu_driver", lambda: "/dev/nvidia0")
    monkeypatch.setattr(device_check, "DEVICES_COMMAND", [sys.executable, str(noting), str(asked), "devices", "--json"])
    monkeypatch.setattr(queue, "RUN_COMMAND", [sys.executable, str(noting), str(started), "run"])
    db = tmp_path / "s.sqlite"
    code = main(["sweep", *TINY[:2], *TINY[4:], "--batch-sizes", "8,16,32", "--device", "gpu", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2
    assert one_error(err).startswith("error: device: gpu requested but TensorFlow sees no GPU; found: CPU (2 cores)")
    assert asked.read_text() == "x\n" and not started.exists()
    assert stored_runs(db) == 0


def test_the_readmes_sweep_on_this_cpu_box_exits_2_with_nothing_stored(tmp_path, monkeypatch, capsys):
    """This host has no GPU driver: the sweep says so without asking a framework (no discovery process)."""
    monkeypatch.setattr(device_check, "DEVICES_COMMAND", [sys.executable, "-c", "import sys; sys.exit(1)"])
    db = tmp_path / "readme.sqlite"
    code = main(["sweep", *TINY[:2], *TINY[4:], "--device", "gpu", "--batch-sizes", "8,16", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2
    said = one_error(err)
    assert said.startswith("error: device: gpu requested but TensorFlow sees no GPU")
    assert "no GPU driver on this host" in said  # not the failed discovery's "each point finds out"
    assert "sweep " not in err  # it never began: no sweep id was given out
    assert stored_runs(db) == 0


TF_CPU_ONLY = {
    "tensorflow": "2.19.1",
    "gpus": [],
    "tpu": {"evidence": None},
    "cpu": {"model": "x", "cores": 2},
    "default_device": "cpu",
}


@pytest.mark.parametrize(
    "spec, report, said",
    [
        (dict(device="cpu"), TF_CPU_ONLY, None),
        (
            dict(device="gpu"),
            TF_CPU_ONLY,
            "gpu requested but TensorFlow sees no GPU; found: CPU (2 cores), no GPU, no TPU; use --device cpu or auto",
        ),
        (dict(device="gpu"), {**TF_CPU_ONLY, "gpus": [{"name": "/physical_device:GPU:0"}]}, None),
        (
            dict(device="gpu", replicas=2),
            {**TF_CPU_ONLY, "gpus": [{"name": "/physical_device:GPU:0"}]},
            "2 GPUs requested but TensorFlow sees 1; found: CPU (2 cores), 1× GPU, no TPU; use --device gpu or cpu or auto",
        ),
        (dict(device="tpu"), {**TF_CPU_ONLY, "tpu": {"evidence": "/dev/accel0"}}, None),
        (dict(device="tpu", tpu="my-tpu"), TF_CPU_ONLY, None),  # a remote TPU: the run reaches it itself
        (
            dict(device="tpu", backend="jax"),  # evidence, but no TPU runtime for JAX
            {
                "jax": "0.7",
                "devices": {"cpu": ["/device:CPU:0"], "gpu": [], "tpu": []},
                "gpus": [],
                "tpu": {"evidence": "/dev/accel0"},
                "cpu": {"cores": 8},
            },
            "tpu requested but JAX sees no TPU; found: CPU (8 cores), no GPU, no TPU; use --device cpu or auto",
        ),
        (
            dict(device="tpu", backend="jax"),
            {"devices": {"tpu": ["/device:TPU:0"]}, "gpus": [], "tpu": {"evidence": "/dev/accel0"}},
            None,
        ),
    ],
)
def test_a_devices_report_judged_against_a_spec(spec, report, said):
    assert device_check.judge(RunSpec(model="conv2d", batch_size=8, **spec), report) == said


def test_a_discovery_that_fails_leaves_the_answer_to_each_point(monkeypatch):
    monkeypatch.setattr(driverless, "gpu_driver", lambda: "/dev/nvidia0")  # else told without a discovery
    monkeypatch.setattr(device_check, "DEVICES_COMMAND", [sys.executable, "-c", "import sys; sys.exit(1)"])
    assert device_check.missing(RunSpec(model="conv2d", batch_size=8, device="gpu")) is None
    monkeypatch.setattr(device_check, "DEVICES_COMMAND", [sys.executable, "-c", "print('not json')"])
    assert device_check.missing(RunSpec(model="conv2d", batch_size=8, device="gpu")) is None


def test_without_a_gpu_driver_a_missing_device_is_told_without_a_framework(monkeypatch):
    """engine.driverless: where the host shows no GPU driver, a gpu (and, without TPU evidence, a tpu)
    is missing for either framework; where it shows one, or a TPU may be there, only the run can tell."""
    monkeypatch.setattr(driverless, "gpu_driver", lambda: None)
    monkeypatch.setattr(driverless.tpu, "evidence", lambda: None)
    gpu = RunSpec(model="conv2d", batch_size=8, device="gpu")
    assert driverless.missing(gpu).startswith("gpu requested but TensorFlow sees no GPU; found: CPU (")
    assert driverless.missing(RunSpec(model="conv2d", batch_size=8, device="gpu", backend="jax")).startswith(
        "gpu requested but JAX sees no GPU"
    )
    assert driverless.missing(RunSpec(model="conv2d", batch_size=8, device="tpu", backend="jax")).startswith(
        "tpu requested but JAX sees no TPU"
    )
    assert driverless.missing(RunSpec(model="conv2d", batch_size=8, device="tpu", tpu="my-tpu")) is None
    for device in ("cpu", "auto"):
        assert driverless.missing(RunSpec(model="conv2d", batch_size=8, device=device)) is None
    monkeypatch.setattr(driverless.tpu, "evidence", lambda: "/dev/accel0")
    assert driverless.missing(RunSpec(model="conv2d", batch_size=8, device="tpu")) is None
    monkeypatch.setattr(driverless, "gpu_driver", lambda: "/dev/nvidia0")
    assert driverless.missing(gpu) is None
    assert device_check.judge(gpu, TF_CPU_ONLY).startswith("gpu requested but TensorFlow sees no GPU")


def test_the_signs_of_a_gpu_driver_are_looked_for(tmp_path, monkeypatch):
    monkeypatch.setattr(driverless, "GPU_DRIVER_SIGNS", (str(tmp_path / "nvidia[0-9]*"), str(tmp_path / "dxg")))
    assert driverless.gpu_driver() is None
    (tmp_path / "dxg").touch()
    assert driverless.gpu_driver() == str(tmp_path / "dxg")
    (tmp_path / "nvidia0").touch()
    assert driverless.gpu_driver() == str(tmp_path / "nvidia0")
    (tmp_path / "nvidia0").unlink()
    (tmp_path / "dxg").unlink()
    monkeypatch.setattr(driverless.sys, "platform", "darwin")  # a Mac's Metal GPU leaves none of the signs
    assert driverless.gpu_driver() == "darwin"
    assert driverless.missing(RunSpec(model="conv2d", batch_size=8, device="gpu")) is None
