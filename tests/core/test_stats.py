"""Step-time statistics, CI, MFU, flags and the peak table: plain numbers, no TensorFlow."""

import math

import pytest

from dashbench.core import stats
from dashbench.hardware import peaks


def samples(durations, steps=1):
    return [{"steps": steps, "duration_s": d} for d in durations]


def test_throughput_is_examples_over_measured_time():
    out = stats.step_time_stats(samples([0.1, 0.2, 0.3], steps=2), global_batch_size=10)
    assert out["examples_per_sec"] == pytest.approx(10 * 6 / 0.6)
    assert out["step_time_median_s"] == pytest.approx(0.1)
    assert out["samples"] == 3
    assert out["step_time_p10_s"] <= out["step_time_median_s"] <= out["step_time_p90_s"]


def test_ci95_brackets_throughput_and_narrows_with_more_samples():
    few = stats.step_time_stats(samples([0.10, 0.12, 0.11, 0.13]), 32)
    many = stats.step_time_stats(samples([0.10, 0.12, 0.11, 0.13] * 10), 32)
    lo, hi = few["examples_per_sec_ci95"]
    assert lo < few["examples_per_sec"] < hi
    assert many["examples_per_sec_ci95"][1] - many["examples_per_sec_ci95"][0] < hi - lo
    # t-interval by hand: mean 0.115, sd 0.0129, t(3) = 3.182
    half = 3.182 * 0.012909944 / 2
    assert lo == pytest.approx(32 / (0.115 + half), rel=1e-4)


def test_one_sample_has_no_interval():
    out = stats.step_time_stats(samples([0.5]), 4)
    assert out["examples_per_sec_ci95"] == [None, None]
    assert out["step_time_std_s"] == 0.0


def test_t_table():
    assert stats.t95(1) == pytest.approx(12.706)
    assert stats.t95(22) == stats.t95(20)
    assert stats.t95(1000) == 1.96
    with pytest.raises(ValueError):
        stats.t95(0)


def test_seed_conv_figure_is_above_a_tpu_v2_8():
    # Seed 000: batch_parallel over 8 shards, each shard the whole 128-image conv (80.5 GFLOP),
    # in 1.22 ms on a TPU v2-8 (4 chips): 528 TFLOP/s against a 180 TFLOP/s peak.
    achieved = stats.achieved_tflops(80.5e9 / 128, 8 * 128 / 1.22e-3)
    peak = peaks.datasheet_peak_tflops("TPU v2", "float32") * 4
    assert peak == 180
    assert stats.above_peak(achieved, peak)
    assert achieved / peak == pytest.approx(2.93, abs=0.01)
    # One shard's worth alone (66 TFLOP/s, not the 66 PFLOP/s SEEDS.md says) would be plausible.
    assert not stats.above_peak(stats.achieved_tflops(80.5e9 / 128, 128 / 1.22e-3), peak)
    assert stats.mfu(1.0, 4.0) == 0.25
    assert stats.mfu(None, 4.0) is None and stats.mfu(1.0, None) is None


def test_soft_margin_for_measured_peaks():
    assert not stats.above_peak(1.2, 1.0, margin=peaks.CPU_SOFT_MARGIN)
    assert stats.above_peak(1.6, 1.0, margin=peaks.CPU_SOFT_MARGIN)
    assert not stats.above_peak(None, 1.0)


def test_loss_flags():
    assert stats.non_finite([1.0, float("nan")])
    assert stats.non_finite([1.0, None])
    assert not stats.non_finite([1.0, 0.5])
    assert stats.loss_not_falling([1.0, 1.0, 1.1, 1.2])
    assert not stats.loss_not_falling([2.0, 1.5, 1.0, 0.5])
    assert not stats.loss_not_falling([1.0])  # too short to say


def test_placement_mismatch():
    cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    assert not stats.placement_mismatch("cpu", [cpu])
    assert stats.placement_mismatch("tpu", [cpu])  # the seed's runtime switch that changed nothing
    assert stats.placement_mismatch("gpu", [gpu, cpu])
    assert not stats.placement_mismatch(
        "tpu", ["/device:TPU_REPLICATED_CORE:0", "/job:worker/replica:0/task:0/device:TPU:3"]
    )
    assert stats.placement_mismatch("gpu", [])


def test_finite_or_none():
    assert stats.finite_or_none(float("inf")) is None
    assert stats.finite_or_none(2) == 2.0


def test_peak_table_rows_carry_sources_and_dense_figures():
    assert set(peaks.table()) >= {
        "TPU v2",
        "TPU v3",
        "TPU v4",
        "TPU v5e",
        "TPU v5p",
        "TPU v6e",
        "K80",
        "P100",
        "V100",
        "T4",
        "L4",
        "A100",
        "H100",
        "H200",
    }
    assert all(r["source"] and r["as_of"] for r in peaks.table().values())
    assert peaks.datasheet_peak_tflops("H100", "mixed_bfloat16") == 989  # dense, not the sparse 1979
    assert peaks.datasheet_peak_tflops("V100", "mixed_float16") == 125
    assert peaks.datasheet_peak_tflops("V100", "float32", tf32=True) == 15.7  # no TF32 on Volta
    assert peaks.datasheet_peak_tflops("A100", "float32", tf32=True) == 156
    assert peaks.datasheet_peak_tflops("A100", "float32") == 19.5
    assert peaks.datasheet_peak_tflops("K80", "mixed_float16") == 4.37  # no fast half precision
    assert peaks.datasheet_peak_tflops("TPU v4", "float32") == 275
    assert peaks.datasheet_peak_tflops("Some GPU", "float32") is None
    assert peaks.peak_source("T4") == "datasheet" and peaks.peak_source("CPU") == "measured"
    assert all(math.isfinite(r["bf16_tflops"] or r["fp32_tflops"]) for r in peaks.table().values())
    assert peaks.datasheet_peak_tflops("NVIDIA H100 PCIe", "mixed_bfloat16") == 756  # the variant, not SXM
