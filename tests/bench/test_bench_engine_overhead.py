"""bench/engine_overhead.py: per-round ratios with their spread and the machine's load, a verdict per
row on both clocks, and a real (tiny) JAX run that gives every figure the docs table shows."""

import argparse
import json
import os
import re
import subprocess
import sys

from fixtures.bench_scripts import BENCH, load


def spread(median: float, low: float = None) -> dict:
    low = median - 0.01 if low is None else low
    return {
        "median": median,
        "q1": median - 0.02,
        "q3": median + 0.02,
        "rounds": 99,
        "ci_low": low,
        "ci_high": median + 0.01,
    }


def row(k: int, wall: float, cpu: float, cpu_low: float = None) -> dict:
    return {
        "steps_per_loop": k,
        "engine_ms": 5.0,
        "hand_ms": 5.0,
        "ratios": {"wall": spread(wall), "cpu": spread(cpu, cpu_low)},
        "load_before": {"loadavg": [0.5, 0.5, 0.5], "cpus": 2},
        "load_after": {"loadavg": [0.6, 0.5, 0.5], "cpus": 2},
        "one_minute": [0.5, 0.7],
        "host_load": {"cores": 2, "other_cores": 0.25},
        "jax": "0.10.2",
        "devices": ["cpu:0"],
    }


def jax_args(**overrides) -> argparse.Namespace:
    values = dict(
        model="fashion_mnist_cnn", jax_batch_size=32, jax_width=4, image_size=None, jax_pairs=100, jax_steps=None
    )
    return argparse.Namespace(**{**values, **overrides})


def test_a_chunk_is_held_against_the_engine_loops_either_side_of_it():
    paired = load("paired")
    # Load rising steadily over the rounds: the engine's loops take 1, 3, 5 s, the hand chunks between
    # them 2 and 4 s. Held against the loop before it alone, the hand would look 2x / 1.33x slower.
    assert paired.bracketed_ratios([1.0, 3.0, 5.0], [2.0, 4.0, 6.0]) == [1.0, 1.0]
    assert paired.bracketed_ratios([1.0], [1.0]) == []


def test_the_spread_brackets_the_median_and_the_verdict_names_the_clock_that_misses():
    paired = load("paired")
    s = paired.spread([0.9, 0.95, 1.0, 1.05, 1.1, 1.0, 0.97])
    assert s["rounds"] == 7 and s["median"] == 1.0
    assert s["q1"] <= s["median"] <= s["q3"] and s["ci_low"] <= s["median"] <= s["ci_high"]
    below, unsettled, met = spread(0.95), spread(0.975, 0.96), spread(1.0)  # CI highs 0.96, 0.985, 1.01
    assert paired.verdict({"wall": below, "cpu": met}).startswith("is BELOW the 0.98 goal by wall time (median 0.950")
    assert "; meets the 0.98 goal by CPU time (median 1.000, 95% interval 0.990–1.010)" in paired.verdict(
        {"wall": below, "cpu": met}
    )
    assert (
        "is not settled against the 0.98 goal by wall time: median 0.975, its 95% interval 0.960–0.985 spans"
        in paired.verdict({"wall": unsettled, "cpu": met})
    )
    assert "BELOW" not in paired.verdict({"wall": unsettled, "cpu": met})
    # An end that rounds onto the goal keeps a fourth decimal, so "0.980–0.994 spans 0.98" cannot be read.
    assert "its 95% interval 0.9796–0.997 spans 0.98" in paired.verdict({"wall": spread(0.987, 0.9796), "cpu": met})


def test_each_jax_row_says_what_was_measured_and_its_own_verdict():
    bench = load("engine_overhead")
    text = bench.render_jax(jax_args(), [row(1, 1.0, 1.0), row(10, 1.01, 0.96), row(50, 1.01, 1.02, 0.975)])
    lines = [line for line in text.splitlines() if line.startswith("- steps_per_loop")]
    assert len(lines) == 3
    assert "one step per host call on both sides" in lines[0] and "BELOW" not in lines[0]
    assert "meets the 0.98 goal by wall time" in lines[0] and "meets the 0.98 goal by CPU time" in lines[0]
    assert "one step per host call on both sides" not in lines[1]
    assert "10 steps in one jitted call" in lines[1] and "10 calls of one step" in lines[1]
    assert "is BELOW the 0.98 goal by CPU time" in lines[1]
    assert "50 steps in one jitted call" in lines[2] and "not settled against the 0.98 goal by CPU time" in lines[2]
    assert (
        "| 50 | 99 | 5.00 | 5.00 | 1.010 [0.990–1.030] (CI 1.000–1.020) | 1.020 [1.000–1.040] (CI 0.975–1.030) |"
        in text
    )
    assert "0.50 / 0.50 / 0.50 → 0.60 / 0.50 / 0.50 (0.50–0.70); others used 0.25 of 2 cores |" in text
    assert "(2 CPUs)" in text


