"""Streamlit glue shared by the pages (with app.py, the only dashbench code that imports streamlit)."""

from __future__ import annotations

import types

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

CONTEXT_KEY = "dashbench"


def page_context():
    """The AppContext that app.py built for this script run.

    Streamlit treats a `pages/` folder next to the main script as a legacy multipage app until the
    first `st.navigation` call of the process; until then (the first request a server gets, and every
    AppTest run) it executes the requested page file directly, skipping app.py — its settings, its
    store and its read-only page list. Such a run executes app.py here instead, which renders this
    same page through st.navigation, and stops the legacy run. Done in the same script run (not with
    st.rerun) so that a button click that started the run is not lost.
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        main_script = get_script_run_ctx().pages_manager.main_script_path
        with open(main_script, encoding="utf-8") as f:
            code = compile(f.read(), main_script, "exec")
        module = types.ModuleType("__main__")
        module.__dict__["__file__"] = main_script
        exec(code, module.__dict__)  # noqa: S102 - the app's own entry script
        st.stop()
    return st.session_state[CONTEXT_KEY]


def column_config(table) -> dict:
    """st.column_config for a dashbench table: readable labels and number formats (views.columns)."""
    from dashbench.views.columns import COLUMNS

    config = {}
    for name in table.columns:
        spec = COLUMNS.get(name)
        if spec is None:
            continue
        common = dict(label=spec.label, help=spec.help, pinned=spec.pinned or None)
        if spec.kind == "number":
            config[name] = st.column_config.NumberColumn(format=spec.format, **common)
        elif spec.kind == "datetime":
            config[name] = st.column_config.DatetimeColumn(format=spec.format, **common)
        elif spec.kind == "checkbox":
            config[name] = st.column_config.CheckboxColumn(**common)
        else:
            config[name] = st.column_config.TextColumn(**common)
    return config


def table(frame, **kwargs):
    """st.dataframe with dashbench's column labels and formats, without the index."""
    return st.dataframe(frame, column_config=column_config(frame), hide_index=True, **kwargs)


def open_page(title: str, flash_key: str | None = None):
    """Every page's opening: its context, its title, the store error instead of the page, and the
    one-shot message that the previous script run left under `flash_key` (e.g. "3 runs deleted")."""
    ctx = page_context()
    st.title(title)
    if ctx.store is None:
        st.error(ctx.store_error)
        st.stop()
    if flash_key and flash_key in st.session_state:
        st.success(st.session_state.pop(flash_key))
    return ctx
