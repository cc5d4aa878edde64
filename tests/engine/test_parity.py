"""The convergence-parity rule (views.parity) on stored-run dicts: who is the reference, what the
tolerance is made of, when a departure is one. Real training on both backends is judged in
tests/engine/test_accuracy_real.py."""

import math

from fixtures.parity_runs import throughput_run

from dashbench.views.compare import parity


def curve(start, fall, n=8, wobble=0.0):
    return [start * math.exp(-fall * i) + wobble * (-1) ** i for i in range(n)]


def verdicts(runs):
    return parity.compare([s for run in runs for s in parity.series_of(run)])


def test_a_run_inside_the_seed_spread_passes_and_one_beyond_it_is_flagged_where_it_departs():
    reference = [
        throughput_run("tf-seed0", "tensorflow", 0, curve(3.0, 0.2, wobble=0.05)),
        throughput_run("tf-seed1", "tensorflow", 1, curve(3.2, 0.2, wobble=-0.05)),
    ]
    alike = throughput_run("jax-seed0", "jax", 0, curve(3.1, 0.2))
    (verdict,) = verdicts(reference + [alike])
    assert verdict.reference == "CPU · tensorflow" and not verdict.flags and not verdict.note
    assert verdict.compared == ["#-seed0 seed 0 on CPU · jax"]
    # From step 5 on, the loss climbs back: far beyond 3× the two seeds' spread, at two steps in a row.
    broken = throughput_run("jax-broken", "jax", 0, curve(3.1, 0.2)[:4] + [5.0, 6.0, 7.0, 8.0])
    (verdict,) = verdicts(reference + [broken])
    (flag,) = verdict.flags
    assert (flag.run_id, flag.reference_run_id, flag.step, flag.metric) == ("jax-broken", "tf-seed0", 5, "loss")
    assert "departs from #-seed0 on CPU · tensorflow in loss from step 5" in flag.text()


def test_one_step_out_is_noise_and_a_nan_departs():
    reference = [
        throughput_run("a", "tensorflow", 0, curve(3.0, 0.2)),
        throughput_run("b", "tensorflow", 1, curve(3.1, 0.2)),
    ]
    spike = curve(3.0, 0.2)
    spike[3] += 2.0
    assert not verdicts(reference + [throughput_run("c", "jax", 0, spike)])[0].flags
    nan = curve(3.0, 0.2)[:6] + [None, None]
    (flag,) = verdicts(reference + [throughput_run("d", "jax", 0, nan)])[0].flags
    assert flag.step == 7 and flag.value is None and "not finite" in flag.text()


def test_a_reference_with_one_seed_sets_no_tolerance_and_says_so():
    runs = [throughput_run("a", "tensorflow", 0, curve(3.0, 0.2)), throughput_run("b", "jax", 0, curve(9.0, 0.0))]
    (verdict,) = verdicts(runs)
    assert not verdict.flags and "has one seed" in verdict.note
    assert "has one seed" in "\n".join(parity.flag_lines([verdict]))


def test_one_device_or_another_setup_is_not_compared():
    same_device = [
        throughput_run("a", "tensorflow", 0, curve(3.0, 0.2)),
        throughput_run("b", "tensorflow", 1, curve(3.0, 0.3)),
    ]
    assert verdicts(same_device) == []
    other = throughput_run("c", "jax", 0, curve(3.0, 0.2))
    other["result"]["global_batch_size"] = 32
    assert verdicts(same_device + [other]) == []


def test_validation_accuracy_tolerance_is_at_least_the_binomial_noise():
    """Two seeds that agree to the last digit set no zero tolerance: 0.01 apart on 200 examples is noise."""
    curves = [{1: 0.95, 2: 0.96}, {1: 0.95, 2: 0.96}]
    assert parity.seed_sigma(curves) == 0.0
    floor = parity.accuracy_floor(curves, 200)
    assert math.isclose(floor, math.sqrt(2 * 0.955 * 0.045 / 200))
    assert parity.departure({1: 0.94, 2: 0.95}, curves[0], parity.TOLERANCE_SIGMAS * floor) is None
    assert parity.departure({1: 0.10, 2: 0.11}, curves[0], parity.TOLERANCE_SIGMAS * floor) == 1
