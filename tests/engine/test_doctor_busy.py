"""`doctor` on a busy machine: it watches the host first and refuses to calibrate the CPU when other
processes keep it contended, in one line that says what to do; nothing low is stored as the peak.
A calibration that moves the host's CPU peak by more than 15% names the stored runs it re-prices."""

import os

from fixtures.stored_runs import result_for

from dashbench.cli import doctor_cmd, main
from dashbench.core import stats
from dashbench.core.spec import RunSpec
from dashbench.engine import doctor, probe
from dashbench.store import Store, this_host


def planted_reads(other_share: float):
    """hostload readings two seconds apart in which other processes used `other_share` of the cores."""
    ticks, cores = os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    busy = int(other_share * cores * 2.0 * ticks)
    readings = iter([(0.0, "cpu 0 0 0 0 0 0 0 0", 0.0), (2.0, f"cpu {busy} 0 0 0 0 0 0 0", 0.0)])
    return lambda: next(readings)


def test_a_contended_cpu_is_not_calibrated_and_the_line_says_what_to_do(tmp_path, monkeypatch, capsys):
    assert doctor.cpu_contention(planted_reads(0.05), sleep=lambda s: None) is None  # a quiet host
    checked = doctor.check("tensorflow", ["cpu"], read=planted_reads(0.9))
    (report,) = checked["devices"]
    assert report["contended"]["other_cores"] > stats.CONTENDED_SHARE * report["contended"]["cores"]
    assert report["probes"] == {} and "stopwatch" not in report  # nothing was measured under load
    assert report["verdict"] == "warning" and report["reasons"] == [doctor.refusal(report["contended"])]
    monkeypatch.setattr(doctor_cmd, "_run_child", lambda backend, args: [dict(report)])
    db = tmp_path / "d.sqlite"
    assert main(["doctor", "--db", str(db), "--backend", "tensorflow"]) == 0
    out = capsys.readouterr().out
    (line,) = [text for text in out.splitlines() if "not calibrated" in text]
    assert "cores busy" in line and "when the machine is quiet" in line and "--busy-ok" in line
    with Store(db) as store:
        assert store.best_cpu_peaks(this_host()) == {}  # the refusal stored no peak


def stored_cpu_run(store, peak: float) -> str:
    spec = RunSpec(model="conv2d", batch_size=8, device="cpu")
    run_id = store.create_run(spec, host=this_host())
    store.finish_run(run_id, "done", result=result_for(spec, 100.0, peak_tflops=peak, peak_source="provisional"))
    return run_id


def test_a_calibration_that_moves_the_peak_over_15_percent_names_the_runs_it_reprices(tmp_path, monkeypatch, capsys):
    db = tmp_path / "r.sqlite"
    with Store(db) as store:
        store.keep_first_cpu_peaks(this_host(), probe.CPU_PROBE, {"float32": 0.24})
        old = stored_cpu_run(store, 0.24)
    calibrated = {"backend": "tensorflow", "device": "cpu", "verdict": "ok", "versions": {}, "reasons": []}
    calibrated["probes"] = {"float32": {"measured_tflops": 0.10, "datasheet_tflops": None}}
    monkeypatch.setattr(doctor_cmd, "_run_child", lambda backend, args: [dict(calibrated)])
    assert main(["doctor", "--db", str(db), "--backend", "tensorflow"]) == 0
    out = capsys.readouterr().out
    (line,) = [text for text in out.splitlines() if "the CPU peak moves" in text]
    assert "0.24 to 0.1 TFLOP/s (-58%)" in line and old in line
    with Store(db) as store:  # a second calibration within 15% of the first names nothing
        stored_cpu_run(store, 0.10)
    calibrated["probes"]["float32"]["measured_tflops"] = 0.11
    assert main(["doctor", "--db", str(db), "--backend", "tensorflow"]) == 0
    assert "the CPU peak moves" not in capsys.readouterr().out
