"""TPU identification on recorded values: the type's suffix, devices per chip, and the peak and price
each generation then gets. No TPU here, no TensorFlow or JAX needed."""

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from dashbench.costs import prices, run_cost
from dashbench.hardware import peaks, tpu

# TPU_ACCELERATOR_TYPE → (name, chips, devices per chip, devices the runtime lists on the slice).
# The suffix counts TensorCores on v2/v3/v4/v5p, chips on v5e/v6e.
RECORDED_TYPES = {
    "v2-8": ("TPU v2", 4, 2, 8),
    "v3-8": ("TPU v3", 4, 2, 8),
    "v3-32": ("TPU v3", 16, 2, 32),
    "v4-8": ("TPU v4", 4, 1, 4),
    "v4-16": ("TPU v4", 8, 1, 8),
    "v5litepod-4": ("TPU v5e", 4, 1, 4),
    "v5litepod-8": ("TPU v5e", 8, 1, 8),
    "v5p-8": ("TPU v5p", 4, 1, 4),
    "v5p-32": ("TPU v5p", 16, 1, 16),
    "v6e-1": ("TPU v6e", 1, 1, 1),
    "v6e-8": ("TPU v6e", 8, 1, 8),
}
# JAX's device_kind on each generation (jax's own test_util matches "v5 lite", "v6 lite", and a
# bare "v5" for v5p), plus the spellings newer runtimes and other tools use.
DEVICE_KINDS = {
    "TPU v2": "TPU v2",
    "TPU v3": "TPU v3",
    "TPU v4": "TPU v4",
    "TPU v5 lite": "TPU v5e",
    "TPU v5e": "TPU v5e",
    "TPU v5litepod": "TPU v5e",
    "TPU v5": "TPU v5p",
    "TPU v5p": "TPU v5p",
    "TPU v6 lite": "TPU v6e",
    "TPU v6e": "TPU v6e",
}
# Per-chip bf16 peaks (shared FIGURES.md) and the shipped price row for the slice.
PEAKS = {"TPU v2": 45, "TPU v3": 123, "TPU v4": 275, "TPU v5e": 197, "TPU v5p": 459, "TPU v6e": 918}
PRICES = {  # type → (price key, units billed, USD per hour on demand)
    "v2-8": ("gcp-tpu-v2-8", 1, 4.50),
    "v3-8": ("gcp-tpu-v3-8", 1, 8.00),
    "v3-32": ("gcp-tpu-v3-8", 4, 32.00),
    "v4-8": ("gcp-tpu-v4", 4, 4 * 3.22),
    "v4-16": ("gcp-tpu-v4", 8, 8 * 3.22),
    "v5litepod-4": ("gcp-tpu-v5e", 4, 4 * 1.20),
    "v5litepod-8": ("gcp-tpu-v5e", 8, 8 * 1.20),
    "v5p-8": ("gcp-tpu-v5p", 4, 4 * 4.20),
    "v5p-32": ("gcp-tpu-v5p", 16, 16 * 4.20),
    "v6e-1": ("gcp-tpu-v6e", 1, 2.70),
    "v6e-8": ("gcp-tpu-v6e", 8, 8 * 2.70),
}


@pytest.mark.parametrize("accelerator_type", sorted(RECORDED_TYPES))
def test_a_recorded_type_gives_its_chips_peak_and_price(accelerator_type):
    name, chips, per_chip, devices = RECORDED_TYPES[accelerator_type]
    parsed = tpu.parse(accelerator_type)
    assert (parsed.name, parsed.chips) == (name, chips)
    # TensorFlow names no device kind: the type and the device count decide.
    identity = tpu.identify(device_count=devices, accelerator_type=accelerator_type, accelerator_type_source="env")
    assert (identity.name, identity.chips, identity.devices_per_chip) == (name, chips, per_chip)
    assert identity.type_chips == chips and identity.mismatch == []
    assert identity.to_env()["accelerator_type_source"] == "env"
    assert peaks.datasheet_peak_tflops(identity.name, "mixed_bfloat16") == PEAKS[name]
    assert peaks.datasheet_peak_tflops(identity.name, "float32") == PEAKS[name]
    price = run_cost.match_price(identity.name, identity.chips, prices.shipped_catalog())
    key, units, usd = PRICES[accelerator_type]
    assert (price["key"], price["units"]) == (key, units)
    assert price["usd_per_hour"] == pytest.approx(usd)


