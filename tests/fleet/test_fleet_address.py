"""The fleet without a cluster: the address forms, and nothing changes where Ray is not installed."""

import json
import logging
import os
import subprocess
import sys

import pytest

from dashbench.fleet import RAY_MISSING, FleetError
from dashbench.fleet.address import parse


def test_the_four_address_forms_ray_users_type_are_taken_and_anything_else_named_refused():
    assert parse("ray://head:10001").kind == "client"
    assert parse("http://head:8265/").text == "http://head:8265"
    assert parse("HTTPS://head:8265").kind == "jobs"
    assert parse("10.0.0.5:6379").kind == "gcs"
    assert parse("auto").kind == "gcs"
    assert parse("", env={"RAY_ADDRESS": "ray://h:10001"}).text == "ray://h:10001"
    for bad in ("head", "grpc://head:1", "ray://head", "http://head:99999", "head:port"):
        with pytest.raises(FleetError) as caught:
            parse(bad)
        assert caught.value.field == "cluster"
        assert "ray://HOST:10001" in str(caught.value) and "http://HOST:8265" in str(caught.value)
    with pytest.raises(FleetError, match="RAY_ADDRESS"):
        parse(None, env={})


def test_a_ray_client_session_keeps_rays_client_logs_off_the_terminal_and_gives_them_back_after():
    from dashbench.fleet.address import CLIENT_GRACE_ENV
    from dashbench.fleet.inventory import CLIENT_LOG_STREAM, _client_session

    builder, stream = logging.getLogger("ray.client_builder"), logging.getLogger(CLIENT_LOG_STREAM)
    assert not stream.disabled and CLIENT_GRACE_ENV not in os.environ
    with _client_session(parse("http://head:8265")):
        assert not stream.disabled and CLIENT_GRACE_ENV not in os.environ  # no Ray Client session
    level, stream_level = builder.level, stream.level
    shown = []
    catch = logging.Handler()
    catch.emit = shown.append
    stream.addHandler(catch)
    try:
        with _client_session(parse("ray://head:10001")):
            assert builder.level == logging.WARNING and os.environ[CLIENT_GRACE_ENV] == "0"
            stream.setLevel(logging.INFO)  # as Ray does when the session starts
            stream.error("Unexpected exception:")  # as a stream the head ended says
        assert shown == []
        assert not stream.disabled and builder.level == level and CLIENT_GRACE_ENV not in os.environ
        stream.error("after the session")
        assert [r.getMessage() for r in shown] == ["after the session"]
    finally:
        stream.removeHandler(catch)
        stream.setLevel(stream_level)


BLOCK_RAY = "import sys; sys.modules['ray'] = None; "  # `import ray` raises ImportError, as without it


def _python(code: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DASHBENCH_DB": str(tmp_path / "local.sqlite")}
    return subprocess.run(
        [sys.executable, "-c", BLOCK_RAY + code], capture_output=True, text=True, env=env, timeout=300
    )


def test_without_ray_the_cli_imports_and_a_local_run_runs_as_before_and_the_fleet_says_what_to_install(tmp_path):
    # JAX's smallest model: the framework is not under test, and it starts in half TensorFlow's CPU.
    run = _python(
        "from dashbench.cli import main; sys.exit(main(['run', '--model', 'conv2d', '--backend', 'jax', "
        "'--image-size', '8', '--width', '4', '--batch-size', '8', '--steps', '2', '--warmup', '1', "
        "'--device', 'cpu', '--json']))",
        tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["status"] == "done" and "fleet" not in result["env"]
    refused = _python(
        "from dashbench.cli import main; sys.exit(main(['devices', '--cluster', 'ray://h:10001']))", tmp_path
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [f"error: cluster: {RAY_MISSING}"]


def test_places_group_a_pod_slices_hosts_into_one_and_count_free_devices():
    from dashbench.fleet.inventory import Host, kinds

    def host(name, **kw):
        base = dict(
            node_id=f"id-{name}",
            alive=True,
            head=False,
            cpus=8.0,
            gpus=0,
            gpu_type=None,
            tpu_chips=0,
            tpu_type=None,
            slice_name=None,
            tpu_worker_id=None,
            slice_head=None,
        )
        return Host(name=name, **{**base, **kw})

    hosts = [
        host("gpu-3", gpus=8, gpu_type="H200", free={"GPU": 5.0}),
        host("cpu-1", free={"CPU": 6.0}),
        host("gone", gpus=8, gpu_type="H100", alive=False),
        host("tpu-b", tpu_chips=8, tpu_type="v5litepod-8", slice_name="b", tpu_worker_id=0, free={"TPU": 8.0}),
    ]
    hosts += [
        host(
            f"s-{i}",
            tpu_chips=4,
            tpu_type="v5litepod-16",
            slice_name="s",
            tpu_worker_id=i,
            slice_head="TPU-v5litepod-16-head" if i == 0 else None,
            free={"TPU": 4.0 if i else 0.0},
        )
        for i in (3, 1, 0, 2)
    ]
    found = {k.key: k for k in kinds(hosts)}
    assert found["gpu:H200@gpu-3"].text() == "H200 × 8 on gpu-3 (5 of 8 free)"
    assert found["cpu@cpu-1"].free == 6
    assert not any("H100" in key for key in found)  # a dead host offers nothing
    assert found["tpu:v5litepod-8@tpu-b"].multi_host is False
    pod = found["tpu:v5litepod-16@s"]
    assert pod.label == "TPU v5litepod-16 slice s, 4 hosts" and pod.hosts == ("s-0", "s-1", "s-2", "s-3")
    assert (pod.devices, pod.free, pod.multi_host) == (16, 12, True)
