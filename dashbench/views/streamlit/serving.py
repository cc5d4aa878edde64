"""What the dashboard's server process needs that Streamlit has no config option for."""

from __future__ import annotations

import threading
import time

CONFIG_POLL_S = 10.0

# Set when the interpreter starts to exit: a config poll asleep for its period wakes up then.
_exiting = threading.Event()


class _SleepUntilExit:
    """Streamlit's polling module's `time`: its sleep ends early once the process exits. Each poll sleeps on a
    pool thread that the interpreter joins at exit, so a Ctrl-C or SIGTERM waited out the rest of the period."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        _exiting.wait(seconds)


def poll_config_files_slowly(period_s: float = CONFIG_POLL_S) -> None:
    """Streamlit polls its config.toml files (and secrets.toml, once read) for edits every 0.2 s on a
    thread pool, whatever server.fileWatcherType says: ~0.005 CPU s per second with nobody visiting, and
    for a visitor whose page takes a minute to draw on a loaded machine, as much again as their whole
    session's own work. Nothing edits those files under a running dashboard that needs to be seen within
    0.2 s, so every `period_s` is enough; the server still stops at once. Idempotent; a later Streamlit
    without this setting is left as it is."""
    from streamlit.watcher import polling_path_watcher

    if getattr(polling_path_watcher, "_POLLING_PERIOD_SECS", None) not in (None, period_s):
        polling_path_watcher._POLLING_PERIOD_SECS = period_s
    if getattr(polling_path_watcher, "time", None) is time:
        # Registered after the thread pool's own exit hook (imported with the module above), so run before it:
        # threading runs these in reverse order, before it joins the pool's threads.
        threading._register_atexit(_exiting.set)
        polling_path_watcher.time = _SleepUntilExit()
