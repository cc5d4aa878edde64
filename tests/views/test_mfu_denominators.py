"""Compare does not put MFUs with different denominators in one column without saying so: runs of
one accelerator that divided by different peaks get a line naming the peaks."""

from fixtures.stored_runs import SPEC, result_for

from dashbench.store import Store
from dashbench.views.compare import numbers as compare


def frame_of(tmp_path, peaks) -> object:
    with Store(tmp_path / "m.sqlite") as store:
        for peak in peaks:
            run_id = store.create_run(SPEC)
            store.finish_run(run_id, "done", result=result_for(SPEC, 500.0, peak_tflops=peak, mfu=0.2))
        return compare.compare_frame(store.runs())


def test_mfus_over_different_peaks_are_named_and_one_peak_says_nothing(tmp_path):
    note = compare.mfu_denominators_note(frame_of(tmp_path / "a", [0.238, 0.088, 0.238]))
    assert note and "CPU: 0.088, 0.238 TFLOP/s" in note and "do not compare" in note
    assert compare.mfu_denominators_note(frame_of(tmp_path / "b", [0.238, 0.238])) is None
