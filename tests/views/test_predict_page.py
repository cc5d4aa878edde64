"""The Predict page under AppTest: it opens on an empty store and in read-only mode (tests/views/test_app.py checks it imports no framework), and predicts from a stored run's profile with the measured run beside it."""

from fixtures.app_test import assert_clean, show, start, texts


def test_the_page_opens_on_an_empty_store_and_read_only(tmp_path, monkeypatch):
    for read_only in (False, True):
        at = start(monkeypatch, tmp_path / "empty.sqlite", read_only=read_only)
        show(at, "pages/predict.py")
        assert "Predicted, not measured" in texts(at)
        assert "No stored run carries its step's profile yet" in texts(at)
        at.radio(key="pred_source").set_value("a workload, profiled in a child process").run()
        assert_clean(at)
        assert at.button(key="pred_profile")  # nothing profiled until asked
