"""bench/stopwatch_check.py: its options pick the rows' models and shapes, a row's ratios are the
stopwatch's step over the headline's and the median step's, and a tiny real run writes its block into
a page without touching the rest of it."""

import json
import os
import subprocess
import sys

import pytest
from fixtures.bench_scripts import BENCH, load


def pair(short: float, long_: float, engine: float, median: float) -> dict:
    return {"wall_short_s": short, "wall_long_s": long_, "engine_step_s": engine, "median_step_s": median}


def planted_row(**overrides) -> dict:
    # N = 10: the stopwatch's step is (long − short) / 20, i.e. 10 ms, 12 ms and 11 ms.
    row = {
        "backend": "jax",
        "model": "llama",
        "shape": {"batch_size": 4, "seq_len": 32},
        "steps": 10,
        "tries": [pair(0.1, 0.3, 0.010, 0.008), pair(0.1, 0.34, 0.012, 0.010), pair(0.1, 0.32, 0.011, 0.0105)],
        "load_before": {"loadavg": [1.5, 1.0, 0.5], "cpus": 2},
        "load_after": {"loadavg": [2.0, 1.25, 0.75], "cpus": 2},
        "host_load": {"cores": 2, "other_cores": 0.75},
    }
    return {**row, **overrides}


def test_the_options_pick_models_and_set_their_shapes():
    bench = load("stopwatch_check")
    args = bench.parser().parse_args(["--shape", "llama:seq_len=64,width=48", "--shape", "bilstm:seq_len=8"])
    shapes = bench.shapes_of(args)
    assert list(shapes) == ["conv2d", "fashion_mnist_cnn", "llama", "bilstm"]
    assert shapes["llama"] == {"batch_size": 4, "seq_len": 64, "width": 48, "layers": 2}
    assert shapes["bilstm"] == {"seq_len": 8}
    args = bench.parser().parse_args(["--models", "conv2d", "--shape", "conv2d:batch_size=2"])
    assert bench.shapes_of(args) == {"conv2d": {"batch_size": 2, "image_size": 64, "width": 16}}
    for bad in ("llama:seq_len", "llama:seq_len=x", ":width=2"):
        with pytest.raises(SystemExit):
            bench.parser().parse_args(["--shape", bad])


def test_a_rows_ratios_are_the_stopwatch_over_the_headline_and_the_median_step():
    bench = load("stopwatch_check")
    s = bench.summarize(planted_row())
    assert s["ms"]["stopwatch"] == pytest.approx(11.0) and s["ms"]["median"] == pytest.approx(10.0)
    assert s["ratios"]["headline"]["median"] == pytest.approx(1.0)  # 10/10, 12/12, 11/11
    assert s["ratios"]["median"]["median"] == pytest.approx(1.2)  # 10/8, 12/10, 11/10.5
    text = bench.render([planted_row()], "2026-12-06", "abc123")
    line = next(line for line in text.splitlines() if line.startswith("| `llama`"))
    assert "| `llama` (batch_size 4, seq_len 32) | jax | 3 | 10 / 30 | 11.00 | 11.00 | 10.00 |" in line
    assert "| 1.000 [1.000–1.000] | 1.200 [1.124–1.225] | yes / **no** |" in line
    assert "1.50 / 1.00 / 0.50 → 2.00 / 1.25 / 0.75; others used 0.75 of 2 cores |" in line
    assert "measured 2026-12-06, commit abc123, 2 CPUs" in text and "`doctor` allows 3%" in text
    # A run that reported no median step leaves its ratio blank rather than dividing by nothing.
    blank = planted_row(tries=[pair(0.1, 0.3, 0.010, None)])
    assert "| 1.000 [1.000–1.000] | — | yes / no ratio |" in bench.render([blank], "d", "c")


def test_figures_saved_as_json_are_written_into_the_page_between_the_markers(tmp_path):
    bench = load("stopwatch_check")
    saved, page = tmp_path / "rows.json", tmp_path / "PERFORMANCE.md"
    saved.write_text(json.dumps({"measured": "2026-12-06", "commit": "abc", "rows": [planted_row()]}))
    page.write_text("# Performance\n\n<!-- stopwatch -->\nold figures\n<!-- /stopwatch -->\n\n## After\n")
    assert bench.main(["--render-json", str(saved), "--doc", str(page)]) == 0
    text = page.read_text()
    assert "old figures" not in text and text.endswith("<!-- /stopwatch -->\n\n## After\n")
    assert "| `llama` (batch_size 4, seq_len 32) | jax | 3 |" in text


def test_a_tiny_real_run_measures_every_try_and_writes_its_block(tmp_path):
    out, page = tmp_path / "rows.json", tmp_path / "PERFORMANCE.md"
    command = [sys.executable, str(BENCH / "stopwatch_check.py"), "--backends", "jax", "--models", "conv2d"]
    command += ["--shape", "conv2d:batch_size=2,image_size=8,width=2", "--steps", "2", "--tries", "2"]
    command += ["--json", str(out), "--doc", str(page)]
    # A given CPU peak: the engine then skips its matmul probe, which this test does not look at.
    env = {**os.environ, "DASHBENCH_CPU_PEAKS": json.dumps({"float32": 0.1})}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["backend"] == "jax" and row["steps"] == 2 and len(row["tries"]) == 2
    for p in row["tries"]:
        # A loaded machine may make the 6-step run no longer than the 2-step one: no timing assertion.
        assert (
            p["wall_short_s"] > 0 and p["wall_long_s"] > 0 and p["engine_step_s"] is not None and p["median_step_s"] > 0
        )
    assert len(row["load_before"]["loadavg"]) == 3 and row["load_before"]["cpus"] == os.cpu_count()
    assert "| `conv2d` (batch_size 2, image_size 8, width 2) | jax | 2 | 2 / 6 |" in page.read_text()
