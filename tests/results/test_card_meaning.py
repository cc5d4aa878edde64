"""What a run's card means: the headline is the throughput from total time, the median step's is
beside it, a skew over 20% between them is flagged with its likely cause, the timed loop is named,
the MFU says which peak it divided by and when that was measured, and a run whose measured window was
too short to take the machine's load says so instead of looking clean."""

import pytest

from dashbench.core import stats
from dashbench.results.result import RunResult


def card(**extra) -> RunResult:
    fields = dict(
        model="user_transformer.py:build",
        device="cpu",
        accelerator="CPU",
        accelerator_count=1,
        backend="tensorflow",
        global_batch_size=64,
        data="synthetic",
        examples_per_sec=449.0,
        step_time_median_s=64 / 722.0,
        samples=20,
        steps=20,
        host_load={"cores": 2, "window_s": 3.1, "own_cores": 0.4, "other_cores": 1.6},
    )
    return RunResult(**{**fields, **extra})


def test_the_headline_names_its_throughput_and_the_median_steps_beside_it():
    result = card()
    text = result.describe()
    assert "449.0 examples/s from total time; 722.0 from the median step" in text.splitlines()[0]
    figures = {label: (value, detail) for label, value, detail in result.figures()}
    assert figures["examples/s"][0] == "449.0" and "the headline" in figures["examples/s"][1]
    assert figures["examples/s, median step"][0] == "722.0"
    assert "dashbench's compiled train step" in figures["timed loop"][0] and "model.fit" in figures["timed loop"][0]


def test_a_skew_over_a_fifth_is_flagged_with_its_likely_cause():
    assert stats.skewed(449.0, 722.0) and not stats.skewed(449.0, 500.0)
    contended = card(flags=[stats.FLAG_SKEWED, stats.FLAG_CONTENDED])
    (note,) = [text for flag, text in contended.flag_notes() if flag == stats.FLAG_SKEWED]
    assert "61% above the headline" in note and "likely cause: contention (other processes used 1.6 of 2 cores)" in note
    quiet = card(flags=[stats.FLAG_SKEWED], host_load={"cores": 2, "window_s": 3.0, "other_cores": 0.0})
    (note,) = [text for flag, text in quiet.flag_notes() if flag == stats.FLAG_SKEWED]
    assert "a slow tail of steps" in note and "--warmup" in note
    read_from_disk = card(flags=[stats.FLAG_SKEWED], data="fashion_mnist")
    assert "likely cause: input" in read_from_disk.flag_notes()[0][1]


def test_a_run_too_short_for_the_load_window_says_so_instead_of_looking_clean():
    short = card(
        host_load={"cores": 2, "window_s": 0.12, "note": "window too short to measure (0.12 s; it takes 0.5 s)"}
    )
    assert short.flags == []
    (flags_line,) = [line for line in short.describe().splitlines() if line.startswith("  flags:")]
    assert "too short to judge contention" in flags_line and "none" not in flags_line
    judged = card(host_load={"cores": 2, "window_s": 3.0, "other_cores": 0.1})
    assert "flags: none" in judged.describe()


@pytest.mark.parametrize("source", ["provisional", "calibrated"])
def test_the_mfu_says_which_peak_it_divided_by_and_when_it_was_measured(source):
    result = card(achieved_tflops=0.05, peak_tflops=0.24, peak_source=source, mfu=0.05 / 0.24, peak_as_of=1796478000.0)
    detail = dict((label, detail) for label, _, detail in result.figures())["achieved TFLOP/s"]
    assert f"of 0.24 TFLOP/s peak ({source}, measured 2026-12-05 " in detail
