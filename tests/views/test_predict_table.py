"""Predict's table as first shown: the figures a device is chosen by, each column wide enough for its header
and its longest cell, and together within a 1400 px window (the browser test measures the real page)."""

from dashbench.predict import words
from dashbench.views.common.columns import CELL_CHAR_PX, ROOM_PX
from dashbench.views.predict import table


def _row(device: str, **overrides) -> dict:
    row = {
        "device": device,
        "chips": 8,
        "unit": "tokens",
        "throughput_per_chip": 123456.0,
        "throughput_low": 8 * 100000.0,
        "throughput_high": 8 * 150000.0,
        "step_s": 0.0123,
        "bound": "communication",
        "mfu": 0.41,
        "usd_per_million": 0.123,
        "usd_per_million_spot": 0.05,
        "measured_throughput": 8 * 120000.0,
        "ratio": 1.03,
        "calibration": "fitted on 12 published rows and 3 of your runs (leave-one-out error 18%)",
        "band_note": "",
    }
    return {**row, **overrides}


def test_the_first_table_keeps_what_a_device_is_chosen_by_and_fits_the_window():
    full = words.frame([_row("A100 SXM 80GB"), _row("TPU v5p", measured_throughput=None, ratio=None)])
    shown, widths = table.headline(full)
    assert list(shown.columns) == [c for c in full.columns if c not in table.FOLDED]
    assert {"device", "band", "bound", "mfu", "measured", "pred/meas"} <= set(shown.columns)
    assert set(widths) == set(shown.columns) and sum(widths.values()) <= ROOM_PX, widths
    for name in shown.columns:  # its header and every cell whole
        longest = max([len(name), *(len(str(v)) for v in shown[name])])
        assert widths[name] >= CELL_CHAR_PX * longest, (name, widths[name])


def test_a_figure_written_as_text_under_a_known_name_is_shown_as_written():
    """Predict's `mfu` is text ("41%"): it was multiplied by 100 as the store's fraction is ("41%41%41%…")
    and given a number format it cannot take."""
    import pandas as pd

    from dashbench.views.common.columns import as_shown
    from dashbench.views.streamlit import ui

    full = words.frame([_row("TPU v5p"), _row("H100 SXM", mfu=None)])
    assert as_shown(full)["mfu"].tolist() == ["41%", ""]
    assert ui.column_config(full)["mfu"]["type_config"]["type"] == "text"
    stored = pd.DataFrame({"mfu": [0.41, None]})  # the store's fraction: still a percentage of a number
    assert as_shown(stored)["mfu"].tolist()[0] == 41.0
    assert ui.column_config(stored)["mfu"]["type_config"]["type"] == "number"
