"""`dashbench doctor` and the CPU peak from calibration: the verdict's
rules on planted numbers, the calibration rows in the store, the real check on this machine in its
own processes, a planted wrong datasheet peak, and a CPU run measured against the calibrated peak."""

import csv
import json

import pytest

from dashbench.cli import doctor_cmd, main
from dashbench.engine import calibration, doctor
from dashbench.hardware import peaks
from dashbench.store import Store, this_host

CHECK = ["--steps", "20", "--tries", "1", "--json", "--busy-ok"]  # the measuring, not the refusal


def report(measured=0.5, datasheet=1.0, ratio=1.0, mismatch=False, **extra):
    return {
        "backend": "tensorflow",
        "device": "gpu",
        "probes": {"float32": {"measured_tflops": measured, "datasheet_tflops": datasheet}},
        "stopwatch": {"ratio": ratio},
        "placement": {"devices": ["/device:GPU:0"], "mismatch": mismatch},
        **extra,
    }


# -- the verdict, on planted numbers --------------------------------------------------------------


def test_a_probe_between_a_quarter_and_all_of_the_datasheet_with_a_true_stopwatch_is_ok():
    assert doctor.verdict(report()) == ("ok", [])
    assert doctor.verdict(report(datasheet=None))[0] == "ok"  # a CPU: the probe is the calibration


def test_a_probe_above_the_datasheet_peak_is_an_error_naming_the_table():
    level, reasons = doctor.verdict(report(measured=1.2, datasheet=1.0))
    assert level == "error" and "above the datasheet peak" in reasons[0] and "table is wrong" in reasons[0]


def test_a_probe_far_below_the_datasheet_peak_is_a_warning():
    level, reasons = doctor.verdict(report(measured=0.2, datasheet=1.0))
    assert level == "warning" and "under 25%" in reasons[0]
    assert doctor.verdict(report(measured=0.26, datasheet=1.0))[0] == "ok"


@pytest.mark.parametrize(
    "ratio, level", [(1.0, "ok"), (1.029, "ok"), (0.971, "ok"), (1.031, "error"), (0.9, "error"), (None, "warning")]
)
def test_the_stopwatch_must_match_the_engine_within_the_tolerance(ratio, level):
    assert doctor.STOPWATCH_TOLERANCE == 0.03
    assert doctor.verdict(report(ratio=ratio))[0] == level


def test_work_placed_elsewhere_and_a_failed_check_are_errors():
    assert doctor.verdict(report(mismatch=True))[0] == "error"
    level, reasons = doctor.verdict({"backend": "jax", "device": "cpu", "error": "ImportError: no jax"})
    assert level == "error" and "the check failed: ImportError" in reasons[0]


def test_the_stopwatch_ratio_is_the_wall_difference_over_the_engines_step_time():
    # 3N − N = 40 steps took 0.44 s on the wall; the engine says 10 ms a step: 1.1×.
    assert doctor.stopwatch_ratio(0.2, 0.64, 20, 60, 0.010) == pytest.approx(1.1)
    assert doctor.stopwatch_ratio(0.2, 0.64, 20, 60, 0.0) is None


def test_the_table_names_every_check_and_the_machine_verdict():
    text = doctor_cmd.render(
        {
            "host": "h",
            "verdict": "error",
            "tolerance": 0.03,
            "checks": [{**report(measured=1.2), "verdict": "error", "reasons": ["too fast"]}],
        }
    )
    assert "float32" in text and "1.2 TFLOP/s" in text and "stopwatch" in text and "placement" in text
    assert "too fast" in text and text.splitlines()[-1] == "this machine (h): ERROR"


# -- calibration rows -----------------------------------------------------------------------------


def test_calibrations_are_stored_and_the_best_cpu_peak_of_the_host_wins(tmp_path):
    with Store(tmp_path / "c.sqlite") as store:
        assert store.last_calibration("h") is None and store.best_cpu_peaks("h") == {}
        store.add_calibration(
            {
                "host": "h",
                "device": "cpu",
                "backend": "tensorflow",
                "verdict": "ok",
                "peaks": {"float32": 0.5, "bfloat16": 0.2, "float16": None},
                "stopwatch_ratio": 1.01,
                "versions": {"tensorflow": "2.19.1"},
                "created_at": 100.0,
            }
        )
        store.add_calibration(
            {
                "host": "h",
                "device": "cpu",
                "backend": "jax",
                "verdict": "warning",
                "peaks": {"float32": 0.7},
                "reasons": ["slow"],
                "created_at": 200.0,
            }
        )
        store.add_calibration(
            {
                "host": "other",
                "device": "cpu",
                "backend": "jax",
                "verdict": "ok",
                "peaks": {"float32": 9.0},
                "created_at": 300.0,
            }
        )
        last = store.last_calibration("h")
        assert last["backend"] == "jax" and last["verdict"] == "warning" and last["reasons"] == ["slow"]
        assert store.last_calibration("h", backend="tensorflow")["versions"] == {"tensorflow": "2.19.1"}
        assert store.best_cpu_peaks("h") == {"float32": 0.7, "bfloat16": 0.2}
        with pytest.raises(ValueError, match="verdict"):
            store.add_calibration({"host": "h", "device": "cpu", "backend": "jax", "verdict": "fine"})


