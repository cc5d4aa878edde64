"""Repeats (--repeats R: R measured windows after one compile, the median and the CV) and the
contended flag (other processes busy on the machine while a run measured)."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from dashbench.core import stats
from dashbench.core.spec import RunSpec, SpecError
from dashbench.engine import hostload, loop, measured
from dashbench.engine.target import Target
from dashbench.results.result import RunResult
from dashbench.workloads import catalog, registry

TINY = dict(model="conv2d", batch_size=8, image_size=16, width=8, warmup=1)


def planted(spec, durations_by_repeat, host_load=None):
    """measured.result on planted samples: the decisions without the machine's noise."""
    samples, index = [{"index": 0, "steps": 1, "duration_s": 1.0, "loss": 2.0, "warmup": True}], 1
    for repeat, durations in enumerate(durations_by_repeat):
        for duration in durations:
            samples.append(
                {
                    "index": index,
                    "steps": 1,
                    "duration_s": duration,
                    "loss": 1.0 / index,
                    "warmup": False,
                    "repeat": repeat,
                }
            )
            index += 1
    target = Target(None, "cpu", "CPU", 1, ["/device:CPU:0"], 1)
    setting = measured.Setting(
        spec,
        registry.get(spec.model),
        catalog.check_spec(spec),
        target,
        backend=("tensorflow", "2.19.1"),
        xla=False,
        tf32=False,
        cpu_probe=lambda dtype: 1.0,  # a planted 1 TFLOP/s CPU: no probe runs
        strategy="OneDeviceStrategy",
        parameters=1,
    )
    return measured.result(
        setting,
        {"training": 1e6, "forward": 4e5},
        1.0,
        samples,
        {"variables": ["/device:CPU:0"], "ops": ["/device:CPU:0"]},
        host_load=host_load,
    )


def test_repeats_give_the_median_and_the_cv_and_flag_a_wide_spread():
    spec = RunSpec(**TINY, steps=2, repeats=3)
    steady = planted(spec, [[0.010, 0.010], [0.011, 0.011], [0.0105, 0.0105]])
    rates = [800.0, 8 / 0.011, 8 / 0.0105]
    assert steady.repeats == pytest.approx(rates)
    assert steady.examples_per_sec == pytest.approx(np.median(rates))
    assert steady.repeat_cv == pytest.approx(np.std(rates, ddof=1) / np.mean(rates))
    assert stats.FLAG_UNSTABLE not in steady.flags  # CV 4.8%
    wide = planted(spec, [[0.010, 0.010], [0.020, 0.020], [0.010, 0.010]])
    assert wide.examples_per_sec == pytest.approx(800.0) and stats.FLAG_UNSTABLE in wide.flags
    assert "median of 3 repeats, CV" in wide.describe()
    single = planted(RunSpec(**TINY, steps=2), [[0.010, 0.020]])
    assert single.repeats is None and single.repeat_cv is None and "repeats" not in single.to_dict()
    with pytest.raises(SpecError, match="repeats: must be an integer from 1 to 1000"):
        RunSpec(**TINY, repeats=0 + 1001)


def test_other_processes_past_a_quarter_of_the_cores_flag_the_run_contended():
    spec = RunSpec(**TINY, steps=2)
    busy = planted(spec, [[0.01, 0.01]], {"cores": 8, "own_cores": 1.0, "other_cores": 2.5})
    assert stats.FLAG_CONTENDED in busy.flags and "other processes used 2.5 of 8 cores" in busy.describe()
    quiet = planted(spec, [[0.01, 0.01]], {"cores": 8, "own_cores": 1.0, "other_cores": 1.9})
    assert stats.FLAG_CONTENDED not in quiet.flags and quiet.host_load["other_cores"] == 1.9
    gpu = planted(spec, [[0.01, 0.01]], {"cores": 8, "other_cores": 0.0, "gpu_other_processes": 1})
    assert stats.FLAG_CONTENDED in gpu.flags
    assert stats.FLAG_CONTENDED not in planted(spec, [[0.01, 0.01]], None).flags  # no /proc: no figure


def test_a_machine_without_proc_stat_gives_no_cpu_figure(monkeypatch):
    monkeypatch.setattr(hostload, "PROC_STAT", "/nonexistent/stat")
    record = hostload.Window().close()
    assert "other_cores" not in record and record["cores"] >= 1


def stat_line(busy_ticks: int, idle_ticks: int) -> str:
    """A fabricated first line of /proc/stat: user nice system idle iowait irq softirq steal guest guest_nice."""
    return f"cpu  {busy_ticks} 0 0 {idle_ticks} 0 0 0 0 0 0\n"


def fabricated(*ends):
    """A `read` for hostload.Window that hands out the given (wall s, /proc/stat line, own CPU s) in turn."""
    readings = iter(ends)
    return lambda: next(readings)


