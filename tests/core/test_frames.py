"""frames.records: the rows of a frame as to_dict("records") gives them, for every dtype the store
and the views hold."""

import math

import pandas as pd

from dashbench.core.frames import records


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if a is pd.NA or b is pd.NA or a is pd.NaT or b is pd.NaT:
        return a is b
    return type(a) is type(b) and a == b


def test_records_gives_what_to_dict_gives():
    frame = pd.DataFrame(
        {
            "text": ["a", None, "c"],
            "count": [1, 2, 3],
            "figure": [1.5, float("nan"), 3.0],
            "maybe": pd.array([1, None, 3], dtype="Int64"),
            "flag": [True, False, True],
            "flags": [["above_peak"], [], ["contended", "above_peak"]],
            "at": pd.to_datetime(["2026-11-30T10:00:00Z", None, "2026-11-30T12:00:00Z"]),
            "mixed": [None, 2, "x"],
        }
    )
    expected = frame.to_dict("records")
    got = records(frame)
    assert len(got) == len(expected) == 3
    for want, row in zip(expected, got):
        assert list(row) == list(want)
        for key in want:
            assert _same(row[key], want[key]), (key, row[key], want[key])


def test_records_of_empty_and_columnless_frames():
    assert records(pd.DataFrame(columns=["a", "b"])) == []
    assert records(pd.DataFrame(index=range(2))) == [{}, {}]