def test_the_engine_takes_a_calibrated_cpu_peak_from_its_environment(monkeypatch):
    monkeypatch.setenv(calibration.CPU_PEAKS_ENV, json.dumps({"float32": 0.5, "bfloat16": 0.8, "bad": "x"}))
    assert calibration.cpu_peak("bfloat16") == 0.8 and calibration.cpu_peak("float16") == 0.5

    class Cpu:
        kind = "cpu"

    assert calibration.applied(Cpu(), (0.5, "measured", peaks.CPU_SOFT_MARGIN)) == (0.5, "calibrated", 1.0)
    monkeypatch.setenv(calibration.CPU_PEAKS_ENV, "{not json")
    assert calibration.cpu_peak("float32") is None
    assert calibration.applied(Cpu(), (0.5, "measured", 1.5)) == (0.5, "measured", 1.5)


# -- a stopwatch that cannot time -----------------------------------------------------------------


class _Timed:
    """What the stopwatch reads of a run's result."""

    def __init__(self, steps, examples_per_sec):
        self.steps, self.global_batch_size, self.examples_per_sec = steps, 16, examples_per_sec
        self.accelerator, self.env, self.placement, self.flags = "CPU", {}, {"variables": [], "ops": []}, []


def untimeable_runs(monkeypatch, rates):
    """The engine's loop swapped for one whose runs report `rates(steps)` examples/s, events and all."""
    from dashbench.engine import loop

    def fake_run(spec, on_event):
        on_event({"event": "phase", "phase": "measure"})
        on_event({"event": "sample", "warmup": False})
        return _Timed(spec.steps, rates(spec.steps))

    monkeypatch.setattr(loop, "run", fake_run)


@pytest.mark.parametrize(
    "rates, why",
    [
        # The 3N-step run reports a third of the N-step run's time: the engine's 2N steps took no time.
        (lambda steps: 1000.0 * steps, "was not longer than for 5, in 2 tries"),
        (lambda steps: None, "a run reported no throughput"),
        (lambda steps: 0.0, "a run reported no throughput"),
    ],
)
def test_a_stopwatch_that_cannot_time_says_so_in_the_verdict(monkeypatch, rates, why):
    untimeable_runs(monkeypatch, rates)
    stopwatch, _ = doctor.stopwatch_check("tensorflow", "cpu", steps=5, tries=2)
    assert stopwatch["ratio"] is None and why in stopwatch["why"], stopwatch
    level, reasons = doctor.verdict(report(ratio=None) | {"stopwatch": stopwatch})
    assert level == "warning" and reasons[0].startswith("stopwatch: could not time the engine's steps")
    assert why in reasons[0]


def test_an_lms_stopwatch_holds_its_token_rate_to_sequences_and_keeps_the_median_step(monkeypatch):
    """An LM reports tokens/s: the engine's step time is the batch's tokens over that rate, not its
    sequences (which read 32× too short at seq_len 32); each pair keeps the long run's median step."""
    from dashbench.engine import loop

    def lm_run(spec, on_event):
        on_event({"event": "phase", "phase": "measure"})
        on_event({"event": "sample", "warmup": False})
        timed = _Timed(spec.steps, spec.batch_size * spec.seq_len / 0.010)  # 10 ms a step, in tokens/s
        timed.global_batch_size, timed.unit, timed.shapes = spec.batch_size, "tokens", {"seq_len": spec.seq_len}
        timed.step_time_median_s = 0.008 * spec.steps / 15
        return timed

    monkeypatch.setattr(loop, "run", lm_run)
    shape = dict(model="llama", batch_size=4, seq_len=32, width=32, layers=2, warmup=1, steps_per_loop=1)
    found, _ = doctor.stopwatch_check("tensorflow", "cpu", steps=5, tries=1, shape=shape)
    assert found["tries"][0]["engine_step_s"] == pytest.approx(0.010)
    assert found["tries"][0]["median_step_s"] == pytest.approx(0.008)  # the 15-step run's, not the 5-step one's


def test_a_doctor_that_cannot_time_stores_prints_and_exits_as_documented(tmp_path, monkeypatch, capsys):
    untimeable_runs(monkeypatch, lambda steps: 1000.0 * steps)
    stopwatch, _ = doctor.stopwatch_check("tensorflow", "cpu", steps=5, tries=1)
    checked = report(datasheet=None) | {"device": "cpu", "stopwatch": stopwatch, "versions": {}}
    checked["verdict"], checked["reasons"] = doctor.verdict(checked)
    monkeypatch.setattr(doctor_cmd, "_run_child", lambda backend, args: [dict(checked)])
    db = tmp_path / "w.sqlite"
    assert main(["doctor", "--db", str(db), "--backend", "tensorflow"]) == 0  # a warning exits 0
    printed = capsys.readouterr().out
    assert "stopwatch: could not time" in printed and "WARNING" in printed
    with Store(db) as store:
        row = store.last_calibration(this_host(), "cpu", "tensorflow")
    assert row["verdict"] == "warning" and row["stopwatch_ratio"] is None
    assert row["reasons"][0].startswith("stopwatch: could not time")
    assert main(["doctor", "--db", str(db), "--backend", "tensorflow", "--json", "--no-store"]) == 0
    assert json.loads(capsys.readouterr().out)["checks"][0]["stopwatch"]["ratio"] is None


