"""bench/engine_overhead.py's JAX text says what each row measured: one step per host call on both
sides only at steps_per_loop 1, and a verdict for every row on both CPU ratios."""

import argparse

from bench_scripts import load


def row(k: int, cpu_median: float, cpu_total: float) -> dict:
    return {"steps_per_loop": k, "loops": 100, "engine_ms": 5.0, "hand_ms": 5.0, "wall_median": 1.0,
            "wall_total": 1.0, "cpu_median": cpu_median, "cpu_total": cpu_total, "load_before": (0.5, 0.5, 0.5),
            "load_after": (0.6, 0.5, 0.5), "jax": "0.10.2", "devices": ["cpu:0"]}


def test_each_jax_row_says_what_was_measured_and_its_own_verdict():
    bench = load("engine_overhead")
    args = argparse.Namespace(model="fashion_mnist_cnn", jax_batch_size=32, jax_width=4, image_size=None,
                              jax_pairs=100, jax_steps=None)
    text = bench.render_jax(args, [row(1, 1.0, 1.0), row(10, 0.99, 0.97), row(50, 1.01, 1.02)])
    lines = [line for line in text.splitlines() if line.startswith("- steps_per_loop")]
    assert len(lines) == 3
    assert "one step per host call on both sides" in lines[0] and "within 2%" in lines[0]
    assert "one step per host call on both sides" not in lines[1]
    assert "10 steps in one jitted call" in lines[1] and "10 calls of one step" in lines[1]
    assert "NOT within 2%" in lines[1]  # the total is under 0.98, though the median is not
    assert "50 steps in one jitted call" in lines[2] and "NOT" not in lines[2]
    assert "| 50 | 100 |" in text


def test_jax_rows_measure_the_asked_pairs_at_every_steps_per_loop():
    bench = load("engine_overhead")
    args = argparse.Namespace(model="fashion_mnist_cnn", jax_batch_size=32, jax_width=4, image_size=None,
                              jax_pairs=100, jax_steps=None)
    assert [bench._jax_spec(args, k).steps for k in (1, 10, 50)] == [100, 1000, 5000]