@pytest.mark.parametrize("accelerator_type", sorted(RECORDED_TYPES))
def test_jax_device_kinds_agree_with_the_type(accelerator_type):
    name, chips, per_chip, devices = RECORDED_TYPES[accelerator_type]
    kind = {"TPU v5e": "TPU v5 lite", "TPU v5p": "TPU v5", "TPU v6e": "TPU v6 lite"}.get(name, name)
    identity = tpu.identify([kind] * devices, accelerator_type=accelerator_type)
    assert (identity.name, identity.chips, identity.devices_per_chip, identity.devices) == (
        name,
        chips,
        per_chip,
        devices,
    )
    assert identity.device_kind == kind and identity.mismatch == []


@pytest.mark.parametrize("kind", sorted(DEVICE_KINDS))
def test_device_kinds_alone(kind):
    name = DEVICE_KINDS[kind]
    assert tpu.canonical_name(kind) == name
    per_chip = 2 if name in ("TPU v2", "TPU v3") else 1
    identity = tpu.identify([kind] * 8)  # no accelerator type known
    assert (identity.name, identity.chips, identity.devices_per_chip) == (name, 8 // per_chip, per_chip)
    assert identity.type_chips is None and identity.mismatch == []


@pytest.mark.parametrize(
    "text, name, chips",
    [
        ("V5LITEPOD-16", "TPU v5e", 16),  # case
        ("v5e-8", "TPU v5e", 8),
        ("v5lite-4", "TPU v5e", 4),
        (" v6e-16\n", "TPU v6e", 16),  # as read from a file or the metadata server
        ("tpu-v6e-slice", "TPU v6e", None),
        ("tpu-v5-lite-podslice", "TPU v5e", None),  # GKE's names
        ("tpu-v5-lite-device", "TPU v5e", None),
        ("tpu-v5p-slice", "TPU v5p", None),
        ("tpu-v4-podslice", "TPU v4", None),
        ("V5LITE_POD", "TPU v5e", None),
        ("V6E", "TPU v6e", None),
        ("v2", "TPU v2", None),  # the TPU API's types
        ("v5p-2048", "TPU v5p", 1024),
        ("v3-2048", "TPU v3", 1024),
    ],
)
def test_tolerant_spellings(text, name, chips):
    assert (tpu.parse(text).name, tpu.parse(text).chips) == (name, chips)


@pytest.mark.parametrize("text", ["", None, "TPU v4 lite", "TPU7x", "v7-8", "gpu", "H100", "v9e-8", "TPU"])
def test_unknown_is_plain_tpu_with_no_peak_or_price(text):
    parsed = tpu.parse(text)
    assert (parsed.generation, parsed.name, parsed.chips) == (None, "TPU", None)
    assert peaks.datasheet_peak_tflops(parsed.name, "mixed_bfloat16") is None
    assert run_cost.match_price(parsed.name, 4, prices.shipped_catalog()) is None


def test_an_unknown_generation_is_said_not_guessed():
    identity = tpu.identify(device_count=8)
    assert (identity.name, identity.chips, identity.devices_per_chip) == ("TPU", 8, 1)
    assert any("unknown" in line for line in identity.mismatch)
    identity = tpu.identify(device_count=4, accelerator_type="v9x-4")
    assert identity.name == "TPU" and any("'v9x-4' is not a known TPU generation" in m for m in identity.mismatch)


def test_devices_against_the_type_a_mismatch_is_reported():
    # One host of a v3-32 slice: 8 cores seen, 16 chips in the type. The run used 4 chips.
    identity = tpu.identify(device_count=8, accelerator_type="v3-32")
    assert (identity.name, identity.chips, identity.type_chips) == ("TPU v3", 4, 16)
    assert identity.mismatch == ["8 devices make 4 chips but accelerator type 'v3-32' has 16"]
    # The runtime's kind is the hardware: it wins over a wrong type, and the disagreement is kept.
    identity = tpu.identify(["TPU v5 lite"] * 8, accelerator_type="v4-8")
    assert (identity.name, identity.chips, identity.devices_per_chip) == ("TPU v5e", 8, 1)
    assert identity.mismatch == ["the devices are TPU v5e but the accelerator type 'v4-8' says TPU v4"]
    # A single core of a v3 chip is still a chip to pay for.
    identity = tpu.identify(["TPU v3"], accelerator_type="v3-8")
    assert identity.chips == 1 and "1 devices are not whole chips of 2 devices each" in identity.mismatch
    identity = tpu.identify(["TPU v4", "TPU v5 lite"])
    assert identity.mismatch[0] == "the devices are of 2 kinds: TPU v4, TPU v5 lite"


# -- where the type comes from -------------------------------------------------------------------


class _Metadata(BaseHTTPRequestHandler):
    """A stand-in GCE metadata server: answers only with the Metadata-Flavor header, as the real one."""

    answer = b"v5litepod-8\n"
    requests: list = []

    def do_GET(self):
        type(self).requests.append((self.path, self.headers.get("Metadata-Flavor")))
        if self.headers.get("Metadata-Flavor") != "Google":
            self.send_response(403)
            self.end_headers()
            return
        if self.path != "/computeMetadata/v1/instance/attributes/accelerator-type":
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Metadata-Flavor", "Google")
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def metadata_server():
    server = HTTPServer(("127.0.0.1", 0), _Metadata)
    _Metadata.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_the_environment_variable_comes_first(metadata_server):
    url = metadata_server + "/computeMetadata/v1/instance/attributes/accelerator-type"
    assert tpu.accelerator_type({"TPU_ACCELERATOR_TYPE": "v5p-32"}, url=url) == ("v5p-32", "env")
    assert _Metadata.requests == []  # no request when the environment says it


def test_the_metadata_server_answers_with_its_header(metadata_server):
    url = metadata_server + "/computeMetadata/v1/instance/attributes/accelerator-type"
    assert tpu.accelerator_type({}, url=url) == ("v5litepod-8", "metadata")
    assert _Metadata.requests == [("/computeMetadata/v1/instance/attributes/accelerator-type", "Google")]
    identity = tpu.identify_here(["TPU v5 lite"] * 8, environ={}, url=url)
    assert (identity.name, identity.chips, identity.accelerator_type_source, identity.mismatch) == (
        "TPU v5e",
        8,
        "metadata",
        [],
    )
    # A VM without the attribute (the server says 404): no type, no crash.
    assert tpu.accelerator_type({}, url=metadata_server + "/computeMetadata/v1/instance/attributes/nothing") == (
        None,
        None,
    )


def test_an_unreachable_metadata_server_is_no_type():
    with socket.socket() as probe:  # a port that was free a moment ago: connection refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert tpu.metadata_accelerator_type(f"http://127.0.0.1:{port}/x") is None
    assert tpu.accelerator_type({}, url=f"http://127.0.0.1:{port}/x") == (None, None)
    identity = tpu.identify_here(device_count=8, environ={}, url=f"http://127.0.0.1:{port}/x")
    assert (identity.name, identity.accelerator_type) == ("TPU", None)


def test_a_metadata_server_that_never_answers_is_no_type():
    with socket.socket() as silent:  # listens, never accepts: the request waits out the timeout
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/x"
        assert tpu.metadata_accelerator_type(url, timeout=0.2) is None


def test_devices_json_shows_the_tpu_type():
    described = tpu.describe_type("TPU_ACCELERATOR_TYPE/TPU_NAME set", environ={"TPU_ACCELERATOR_TYPE": "v5p-32"})
    assert described == {
        "accelerator_type": "v5p-32",
        "accelerator_type_source": "env",
        "accelerator": "TPU v5p",
        "chips": 16,
        "devices_per_chip": 1,
    }
    assert tpu.describe_type(None) == {
        "accelerator_type": None,
        "accelerator_type_source": None,
        "accelerator": None,
        "chips": None,
        "devices_per_chip": None,
    }


def test_devices_json_on_a_tpu_vm_reports_the_type():
    # `devices --json` in a fresh process with the TPU VM's variable set: the type and its reading. On JAX,
    # a third of TensorFlow's start-up: both backends' reports read the type with the same dashbench.hardware.tpu.
    env = dict(os.environ, TPU_ACCELERATOR_TYPE="v3-32")
    done = subprocess.run(
        [sys.executable, "-m", "dashbench", "devices", "--json", "--backend", "jax"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    reported = json.loads(done.stdout)["tpu"]
    assert reported["evidence"] and reported["accelerator_type"] == "v3-32"
    assert (reported["accelerator"], reported["chips"], reported["devices_per_chip"]) == ("TPU v3", 16, 2)


def test_no_ml_framework_is_imported():
    code = "import sys, dashbench.hardware.tpu; print(sorted(m for m in ('tensorflow', 'jax', 'keras') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def _fake_tensorflow(devices: int, mesh_shape):
    """Just what _tpu_target touches of TensorFlow, for a TPU that initialises with `devices` devices."""
    from types import SimpleNamespace

    strategy = SimpleNamespace(num_replicas_in_sync=devices)
    return SimpleNamespace(
        distribute=SimpleNamespace(
            cluster_resolver=SimpleNamespace(TPUClusterResolver=lambda tpu: "resolver"),
            TPUStrategy=lambda resolver: strategy,
        ),
        tpu=SimpleNamespace(
            experimental=SimpleNamespace(initialize_tpu_system=lambda resolver: SimpleNamespace(mesh_shape=mesh_shape))
        ),
        config=SimpleNamespace(
            list_logical_devices=lambda kind: [
                SimpleNamespace(name=f"/job:worker/replica:0/task:0/device:TPU:{i}") for i in range(devices)
            ]
        ),
    )


@pytest.mark.parametrize(
    "accelerator_type, devices, mesh, name, chips",
    [
        ("v3-8", 8, [2, 2, 1, 2], "TPU v3", 4),
        ("v5p-8", 4, [2, 2, 1, 1], "TPU v5p", 4),
        ("v6e-8", 8, [2, 4, 1, 1], "TPU v6e", 8),
    ],
)
def test_the_tensorflow_target_counts_chips_from_the_type(monkeypatch, accelerator_type, devices, mesh, name, chips):
    from dashbench.core.spec import RunSpec
    from dashbench.engine.tensorflow import devices as engine_devices

    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", accelerator_type)
    spec = RunSpec(model="conv2d", batch_size=devices * 2, device="tpu")
    target = engine_devices._tpu_target(_fake_tensorflow(devices, mesh), spec)
    assert (target.kind, target.accelerator, target.accelerator_count, target.replicas) == ("tpu", name, chips, devices)
    assert len(target.device_names) == devices
    recorded = target.env["tpu"]
    assert (recorded["accelerator_type"], recorded["accelerator_type_source"], recorded["mismatch"]) == (
        accelerator_type,
        "env",
        [],
    )
    assert recorded["topology_mesh_shape"] == mesh and json.loads(json.dumps(recorded)) == recorded