def test_jax_rows_measure_the_asked_rounds_at_every_steps_per_loop():
    bench = load("engine_overhead")
    assert [bench._jax_spec(jax_args(), k).steps for k in (1, 10, 50)] == [100, 1000, 5000]


def test_the_tensorflow_table_says_how_each_loop_ran_and_the_load():
    from dashbench.core.spec import RunSpec

    bench = load("engine_overhead")
    spec = RunSpec(
        model="fashion_mnist_cnn", batch_size=128, width=16, steps=300, warmup=10, steps_per_loop=10, device="cpu"
    )
    summary = {
        "ms_per_step": {"engine": 30.0, "hand": 29.0, "fit": 31.0},
        "against": {
            "hand": {"wall": spread(0.99), "cpu": spread(0.96)},
            "fit": {"wall": spread(1.02), "cpu": spread(1.03)},
        },
        "load_before": {"loadavg": [2.5, 2.0, 1.5], "cpus": 2},
        "load_after": {"loadavg": [3.0, 2.5, 2.0], "cpus": 2},
        "one_minute": [2.6, 2.9],
        "host_load": {"cores": 2, "window_s": 0.1, "note": "too short"},
    }
    text = bench.render(spec, summary)
    assert "one `tf.function` call: a `tf.range` loop" in text and "10 calls of a minimal hand-written one-step" in text
    assert "`model.fit` epoch of 10 steps" in text and "30 rounds" not in text and "99 rounds of 10 steps" in text
    assert (
        "load average (1/5/15 min) 2.50 / 2.00 / 1.50 → 3.00 / 2.50 / 2.00 (1-min, over the rounds: 2.60–2.90) on 2 CPUs"
        in text
    )
    assert "| hand-written tf.function | 99 | 30.00 | 29.00 |" in text
    assert "is BELOW the 0.98 goal by CPU time (median 0.960, 95% interval 0.950–0.970) |" in text
    assert "| Keras model.fit | 99 | 30.00 | 31.00 | 1.020 [1.000–1.040]" in text
    del summary["against"]["fit"]
    one = bench.render(
        RunSpec(model="fashion_mnist_cnn", batch_size=8, steps=20, steps_per_loop=1, device="cpu"), summary
    )
    assert "model.fit" not in one and "tf.range" not in one and "rounds of 1 step:" in one and "then 1 call of" in one


def test_a_tiny_jax_run_gives_every_figure_of_its_row(tmp_path):
    out = tmp_path / "figures.json"
    command = [
        sys.executable,
        str(BENCH / "engine_overhead.py"),
        "--only",
        "jax",
        "--no-write",
        "--json",
        str(out),
        "--jax-pairs",
        "4",
        "--jax-steps-per-loop",
        "2",
        "--jax-width",
        "2",
        "--jax-batch-size",
        "4",
        "--image-size",
        "8",
    ]
    # A given CPU peak: the engine then skips its matmul probe, which this test does not look at.
    env = {**os.environ, "DASHBENCH_CPU_PEAKS": json.dumps({"float32": 0.1})}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["jax"]
    assert [r["steps_per_loop"] for r in rows] == [2]
    for r in rows:
        assert len(r["seconds"]["engine"]["wall"]) == len(r["seconds"]["hand"]["cpu"]) == 4
        for clock in ("wall", "cpu"):
            s = r["ratios"][clock]
            assert s["rounds"] == 3  # the last hand chunk has no engine loop after it
            assert s["q1"] <= s["median"] <= s["q3"] and s["ci_low"] <= s["median"] <= s["ci_high"] and s["median"] > 0
        assert len(r["load_before"]["loadavg"]) == 3 and r["load_before"]["cpus"] == os.cpu_count()
        assert len(r["one_minute"]) == 4
    assert [line for line in done.stdout.splitlines() if line.startswith("| 2 | 3 |")]
    assert "- steps_per_loop 2 (the engine: 2 steps in one jitted call" in done.stdout


def test_the_cards_model_fit_figure_is_the_one_the_bench_wrote_into_the_docs():
    """The card quotes one measurement: the model.fit row of docs/PERFORMANCE.md's engine block, by
    CPU time (engine/fit median ratio, inverted), and says the wall-time interval spans 1 only while it does."""
    from dashbench.results import result_text

    page = (BENCH.parent / "docs" / "PERFORMANCE.md").read_text()
    block = page.split("<!-- engine -->")[1].split("<!-- /engine -->")[0]
    (row,) = [line for line in block.splitlines() if line.startswith("| Keras model.fit |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    wall = [float(v) for v in re.match(r"([\d.]+) \[[\d.]+–[\d.]+\] \(CI ([\d.]+)–([\d.]+)\)", cells[4]).groups()]
    cpu = float(cells[5].split()[0])
    assert result_text.FIT_RATIO["tensorflow"] == round(1 / cpu, 2)
    assert ("could not tell them apart" in result_text.FIT_CLOCK) == (wall[1] <= 1.0 <= wall[2])