def test_a_check_process_killed_at_its_timeout_leaves_no_temporary_files(tmp_path, monkeypatch):
    """Killed, the child runs no atexit hook (TensorFlow's autograph files): its folder is removed here."""
    import subprocess
    import tempfile
    from types import SimpleNamespace

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = []

    def killed_at_timeout(argv, env, timeout, **kwargs):
        seen.append(env["TMPDIR"])
        with open(f"{env['TMPDIR']}/__autograph_generated_file_x.py", "w") as f:
            f.write("# left by a child that never reached its atexit hooks\n")
        raise subprocess.TimeoutExpired(argv, timeout)

    monkeypatch.setattr(doctor_cmd.subprocess, "run", killed_at_timeout)
    reports = doctor_cmd._run_child("tensorflow", SimpleNamespace(device=None, steps=None, tries=None))
    assert "did not finish" in reports[0]["error"]
    assert seen and seen[0].startswith(str(tmp_path)) and list(tmp_path.iterdir()) == []


# -- the real check, in its own processes ---------------------------------------------------------


def doctor_here(capsys, monkeypatch, db, *args, env=None):
    """`doctor` in this process (its checks run in their own processes, as always): (code, summary, stderr)."""
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    code = main(["doctor", "--db", str(db), *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_the_doctor_on_this_machine_stores_a_cpu_peak_and_a_true_stopwatch(tmp_path, capsys, monkeypatch):
    db = tmp_path / "d.sqlite"
    code, summary, err = doctor_here(capsys, monkeypatch, db, "--backend", "tensorflow", *CHECK)
    (check,) = summary["checks"]
    assert check["device"] == "cpu" and check["backend"] == "tensorflow", err
    assert check["probes"]["float32"]["measured_tflops"] > 0 and check["probes"]["float32"]["datasheet_tflops"] is None
    ratio = check["stopwatch"]["ratio"]
    assert check["placement"] == {"devices": [check["placement"]["devices"][0]], "mismatch": False}
    assert "CPU:0" in check["placement"]["devices"][0]
    if ratio is None:  # a loaded machine can leave the pair nothing to compare: the verdict says so
        assert code == 0 and summary["verdict"] == "warning" == check["verdict"], check
        assert any(r.startswith("stopwatch: could not time") for r in check["reasons"]), check["reasons"]
    else:
        assert abs(ratio - 1.0) <= doctor.STOPWATCH_TOLERANCE, check["stopwatch"]
        assert code == 0 and summary["verdict"] == "ok" == check["verdict"], check["reasons"]
    with Store(db) as store:
        row = store.last_calibration(this_host(), "cpu", "tensorflow")
    assert row["id"] == summary["stored"][0] and row["verdict"] == check["verdict"]
    assert row["peaks"]["float32"] == check["probes"]["float32"]["measured_tflops"]
    assert row["stopwatch_ratio"] == ratio and row["versions"]["tensorflow"]


def test_a_planted_datasheet_peak_below_what_the_probe_reaches_is_an_error(tmp_path, capsys, monkeypatch):
    planted = tmp_path / "hardware.csv"
    with open(peaks.PEAKS_CSV, newline="") as source, open(planted, "w", newline="") as out:
        reader = csv.DictReader(source)
        writer = csv.DictWriter(out, reader.fieldnames)
        writer.writeheader()
        writer.writerows(reader)
        writer.writerow({name: "" for name in reader.fieldnames} | {"name": "CPU", "kind": "cpu", "fp32": "0.000001"})
    code, summary, err = doctor_here(
        capsys, monkeypatch, tmp_path / "d.sqlite", "--backend", "jax", *CHECK, env={peaks.PEAKS_CSV_ENV: str(planted)}
    )
    (check,) = summary["checks"]
    assert code == 1 and summary["verdict"] == "error" == check["verdict"], err
    assert check["probes"]["float32"]["datasheet_tflops"] == 0.000001
    assert any("above the datasheet peak" in reason for reason in check["reasons"])
    assert check["stopwatch"]["ratio"] is not None


def test_a_cpu_run_on_a_calibrated_host_measures_against_the_calibrated_peak(tmp_path, capfd):
    db = tmp_path / "r.sqlite"
    with Store(db) as store:  # a planted, far too low calibration: the run must be flagged above it
        store.add_calibration(
            {"host": this_host(), "device": "cpu", "backend": "jax", "verdict": "ok", "peaks": {"float32": 1e-6}}
        )
    tiny = [
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
    assert main(["run", *tiny, "--db", str(db), "--json"]) == 0
    result = json.loads(capfd.readouterr().out)
    assert result["peak_source"] == "calibrated" and result["peak_tflops"] == pytest.approx(1e-6)
    assert result["mfu"] > 1 and "above_peak" in result["flags"]
