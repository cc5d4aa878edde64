"""RunResult: stored result JSON loads and round-trips, old and odd JSON never crashes, and the one
rendering (headline, figures, describe) says what every caller used to say."""

import json
from pathlib import Path

import pytest
from fixtures.stored_runs import SPEC, result_for

from dashbench.results.result import FLAG_TEXT, RunResult
from dashbench.store import Store

# Written by the engine and the store before RunResult existed (a real tiny CPU run, stored).
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "result_v3.json"


@pytest.fixture
def stored() -> dict:
    return json.loads(FIXTURE.read_text())


def test_stored_json_loads_and_round_trips_exactly(stored):
    result = RunResult.from_dict(stored)
    assert result.to_dict() == stored and list(result.to_dict()) == list(stored)
    assert json.dumps(result.to_dict()) == FIXTURE.read_text().strip()  # byte for byte, as the store writes it
    assert result.examples_per_sec == stored["examples_per_sec"] and result.run_id == stored["run_id"]
    assert result.placement["ops"] and result.env["tensorflow"] and result.spec["model"] == "conv2d"
    assert RunResult.from_dict(result.to_dict()) == result


def test_describe_and_headline_render_the_fixture(stored):
    result = RunResult.from_dict(stored)
    headline = result.headline()
    assert headline.startswith("conv2d on CPU ×1 (1 replica(s), batch 4, float32): ")
    assert (
        f"{stored['examples_per_sec']:,.1f} images/s (95% CI at least {stored['examples_per_sec_ci95'][0]:,.1f}, no upper end"
        in headline
    )
    text = result.describe()
    assert text.splitlines()[0] == headline
    median, p10, p90 = (stored[k] * 1e3 for k in ("step_time_median_s", "step_time_p10_s", "step_time_p90_s"))
    assert f"step time, median: {median:.2f} ms — p10 {p10:.2f} ms, p90 {p90:.2f} ms, 2 samples" in text
    assert f"compile + first step: {stored['compile_s']:.2f} s — not in the throughput" in text
    assert (
        f"achieved TFLOP/s: {stored['achieved_tflops']:.3g} — MFU {stored['mfu']:.1%} of "
        f"{stored['peak_tflops']:.4g} TFLOP/s peak (measured); 76.8 kFLOP per example" in text
    )
    assert "ran on: CPU — cpu: /device:CPU:0" in text
    assert "flags: none" in text and f"run id {stored['run_id']}" in text
    # The dashboard's metrics are the same figures, throughput first.
    labels = [label for label, _, _ in result.figures()]
    assert labels == [
        "images/s",
        "images/s, median step",
        "step time, median",
        "timed loop",
        "compile + first step",
        "achieved TFLOP/s",
        "ran on",
    ]


def test_flags_are_explained_and_xla_and_replicas_named():
    result = RunResult.from_dict(
        result_for(SPEC.replace(batch_size=64, xla=True), 800.0, replicas=2, flags=["above_peak", "loss_not_falling"])
    )
    text = result.describe()
    assert result.headline().startswith(
        "fashion_mnist_cnn on CPU ×1 (2 replica(s), batch 64, float32, XLA): 800.0 images/s"
    )
    assert f"flags: {FLAG_TEXT['above_peak']}" in text and "above_peak" not in text  # said once, in words
    assert f"{FLAG_TEXT['loss_not_falling']} (loss_not_falling)" in text
    assert result.flag_notes() == [(f, FLAG_TEXT[f]) for f in ("above_peak", "loss_not_falling")]


def test_old_partial_and_newer_json_load_without_crashing(stored):
    # An early result: no FLOP split, shapes, data source or run id; nulls where lists belong.
    old = {
        k: v
        for k, v in stored.items()
        if k not in ("forward_flops_per_example", "shapes", "data", "run_id", "peak_source")
    }
    old.update(flags=None, device_names=None, examples_per_sec_ci95=None, achieved_tflops=None, mfu=None)
    result = RunResult.from_dict(old)
    assert result.flags == [] and result.shapes == {} and result.run_id is None and result.data is None
    assert "run_id" not in result.to_dict()
    assert "achieved TFLOP/s" not in result.describe() and "95% CI" not in result.headline()
    # A stand-in engine's few keys, and keys from a newer writer: kept and written back.
    few = RunResult.from_dict({"examples_per_sec": 10.0, "future_metric": {"x": [1]}, "extra": 3})
    assert few.headline() == "?: 10.0 examples/s from total time" and "flags: none" in few.describe()
    assert few.to_dict()["future_metric"] == {"x": [1]} and few.to_dict()["extra"] == 3
    assert RunResult.from_dict({}).describe()
    with pytest.raises(TypeError, match="result: must be a JSON object"):
        RunResult.from_dict([1, 2])


def test_loaded_result_is_a_copy():
    data = result_for(SPEC, 100.0)
    result = RunResult.from_dict(data)
    data["flags"].append("above_peak")
    result.to_dict()["losses"].append(9.9)
    assert result.flags == [] and result.losses == [2.3, 2.2]


def test_the_store_loads_results_as_run_results(tmp_path, stored):
    with Store(tmp_path / "r.sqlite") as store:
        run_id = store.create_run(SPEC)
        assert store.get_run(run_id)["result"] is None
        store.finish_run(run_id, "done", result={**stored, "run_id": run_id})
        loaded = store.get_run(run_id)["result"]
    assert isinstance(loaded, RunResult) and loaded.to_dict() == {**stored, "run_id": run_id}
