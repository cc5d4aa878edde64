"""A run's headline figures are tiles; a name among them (a model file's "small_mlp.py:build") is a line
of its own, read whole: a tile as narrow as a figure's showed it as "small…"."""

from streamlit.testing.v1 import AppTest


def summary_page():
    from dashbench.views.streamlit import ui

    ui.run_summary(
        {
            "title": "small_mlp.py:build on CPU",
            "status": "done",
            "error": None,
            "flags": [],
            "headline": [
                ("examples/s", "6,279.2", "the headline"),
                ("step time, median", "1.18 ms", "p10 1.11 ms"),
                ("model", "small_mlp.py:build", "sha256 3fa9c2d1e0b4…, 12,345 parameters"),
            ],
        }
    )


def test_a_name_is_a_line_and_the_figures_stay_tiles():
    at = AppTest.from_function(summary_page).run()
    assert not at.exception
    assert [m.value for m in at.metric] == ["6,279.2", "1.18 ms"]
    (line,) = [m.value for m in at.markdown if m.value.startswith("**model**")]
    assert "small\\_mlp" in line and "build" in line and "12,345 parameters" in line
