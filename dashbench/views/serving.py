"""What the dashboard's server process needs that Streamlit has no config option for."""

from __future__ import annotations

CONFIG_POLL_S = 10.0


def poll_config_files_slowly(period_s: float = CONFIG_POLL_S) -> None:
    """Streamlit polls its config.toml files (and secrets.toml, once read) for edits every 0.2 s on a
    thread pool, whatever server.fileWatcherType says: ~0.005 CPU s per second with nobody visiting, and
    for a visitor whose page takes a minute to draw on a loaded machine, as much again as their whole
    session's own work. Nothing edits those files under a running dashboard that needs to be seen within
    0.2 s, so every `period_s` is enough. Idempotent; a later Streamlit without this setting is left as it is."""
    from streamlit.watcher import polling_path_watcher

    if getattr(polling_path_watcher, "_POLLING_PERIOD_SECS", None) not in (None, period_s):
        polling_path_watcher._POLLING_PERIOD_SECS = period_s
