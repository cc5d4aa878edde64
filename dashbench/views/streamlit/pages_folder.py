"""The one place dashbench reaches into Streamlit's internals: app.py first, even for a page opened directly.

Why a private class: Streamlit (1.67) decides once per process, in `PagesManager.__init__`, that an app
with a `pages/` folder next to its main script is a legacy multipage app (the class attribute
`PagesManager.uses_pages_directory`), and until some script run calls `st.navigation` it runs the
requested page file directly (`script_runner._mpa_v1`), skipping app.py — its settings, its store and
its read-only page list. That is the first request a server gets, and every AppTest run. No public
option changes this: `client.showSidebarNavigation` only hides the legacy menu, and the check is for
the folder's existence. The product's design names `app.py` and `pages/`, so the folder stays.
tests/views/test_pages_folder.py fails when a Streamlit upgrade changes any of this.
"""

from __future__ import annotations

import types

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx


def run_app_instead_of_legacy_page(app_has_run: bool) -> None:
    """In a legacy run, execute app.py here (it renders this same page through st.navigation), then stop.

    A legacy run is one in which app.py has not run (`app_has_run`: this script run's context is in the
    session), not one that finds the class attribute still set: visitors whose first script runs begin
    together all begin as legacy runs, and all but the first find the attribute already cleared by that
    first one. Once app.py has run (here, or as a legacy run's main page at the root address), the
    attribute is cleared, so that no later run skips app.py.
    Done in the same script run (not with st.rerun) so that a button click that started the run is not lost.
    """
    PagesManager.uses_pages_directory = False
    if app_has_run:
        return
    main_script = get_script_run_ctx().pages_manager.main_script_path
    with open(main_script, encoding="utf-8") as f:
        code = compile(f.read(), main_script, "exec")
    module = types.ModuleType("__main__")
    module.__dict__["__file__"] = main_script
    exec(code, module.__dict__)  # noqa: S102 - the app's own entry script
    st.stop()
