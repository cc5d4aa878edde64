"""What the dashboard needs installed, checked by app.py and by every page file before anything imports it
(Streamlit may run a page file before app.py: views/streamlit/pages_folder.py): `streamlit run app.py` from a Python
without requirements-app.txt is one line naming what is missing and the command that installs it, not a
ModuleNotFoundError on every page. Standard library only (and the running Streamlit), for that reason."""

from __future__ import annotations

import importlib

# requirements-app.txt by the name each package is imported as (streamlit is running, so it is there).
APP_MODULES = ("numpy", "pandas", "plotly", "psutil", "sqlalchemy", "psycopg", "alembic", "PIL")
INSTALL_COMMAND = "bash scripts/serve.sh"


def missing_modules(modules=APP_MODULES) -> list[str]:
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:  # absent, or present but broken (one of its own dependencies absent)
            missing.append(name)
    return missing


def missing_message(modules=APP_MODULES) -> str | None:
    """One line when a requirement of the dashboard cannot be imported, else None."""
    missing = missing_modules(modules)
    if not missing:
        return None
    return (
        f"The dashboard's requirements are not installed in this Python (missing: {', '.join(missing)}): "
        f"run `{INSTALL_COMMAND}`, which installs them into .venv and starts the dashboard."
    )


def stop_if_missing(modules=APP_MODULES) -> None:
    """In a script run: the one line and st.stop() when a requirement is missing; nothing otherwise."""
    message = missing_message(modules)
    if message:
        import streamlit as st

        st.error(message)
        st.stop()
