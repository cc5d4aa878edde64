"""`sweep --find-max-batch`: doubling, then bisection between the last fit and the first OOM, each try
its own run process, recorded as a sweep; --json names max_batch_size."""

import json
import os
import subprocess
import sys

import pytest

from dashbench.cli import find_max_batch, main
from dashbench.core.spec import RunSpec
from dashbench.hardware import host
from dashbench.jobs import max_batch
from dashbench.store import Store
from dashbench.workloads import memory


@pytest.mark.parametrize(
    "boundary,start,top", [(20, 4, 1000), (1, 1, 64), (64, 8, 64), (100, 8, 64), (5, 8, 64), (777, 8, 65536)]
)
def test_the_search_finds_the_boundary_exactly(boundary, start, top):
    tried = []

    def fits(batch):
        tried.append(batch)
        return batch <= boundary

    largest, wall = find_max_batch.search(fits, start, top)
    if boundary >= top:
        assert (largest, wall) == (top, None)
    elif boundary < start:
        assert (largest, wall) == (None, start)
    else:
        assert (largest, wall) == (boundary, boundary + 1)
    assert len(tried) == len(set(tried)) and max(tried) <= top  # no batch twice, none past the bound


def test_a_try_that_fails_otherwise_stops_the_search():
    largest, wall = find_max_batch.search(lambda batch: None if batch == 32 else True, 8, 1000)
    assert (largest, wall) == (16, None)


def test_bad_bounds_and_a_missing_batch_sizes_are_one_line(tmp_path, capsys):
    db = str(tmp_path / "runs.db")
    base = ["sweep", "--model", "conv2d", "--device", "cpu", "--db", db]
    assert main([*base]) == 2
    assert "batch_sizes: give --batch-sizes" in capsys.readouterr().err
    assert main([*base, "--find-max-batch", "--start-batch", "64", "--max-batch", "32"]) == 2
    assert "max_batch: --max-batch 32 is below --start-batch 64" in capsys.readouterr().err
    assert main([*base, "--find-max-batch", "--batch-sizes", "8,16"]) == 2
    assert "leave out --batch-sizes" in capsys.readouterr().err
    assert not os.path.exists(db) or not len(Store(db, read_only=True).runs())


def test_the_best_value_batch_is_named_beside_the_largest():
    points = {
        8: {"batch_size": 8, "status": "done", "examples_per_sec": 100.0},
        16: {"batch_size": 16, "status": "done", "examples_per_sec": 180.0},
        32: {"batch_size": 32, "status": "done", "examples_per_sec": 150.0},
        64: {"batch_size": 64, "status": "oom", "examples_per_sec": None},
    }
    summary = max_batch.summarise(points, 32, 64, 1000)
    assert summary["max_batch_size"] == 32 and summary["oom_batch_size"] == 64
    assert summary["best_value_batch_size"] == 16 and summary["max_batch_throughput_share"] == pytest.approx(150 / 180)
    assert [p["batch_size"] for p in summary["points"]] == [8, 16, 32, 64]
    lines = max_batch.summary_lines({"sweep_id": "s", **summary})
    assert "largest batch that fits: 32 (batch 64 ran out of memory)" in lines
    assert "best throughput per dollar: batch 16; the largest batch gives 83% of its throughput" in lines