def test_a_window_shorter_than_fifty_clock_ticks_gives_no_cpu_figure(monkeypatch):
    """The issue's run: 0.004 s, in which /proc/stat moved by 2 ticks (0.02 s) while this process
    used nothing measurable: 'other processes used 3.8 of 2 cores' (5 by this reading)."""
    monkeypatch.setattr(hostload.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(hostload, "_clock_ticks_per_s", lambda: 100)
    assert hostload.min_window_s() == pytest.approx(0.5)
    short = hostload.Window(
        read=fabricated((10.0, stat_line(500, 900), 1.0), (10.004, stat_line(502, 900), 1.0))
    ).close()
    assert "other_cores" not in short and "own_cores" not in short
    assert short["note"].startswith("window too short to measure") and short["window_s"] == 0.004
    spec = RunSpec(**TINY, steps=2)
    result = planted(spec, [[0.002, 0.002]], short)
    assert stats.FLAG_CONTENDED not in result.flags
    assert result.replace(flags=[stats.FLAG_CONTENDED]).load_text() == f"other processes: {short['note']}"
    # One tick less than the shortest window: still no figure; at it, a figure.
    assert (
        "note" in hostload.Window(read=fabricated((0.0, stat_line(0, 0), 0.0), (0.49, stat_line(49, 49), 0.0))).close()
    )
    at = hostload.Window(read=fabricated((0.0, stat_line(0, 0), 0.0), (0.5, stat_line(50, 50), 0.2))).close()
    assert at == {"cores": 2, "window_s": 0.5, "own_cores": 0.4, "other_cores": 0.6}


def test_cpu_figures_are_held_to_the_hosts_cores(monkeypatch):
    """Tick edges can read more busy time than the cores had, or less than this process used."""
    monkeypatch.setattr(hostload.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(hostload, "_clock_ticks_per_s", lambda: 100)
    over = hostload.Window(read=fabricated((0.0, stat_line(0, 0), 0.0), (0.5, stat_line(130, 0), 0.1))).close()
    assert over["other_cores"] == 2.0 and over["own_cores"] == 0.2  # raw 2.4 of 2
    under = hostload.Window(read=fabricated((0.0, stat_line(0, 0), 0.0), (1.0, stat_line(90, 110), 3.0))).close()
    assert under["other_cores"] == 0.0 and under["own_cores"] == 2.0  # raw -2.1 and 3 of 2
    stored_before = planted(RunSpec(**TINY, steps=2), [[0.01, 0.01]], {"cores": 2, "other_cores": 3.8})
    assert "other processes used 2 of 2 cores" in stored_before.describe()  # a run stored before the hold
    # Not /proc/stat's shape (no "cpu" line, a word for a number): no figure, no crash.
    for line in ("", "intr 1 2 3", "cpu a b c d e f g h", "cpu 1 2"):
        record = hostload.Window(read=fabricated((0.0, line, 0.0), (1.0, line, 0.5))).close()
        assert "other_cores" not in record and "note" not in record


def test_this_machines_proc_stat_gives_a_held_figure_over_a_long_window_and_a_note_over_a_short_one():
    window = hostload.Window()
    time.sleep(hostload.min_window_s() + 0.1)
    record = window.close()
    cores = record["cores"]
    assert cores == os.cpu_count() and 0 <= record["other_cores"] <= cores and 0 <= record["own_cores"] <= cores
    short = hostload.Window().close()
    assert "other_cores" not in short and short["note"].startswith(hostload.TOO_SHORT)


def test_a_real_run_stores_three_repeats(tmp_path, capsys):
    from dashbench.cli import main
    from dashbench.store import Store

    db = tmp_path / "r.sqlite"
    # The CLI in this process: its TensorFlow is already loaded, a run process would load it again (~6 s).
    code = main(
        [
            "run",
            "--model",
            "conv2d",
            "--batch-size",
            "8",
            "--image-size",
            "16",
            "--width",
            "8",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--repeats",
            "3",
            "--device",
            "cpu",
            "--db",
            str(db),
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    assert len(json.loads(out)["repeats"]) == 3
    with Store(db, read_only=True) as store:
        run_id = store.runs()["run_id"][0]
        stored, samples = store.get_run(run_id), store.samples(run_id)
    found = stored["result"]
    assert isinstance(found, RunResult) and len(found.repeats) == 3 and found.repeat_cv >= 0
    assert found.examples_per_sec == pytest.approx(float(np.median(found.repeats)))
    assert stored["spec"]["repeats"] == 3 and len(samples) == 1 + 3 * 2
    load = found.host_load
    # Six tiny steps are far below hostload's shortest window: a note, never a CPU figure.
    assert load["cores"] >= 1 and load["window_s"] < hostload.min_window_s()
    assert "other_cores" not in load and load["note"].startswith(hostload.TOO_SHORT)
    assert stats.FLAG_CONTENDED not in found.flags


def test_a_cpu_hog_beside_a_run_flags_it_contended():
    hogs = []

    def hogs_through_the_window(event):
        # Started once compiled: hogs burning both cores through the compile slowed the other test
        # worker (~10 s of it here) and measured nothing.
        if event["event"] == "compiled":
            hogs.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2))
            time.sleep(0.3)
        # The measured window holds the events of its samples: a consumer that takes a while (as a
        # slow terminal does) stretches it past hostload's shortest (0.5 s) at any machine's speed,
        # where 1500 steps took ~25 s of both cores here.
        if event["event"] == "sample" and not event["warmup"]:
            time.sleep(0.25)

    try:
        result = loop.run(RunSpec(**TINY, steps=4), hogs_through_the_window)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert len(hogs) == 2 and result.host_load["window_s"] >= 4 * 0.25
    assert stats.FLAG_CONTENDED in result.flags, result.host_load
    assert result.host_load["other_cores"] > stats.CONTENDED_SHARE * result.host_load["cores"]


def test_other_processes_on_the_runs_gpus_come_from_nvml(monkeypatch):
    """NVML cannot run here (no GPU): a stand-in pynvml module lists processes per GPU."""
    import os
    import types

    listed = {0: [os.getpid(), 4242], 1: [4242, 5151], 2: [6161]}
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetComputeRunningProcesses=lambda handle: [types.SimpleNamespace(pid=p) for p in listed[handle]],
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert hostload._gpu_other_processes((0, 1)) == 2  # 4242 and 5151; this process does not count
    assert hostload._gpu_other_processes((0,)) == 1
    assert hostload._gpu_other_processes(()) is None
    record = hostload.Window(gpu_indices=(0,)).close()
    assert record["gpu_other_processes"] == 1
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    assert hostload._gpu_other_processes((0,)) is None
