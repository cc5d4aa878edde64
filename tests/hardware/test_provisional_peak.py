"""MFU before the first self-check: until `doctor` has calibrated a host, its CPU
runs share one peak, the first probe taken there (kept in the store per host, one probe for every
backend), labelled provisional in `show` and the pages; a calibration, once there, wins."""

import contextlib
import json
import sqlite3
import subprocess
import sys

import pytest

from dashbench.cli import main
from dashbench.engine import calibration, frameworks, probe
from dashbench.hardware import peaks
from dashbench.store import Store, migrate, schema, this_host
from dashbench.views.common import stored_runs

TINY = [
    "--model",
    "conv2d",
    "--batch-size",
    "8",
    "--image-size",
    "16",
    "--width",
    "8",
    "--steps",
    "4",
    "--warmup",
    "1",
    "--device",
    "cpu",
]


class Cpu:
    kind = "cpu"


def test_the_engine_labels_a_first_probe_provisional_and_keeps_its_soft_margin(monkeypatch):
    monkeypatch.delenv(calibration.CPU_PEAKS_ENV, raising=False)
    monkeypatch.setenv(calibration.CPU_PEAK_SOURCE_ENV, peaks.PROVISIONAL)
    probed = (0.4, "measured", peaks.CPU_SOFT_MARGIN)
    assert calibration.applied(Cpu(), probed) == (0.4, "provisional", peaks.CPU_SOFT_MARGIN)  # the first run
    monkeypatch.setenv(calibration.CPU_PEAKS_ENV, json.dumps({"float32": 0.3}))  # a later one, handed the first
    assert calibration.cpu_peak("float32") == 0.3
    assert calibration.applied(Cpu(), (0.3, "measured", peaks.CPU_SOFT_MARGIN))[1] == "provisional"
    monkeypatch.delenv(calibration.CPU_PEAK_SOURCE_ENV)
    assert calibration.applied(Cpu(), (0.3, "measured", peaks.CPU_SOFT_MARGIN)) == (0.3, "calibrated", 1.0)


def test_the_store_keeps_the_first_probe_of_each_host_and_backend(tmp_path):
    with Store(tmp_path / "p.sqlite") as store:
        assert store.first_cpu_peaks("h", "tensorflow") == {}
        assert store.keep_first_cpu_peaks("h", "tensorflow", {"float32": 0.31}, "run-1") == {"float32": 0.31}
        kept = store.keep_first_cpu_peaks("h", "tensorflow", {"float32": 0.50, "bfloat16": 0.2})
        assert kept == {"float32": 0.31, "bfloat16": 0.2}  # the first stays; a new dtype joins
        assert store.first_cpu_peaks("h", "jax") == {} and store.first_cpu_peaks("other", "tensorflow") == {}
        for bad in (0.0, -1.0, float("nan"), float("inf"), "0.3", True):
            with pytest.raises(ValueError, match="peaks: float32"):
                store.keep_first_cpu_peaks("h", "jax", {"float32": bad})
        assert store.first_cpu_peaks("h", "jax") == {}
        assert store.best_cpu_peaks("h") == {}  # a first probe is no calibration


def test_a_v7_store_gains_the_first_probes_and_keeps_its_calibrations(tmp_path):
    path = tmp_path / "v7.sqlite"
    migrate.upgrade_sqlite(path, to=7)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("DROP TABLE alembic_version")  # as dashbench before alembic left it
        conn.execute(
            "INSERT INTO calibrations (created_at, host, device, backend, peaks_json, verdict) "
            "VALUES (1.0, 'h', 'cpu', 'jax', '{\"float32\": 0.7}', 'ok')"
        )
        conn.execute("PRAGMA user_version = 7")
        conn.commit()
    with Store(path) as store:
        assert store.schema_version == schema.SCHEMA_VERSION >= 8
        assert store.best_cpu_peaks("h") == {"float32": 0.7}
        assert store.keep_first_cpu_peaks("h", "jax", {"float32": 0.4}) == {"float32": 0.4}


def run_json(capfd, db, *extra) -> dict:
    assert main(["run", *TINY, "--db", str(db), "--json", *extra]) == 0
    return json.loads(capfd.readouterr().out)


def test_cpu_runs_before_doctor_share_the_first_probe_until_a_calibration_wins(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(frameworks, "CPU_PROBE_SIZE", 128)  # the probe's size is not under test
    monkeypatch.setattr(probe, "_cpu_peaks", {})  # this process has probed nothing yet
    db = tmp_path / "fresh.sqlite"
    first = run_json(capfd, db)
    assert first["peak_source"] == "provisional" and first["peak_tflops"] > 0
    with Store(db) as store:
        assert store.first_cpu_peaks(this_host(), probe.CPU_PROBE) == {"float32": first["peak_tflops"]}
        assert store.calibrations() == []  # no doctor verdict was made up

    def no_second_probe(*args, **kwargs):
        raise AssertionError("a run after the first must not probe: it shares the stored peak")

    monkeypatch.setattr(probe, "_cpu_peaks", {})
    monkeypatch.setattr(probe, "matmul_tflops", no_second_probe)
    monkeypatch.setattr(probe, "cpu_matmul_tflops", no_second_probe)
    second = run_json(capfd, db)
    assert second["peak_source"] == "provisional" and second["peak_tflops"] == first["peak_tflops"]
    assert second["mfu"] == pytest.approx(second["achieved_tflops"] / first["peak_tflops"])
    # The other backend on this CPU divides by the same peak, measured at the same moment.
    argv = [sys.executable, "-m", "dashbench", "run", *TINY, "--db", str(db), "--json", "--backend", "jax"]
    on_jax = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    assert on_jax["backend"] == "jax" and on_jax["peak_source"] == "provisional"
    assert on_jax["peak_tflops"] == first["peak_tflops"] and on_jax["peak_as_of"] == second["peak_as_of"] > 0

    # What the run says about its MFU: `show` and the pages' run detail.
    assert main(["show", second["run_id"], "--db", str(db)]) == 0
    shown = capfd.readouterr().out
    assert peaks.PROVISIONAL_NOTE in shown and "provisional" in shown
    with Store(db, read_only=True) as store:
        detail = stored_runs.run_detail(store.get_run(second["run_id"]))
    notes = [more for label, _, more in detail["headline"] if label == "achieved TFLOP/s"]
    assert notes and peaks.PROVISIONAL_NOTE in notes[0], detail["headline"]

    with Store(db) as store:  # `doctor` has calibrated this host: its peak wins
        store.add_calibration(
            {
                "host": this_host(),
                "device": "cpu",
                "backend": "tensorflow",
                "verdict": "ok",
                "peaks": {"float32": 2 * first["peak_tflops"]},
            }
        )
    third = run_json(capfd, db)
    assert third["peak_source"] == "calibrated" and third["peak_tflops"] == pytest.approx(2 * first["peak_tflops"])
    assert main(["show", third["run_id"], "--db", str(db)]) == 0
    assert peaks.PROVISIONAL_NOTE not in capfd.readouterr().out
