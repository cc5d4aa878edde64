"""bench/engine_overhead.py's JAX text says what each row measured: one step per host call on both
sides only at steps_per_loop 1, and a verdict for every row on both CPU ratios."""

import argparse

from fixtures.bench_scripts import load


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
    assert "one step per host call on both sides" in lines[0] and "at most 2% behind" in lines[0]
    assert "one step per host call on both sides" not in lines[1]
    assert "10 steps in one jitted call" in lines[1] and "10 calls of one step" in lines[1]
    assert "MORE than 2% behind" in lines[1]  # the total is under 0.98, though the median is not
    assert "50 steps in one jitted call" in lines[2] and "at most 2% behind" in lines[2]
    assert "| 50 | 100 |" in text


def test_jax_rows_measure_the_asked_pairs_at_every_steps_per_loop():
    bench = load("engine_overhead")
    args = argparse.Namespace(model="fashion_mnist_cnn", jax_batch_size=32, jax_width=4, image_size=None,
                              jax_pairs=100, jax_steps=None)
    assert [bench._jax_spec(args, k).steps for k in (1, 10, 50)] == [100, 1000, 5000]


def test_the_tensorflow_table_says_how_each_loop_ran_and_the_load():
    from dashbench.core.spec import RunSpec

    bench = load("engine_overhead")
    spec = RunSpec(model="fashion_mnist_cnn", batch_size=128, width=16, steps=300, warmup=10, steps_per_loop=10,
                   device="cpu")
    result = {name: {"median": 100.0, "total": 100.0, "cpu": cpu, "loops": 30}
              for name, cpu in (("engine", 97.0), ("hand", 100.0), ("fit", 99.0))}
    result["load"] = ((2.5, 2.0, 1.5), (3.0, 2.5, 2.0))
    text = bench.render(spec, result)
    assert "one `tf.function` call" in text and "10 calls of a minimal hand-written one-step" in text
    assert "load average (1/5/15 min) 2.50 / 2.00 / 1.50 → 3.00 / 2.50 / 2.00" in text
    assert "engine 0.970× the hand loop's throughput (MORE than 2% behind)" in text
