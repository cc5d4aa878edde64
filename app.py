"""dashbench dashboard: `streamlit run app.py` (add `-- --read-only` to browse stored results only).

This process never imports TensorFlow: runs are launched as their own processes by dashbench.jobs.
"""

from __future__ import annotations

import streamlit as st

from dashbench.views.streamlit import needs, serving

serving.poll_config_files_slowly()  # process-wide; before anything else, on every run: one attribute check

# An emoji, not a Material symbol: the browser fetched that icon from fonts.gstatic.com (none offline).
st.set_page_config(page_title="dashbench", page_icon="⏱️", layout="wide")
needs.stop_if_missing()  # before the imports below, which need what it checks

from dashbench.views.common import context, store_handles
from dashbench.views.common import devices as run_devices
from dashbench.views.common import settings as settings_module
from dashbench.views.common.format import path_text, short_path_text
from dashbench.views.streamlit import ui

settings = settings_module.load()
# One handle per database, shared by every run of every session: never closed here (store_handles).
store, store_error = store_handles.shared_store(settings)
if not settings.read_only and store is not None:
    run_devices.look_ahead()  # the Run page's device discovery, begun on whichever page opens first
    try:
        context.pump_jobs(settings)  # start queued runs whose device is free; idempotent
    except store_handles.StoreUnreachable as exc:  # the team store's server went away: the page says so and retries
        store, store_error = None, context.outage_text(exc)

app_context = context.AppContext(settings=settings, store=store, store_error=store_error)
st.session_state[ui.CONTEXT_KEY] = app_context

compare = st.Page("pages/compare.py", title="Compare", icon=":material/bar_chart:", url_path="compare")


def _no_run_page():
    # Read-only has no Run page; a typed or bookmarked /run lands on Compare with one line on why, not on
    # Streamlit's "Page not found" pop-up (which an address no page claims opens above the default page).
    ui.note_read_only_run(True)
    st.switch_page(compare)


if settings.read_only:
    pages = [st.Page(_no_run_page, title="Run", url_path="run", visibility="hidden")]
else:
    pages = [st.Page("pages/run.py", title="Run", icon=":material/play_arrow:", url_path="run")]


def _home():
    # The root opens Compare at its own address, so /compare typed or bookmarked works as well.
    st.switch_page(compare, query_params=st.query_params.to_dict())


pages += [
    st.Page(_home, title="dashbench", url_path="home", default=True, visibility="hidden"),
    compare,
    st.Page("pages/results.py", title="Results", icon=":material/table_rows:", url_path="results"),
    st.Page("pages/prices.py", title="Prices", icon=":material/sell:", url_path="prices"),
    st.Page("pages/predict.py", title="Predict", icon=":material/query_stats:", url_path="predict"),
]
page = st.navigation(pages)

with st.sidebar:
    # Shortened from the left, folder and file names whole; the full path in the tooltip.
    shown_path, full_path = short_path_text(settings.db_path), path_text(settings.db_path)
    st.caption(
        ("**Read-only** · " if settings.read_only else "") + f"database: `{shown_path}`",
        help=f"`{full_path}`" if shown_path != full_path else None,
    )

try:
    page.run()
except store_handles.StoreUnreachable as exc:  # the server went away while this page read it
    ui.show_store_error(settings, context.outage_text(exc))
finally:
    app_context.ended = True
ui.freeze_heap_once(page.url_path)
