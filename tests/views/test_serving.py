"""The dashboard server's process-wide settings (dashbench/views/streamlit/serving.py)."""

import threading

from streamlit.watcher import polling_path_watcher

from dashbench.views.streamlit import serving


def test_streamlits_config_polling_slows_to_the_chosen_period_and_still_sees_an_edit(tmp_path, monkeypatch):
    # The name this Streamlit polls by (app.py may have set it already in this process): were it renamed, the
    # setting would quietly change nothing.
    assert isinstance(polling_path_watcher._POLLING_PERIOD_SECS, float)
    monkeypatch.setattr(polling_path_watcher, "_POLLING_PERIOD_SECS", 0.2)  # Streamlit's; put back after the test
    serving.poll_config_files_slowly()
    assert polling_path_watcher._POLLING_PERIOD_SECS == serving.CONFIG_POLL_S

    serving.poll_config_files_slowly(0.05)  # short, to see an edit within the test
    watched = tmp_path / "config.toml"
    watched.write_text("[server]\n")
    seen = threading.Event()
    watcher = polling_path_watcher.PollingPathWatcher(str(watched), lambda path: seen.set())
    try:
        watched.write_text("[server]\nport = 8600\n")
        assert seen.wait(10), "an edited config file was not seen"
    finally:
        watcher.close()


def test_a_process_polling_slowly_still_exits_at_once(tmp_path):
    """Each poll sleeps on a pool thread the interpreter joins at exit: a Ctrl-C or SIGTERM must not wait out
    the period (10 s on the dashboard's server; an hour here, so a wait shows as this test's timeout)."""
    import subprocess
    import sys

    watched = tmp_path / "config.toml"
    watched.write_text("[server]\n")
    script = (
        "from streamlit.watcher import polling_path_watcher\nfrom dashbench.views.streamlit import serving\n"
        "serving.poll_config_files_slowly(3600.0)\n"
        f"polling_path_watcher.PollingPathWatcher({str(watched)!r}, print)\nprint('watching')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "watching", done.stderr[-2000:]
