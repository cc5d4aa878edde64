"""The Run page is drawn at once on a cold server: the device discovery (a TensorFlow process) runs in the
background, begun by whichever page opens first; the form offers the CPU until it ends, then the devices
found, with the machine's default chosen."""

import json
import os
import threading

from fixtures.app_test import assert_clean, show, start

from dashbench.views.common import devices
from dashbench.views.run import page as run_page

LOOK_AHEAD = devices.look_ahead  # the real one: tests/conftest.py turns it off for every other test
TPU_REPORT = {"gpus": [], "tpu": {"evidence": "libtpu", "accelerator_type": "v5litepod-8"}, "default_device": "tpu"}


def _gated_python(tmp_path):
    """A `python` that, asked for `-m dashbench devices --json`, notes the call and answers only once the
    test writes a line into its gate (a FIFO: the discovery runs as long as the test wants, no sleeps)."""
    gate, calls = tmp_path / "gate", tmp_path / "calls"
    os.mkfifo(gate)
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\nread line < {gate}\necho '{json.dumps(TPU_REPORT)}'\n")
    fake.chmod(0o755)
    return str(fake), gate, calls


def _release(gate) -> None:
    with open(gate, "w") as fifo:  # blocks until the fake reads it
        fifo.write("go\n")


def test_a_discovery_runs_once_in_the_background_and_is_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(devices, "_DEVICE_CACHE", {})
    monkeypatch.setattr(devices, "_LOOKING", {})
    python, gate, calls = _gated_python(tmp_path)
    assert devices.device_info(python, wait=False) is None  # started, not awaited
    assert devices.device_info(python, wait=False) is None  # still running: not started twice
    waiter = []
    thread = threading.Thread(target=lambda: waiter.append(devices.device_info(python)))
    thread.start()  # a caller that waits joins the same discovery
    _release(gate)
    thread.join(timeout=60)
    (found,) = waiter
    assert found.kinds == ["tpu", "cpu"] and found.description["tpu"] == "TPU: v5litepod-8"
    assert devices.device_info(python, wait=False) is found  # kept for the process
    assert calls.read_text().splitlines() == ["-m dashbench devices --json"]  # one process for all three


def test_the_dashboard_begins_the_discovery_on_its_first_page(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(devices, "look_ahead", LOOK_AHEAD)
    monkeypatch.delenv(devices.LOOK_AHEAD_ENV)
    monkeypatch.setattr(devices, "device_info", lambda *a, **k: asked.append(k) or None)
    start(monkeypatch, tmp_path / "runs.sqlite")  # the default page, Compare
    assert asked and asked[0] == {"wait": False}
    read_only = []
    monkeypatch.setattr(devices, "device_info", lambda *a, **k: read_only.append(k) or None)
    start(monkeypatch, tmp_path / "runs.sqlite", read_only=True)
    assert not read_only  # a read-only dashboard launches nothing: it never looks


def test_a_dashboard_told_not_to_look_ahead_looks_once_the_run_page_is_shown(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(devices, "look_ahead", LOOK_AHEAD)
    monkeypatch.setenv(devices.LOOK_AHEAD_ENV, "0")
    monkeypatch.setattr(devices, "device_info", lambda *a, **k: asked.append(k) or None)
    at = start(monkeypatch, tmp_path / "runs.sqlite")  # the default page, Compare
    assert not asked
    show(at, "pages/run.py")
    assert asked and asked[0] == {"wait": False}


def test_the_form_offers_the_cpu_until_the_devices_are_found_then_the_machines_default(tmp_path, monkeypatch):
    found = []
    monkeypatch.setattr(devices, "device_info", lambda *a, **k: found[0] if found else None)
    at = show(start(monkeypatch, tmp_path / "runs.sqlite"), "pages/run.py")
    assert at.selectbox(key="run_device").options == ["CPU"] and at.selectbox(key="run_device").value == "cpu"
    assert any("Looking for devices on this machine" in c.value for c in at.caption)
    assert at.button(key="run_launch") is not None  # the whole form, at once
    found.append(devices.parse_devices(TPU_REPORT))
    at.run()
    assert_clean(at)
    assert at.selectbox(key="run_device").options == ["TPU: v5litepod-8", "CPU"]
    assert at.selectbox(key="run_device").value == "tpu"  # the CPU was no one's choice
    assert not any("Looking for devices" in c.value for c in at.caption)
    assert run_page.PROVISIONAL not in at.session_state


def test_a_preset_chosen_while_looking_takes_the_found_devices_values(tmp_path, monkeypatch):
    from dashbench.views.run import form as run_form

    found = []
    monkeypatch.setattr(devices, "device_info", lambda *a, **k: found[0] if found else None)
    at = show(start(monkeypatch, tmp_path / "runs.sqlite"), "pages/run.py")
    at.selectbox(key="run_preset").set_value("colab-fashion-mnist").run()
    on_cpu, on_tpu = (run_form.preset_form_values("colab-fashion-mnist", d, quick=False) for d in ("cpu", "tpu"))
    differ = {k for k in on_tpu if on_tpu[k] != on_cpu.get(k)}
    assert differ - {"run_device"}, "the preset reads the same on both: nothing to see here"
    assert all(at.session_state[k] == on_cpu[k] for k in differ)
    found.append(devices.parse_devices(TPU_REPORT))
    at.run()
    assert_clean(at)
    assert at.selectbox(key="run_device").value == "tpu"
    assert {k: at.session_state[k] for k in differ} == {k: on_tpu[k] for k in differ}
