"""bench/fleet_overhead.py's report: medians, the per-run difference and its CPU cost, from measured rows."""

from fixtures.bench_scripts import load


def test_the_report_gives_both_ways_and_the_per_run_cost_of_ray():
    bench = load("fleet_overhead")

    def row(first, total, cli, ray):
        return {"first_step_s": first, "total_s": total, "code": 0, "cpu_cli_s": cli, "cpu_ray_s": ray}

    found = {
        "rows": {
            "local": [row(10, 12, 8, 0.5), row(11, 14, 9, 0.7), row(30, 40, 8.5, 2.0)],
            "cluster": [row(13, 16, 1.5, 9), row(14, 18, 1.0, 10), row(12, 15, 1.2, 9.5)],
        },
        "jobs": [1.5, 1.2, 2.0],
        "head_up_s": 12.0,
        "load": ((1.0, 2.0, 3.0), (1.5, 2.5, 3.0)),
    }
    text = bench.report(found)
    assert "| local (`run --db`) | 11.0 s | 14.0 s | 8.5 | 0.7 (idle cluster) | [0, 0, 0] |" in text
    assert "| cluster (`run --cluster --on gpu-1 --db`) | 13.0 s | 16.0 s | 1.2 | 9.5 |" in text
    assert "+2.0 s to the first measured step and +2.0 s to the end" in text
    # (1.2 + 9.5) - (8.5 + 0.7 * 16 / 14) = 1.4
    assert "+1.4 CPU s per run" in text and "Ray's processes beyond the run 0.2 CPU s" in text  # 9.5 - 0.8 - 8.5
    assert "median 1.50 s over 3 (min 1.20, max 2.00)" in text and "1.0/2.0 before" in text