def test_find_max_batch_on_a_capped_cpu_finds_the_boundary_the_cap_sets(tmp_path):
    """The cap: a host budget (DASHBENCH_MEMORY_BUDGET_GB) that the sweep's run processes inherit. The
    boundary is what the estimate allows under it; every try is a recorded run of the sweep."""
    shapes = dict(model="conv2d", image_size=64, width=32, device="cpu")
    one = memory.estimate(RunSpec(batch_size=1, **shapes))
    budget = one.fixed + 20.5 * one.per_example  # room for 20 examples
    boundary = one.max_batch(budget)
    assert boundary == 20
    db = tmp_path / "runs.db"
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(
        {
            host.BUDGET_ENV: repr(budget / memory.GB),
            "DASHBENCH_LOCK_DIR": str(tmp_path / "locks"),
            "DASHBENCH_CPU_PROBE_SIZE": "256",
        }
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dashbench",
            "sweep",
            "--find-max-batch",
            "--start-batch",
            "16",
            "--max-batch",
            "4096",
            "--model",
            "conv2d",
            "--image-size",
            "64",
            "--width",
            "32",
            "--device",
            "cpu",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--db",
            str(db),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert abs(out["max_batch_size"] - boundary) <= 1 and out["oom_batch_size"] == out["max_batch_size"] + 1
    points = {p["batch_size"]: p for p in out["points"]}
    # From 16 it doubles to 32, past the cap, then bisects down to the boundary (the search alone:
    # test_the_search_finds_the_boundary_exactly); each try below 16 would be one more TF process.
    assert {b for b, p in points.items() if p["status"] == "done"} == {16, out["max_batch_size"]}
    assert 32 in points and min(points) == 16
    assert all(p["status"] == "oom" for b, p in points.items() if b > out["max_batch_size"])
    assert all(p["peak_memory_bytes"] > 0 for p in points.values() if p["status"] == "done")
    assert out["best_value_batch_size"] in points
    with Store(db, read_only=True) as store:
        runs = store.runs(sweep_id=out["sweep_id"])
        assert sorted(runs["batch_size"]) == sorted(points)  # each try is a run of the sweep
        wall = store.get_run(points[out["oom_batch_size"]]["run_id"])
    assert wall["status"] == "oom" and host.BUDGET_ENV in wall["error"]
    assert wall["error"].startswith("out of memory before it started: batch_size:")


STAND_IN = """
import json, sys
open(sys.argv[1], "w").write(json.dumps(sys.argv[2:]))
print("sweep sweep-s1: the largest batch of conv2d that fits on cpu", file=sys.stderr)
print(json.dumps({"sweep_id": "sweep-s1", "max_batch_size": 20, "oom_batch_size": 21, "bound": 65536,
                  "bound_reached": False, "best_value_batch_size": 16, "max_batch_throughput_share": 0.9,
                  "points": []}, indent=2))
"""


def test_the_run_page_button_starts_the_search_and_shows_its_answer(tmp_path, monkeypatch):
    import time
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    script, argv_file = tmp_path / "stand_in.py", tmp_path / "argv.json"
    script.write_text(STAND_IN)
    monkeypatch.setattr(max_batch, "SWEEP_COMMAND", [sys.executable, str(script), str(argv_file)])
    monkeypatch.setenv("DASHBENCH_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.delenv("DASHBENCH_READ_ONLY", raising=False)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/run.py").run()
    at.selectbox(key="run_model").set_value("conv2d")
    at.selectbox(key="run_device").set_value("cpu")
    at.number_input(key="run_batch_size").set_value(4)
    at.button(key="run_find_max").click().run()
    assert not at.exception, [e.value for e in at.exception]
    deadline = time.monotonic() + 60
    while max_batch.state(str(tmp_path / "runs.sqlite"))["running"] and time.monotonic() < deadline:
        time.sleep(0.2)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    argv = json.loads(argv_file.read_text())
    assert argv[:4] == ["--model", "conv2d", "--start-batch", "4"] and "--json" in argv
    assert argv[argv.index("--device") + 1] == "cpu"
    shown = "\n".join(s.value for s in at.success).replace("\\", "").replace("\u200b", "")  # md_text's escapes
    assert "largest batch that fits: 20 (batch 21 ran out of memory)" in shown
    assert "best throughput per dollar: batch 16" in shown


def test_a_model_file_changed_after_the_click_is_refused_when_the_search_starts(tmp_path):
    """The Run page's search (jobs/max_batch.py) passes the hash the file had at the click: the sweep
    refuses at its start, in one line, with nothing stored, rather than at each try."""
    import time
    from pathlib import Path

    from dashbench.workloads import model_file

    path = tmp_path / "m.py"
    path.write_text((Path(__file__).resolve().parents[2] / "examples" / "models" / "mlp.py").read_text())
    spec = RunSpec(batch_size=8, device="cpu", **model_file.reference(f"{path}:build_tiny"))  # the click
    path.write_text(path.read_text() + "\n# edited\n")
    now = model_file.sha256_of(path)
    db = str(tmp_path / "runs.sqlite")
    max_batch.launch(spec, db)
    deadline = time.monotonic() + 300
    while max_batch.state(db)["running"] and time.monotonic() < deadline:
        time.sleep(0.2)
    search = max_batch.state(db)
    assert search["returncode"] == 2 and search["summary"] is None
    lines = Path(search["log_path"]).read_text().strip().splitlines()
    assert lines == [
        f"error: model: m.py changed since the search was asked for (sha256 {spec.model_sha256[:12]}… "
        f"then, {now[:12]}… now): refused; ask again to search the new file"
    ], lines
    assert not Path(db).exists() or Store(db).runs().empty


@pytest.mark.parametrize(
    "given,line",
    [
        ("abc", "error: expect_sha256: must be a sha256 of 64 hex digits, got 'abc'"),
        ("0" * 64, "error: expect_sha256: checks a model file's hash, and --model conv2d names no file"),
    ],
)
def test_a_bad_expected_hash_is_one_line(given, line, tmp_path, capfd):
    db = tmp_path / "runs.sqlite"
    assert (
        main(
            [
                "sweep",
                "--model",
                "conv2d",
                "--device",
                "cpu",
                "--find-max-batch",
                "--expect-sha256",
                given,
                "--db",
                str(db),
            ]
        )
        == 2
    )
    assert capfd.readouterr().err.strip() == line
    assert not db.exists()
