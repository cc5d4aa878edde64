"""Streamlit glue for the pages: their context, shared caches, tables and messages (with app.py, pages/,
this folder and each page's page.py, the only code that imports Streamlit)."""

from __future__ import annotations

import collections
import functools
import gc
import threading
import weakref

import streamlit as st

from dashbench.core.env import positive_seconds
from dashbench.views.common.format import md_text, md_text_with_commands
from dashbench.views.streamlit import pages_folder

CONTEXT_KEY = "dashbench"


# Widths that Streamlit's own layout leaves too small at a 1400 px window. A multiselect in a row that
# wraps (st.container(horizontal=True): Compare's and Results' filters) is as wide as its chips, at least
# as wide as its placeholder and at most the row: a chip reads "fashion_mnist_cnn", not "fashion…".
# The input is kept from widening the box: its own width would push every filter onto a row of its own.
LAYOUT_CSS = """<style>
[data-testid="stHorizontalBlock"] > [data-testid="stElementContainer"]:has(> .stMultiSelect) {
  flex: 1 1 auto; width: max-content; min-width: 10.5rem; max-width: 100%; }
[data-testid="stHorizontalBlock"] > [data-testid="stElementContainer"] > .stMultiSelect input { width: 0; }
[data-testid="stSidebar"] code { overflow-wrap: anywhere; }
</style>"""


def page_context():
    """The AppContext that app.py built for this script run (app.py runs first, see pages_folder)."""
    ctx = st.session_state.get(CONTEXT_KEY)
    _fetch_kept()
    st.html(LAYOUT_CSS)  # style only: Streamlit sends it aside, it takes no room on the page
    pages_folder.run_app_instead_of_legacy_page(app_has_run=ctx is not None and not ctx.ended)
    return st.session_state[CONTEXT_KEY]


_FROZEN_AFTER: set = set()


def freeze_heap_once(page: str) -> None:
    """After a page's first run in this process (its imports done), move every object alive to the
    collector's permanent generation (gc.freeze). Streamlit, pandas, pyarrow and Plotly leave a large heap of
    long-lived objects that each full collection walked again: a pause in some later rerun longer
    than the rest of that rerun (docs/history/performance.md). Once per page, so what a page creates later is still
    collected as usual."""
    if page in _FROZEN_AFTER:
        return
    _FROZEN_AFTER.add(page)
    gc.collect(1)  # the run's young garbage first: what is frozen is never collected
    gc.freeze()


def token(ctx) -> tuple:
    """The store's change token (Store.change_token), read once per script run and kept on its context:
    what every shared cache below is keyed by, so one script run sees one version of the database and
    the next run sees whatever was committed since (a new run, an import, a delete)."""
    if ctx.token is None:
        ctx.token = ctx.store.change_token()
    return ctx.token


def read(ctx, what, *args, **kwargs):
    """`ctx.store.<what>(*args, **kwargs)` (or `what(ctx.store, ...)` for a function), answered from
    Streamlit's cache while the database is unchanged: the key holds the store's change token, so a
    rerun that changed nothing reads nothing, and a new run, an import or a delete shows at once."""
    name = what if isinstance(what, str) else f"{what.__module__}.{what.__qualname__}"
    # The call as one text (see memo): Streamlit's hasher walked every run id of a list one by one.
    call = repr((name, args, sorted(kwargs.items())))
    return _cached_read(
        str(ctx.settings.db_path), token(ctx), call, _what=what, _store=ctx.store, _args=args, _kwargs=kwargs
    )


class CachedStore:
    """The page's store with every read method answered through read()'s cache: `db.runs(...)`,
    `db.samples(run_id)`; also what prices.catalog and step_samples take as their store."""

    def __init__(self, ctx):
        self._ctx = ctx

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return functools.partial(read, self._ctx, name)


@st.cache_data(max_entries=512, show_spinner=False)
def _cached_read(db_path, token, call, _what, _store, _args, _kwargs):
    if isinstance(_what, str):
        return getattr(_store, _what)(*_args, **_kwargs)
    return _what(_store, *_args, **_kwargs)


def memo(key, fn, *args):
    """fn(*args), computed once per distinct `key` (a hashable that names everything the result depends
    on, the store's change token included) and kept as it is, not copied: for charts and frames that
    cost more to build than to draw. Kept across sessions: a new visitor whose choice is another's
    draws what that visitor's run built. Callers must not change what it returns.
    `key` holds plain values only (text, numbers, None, tuples of them): the cache is keyed by its repr."""
    return _kept().get(f"{fn.__module__}.{fn.__qualname__}", repr(key), fn, args)


class _Kept:
    """memo()'s values: a dict looked up directly, the most recent MEMO_ENTRIES kept. A look-up through
    st.cache_resource hashed its arguments and read the function's signature each call: a large
    share of what Compare's script run cost a new visitor, who asks for many kept values."""

    def __init__(self):
        self._lock = threading.Lock()
        self._values: collections.OrderedDict = collections.OrderedDict()
        self._building: dict = {}  # key -> the lock its first builder holds: one build per key at a time

    def get(self, name: str, key: str, fn, args):
        whole = (name, key)
        with self._lock:
            if whole in self._values:
                self._values.move_to_end(whole)
                return self._values[whole]
            building = self._building.setdefault(whole, threading.Lock())
        with building:  # visitors arriving together wait for the first one's build, as st.cache_resource did
            try:
                with self._lock:
                    if whole in self._values:
                        return self._values[whole]
                value = fn(*args)
                with self._lock:
                    self._values[whole] = value
                    while len(self._values) > MEMO_ENTRIES:
                        self._values.popitem(last=False)
                return value
            finally:
                with self._lock:
                    self._building.pop(whole, None)


MEMO_ENTRIES = 256
_current_kept: list = [None]


def _kept() -> _Kept:
    """The process's memo() values, as this script run found them (see _fetch_kept)."""
    return _current_kept[0] or _fetch_kept()


def _fetch_kept() -> _Kept:
    """Looked up once per script run (page_context): held by st.cache_resource, so that
    `st.cache_resource.clear()` (a test's or a benchmark's first visit) still empties memo() from the next run."""
    _current_kept[0] = _kept_store()
    return _current_kept[0]


@st.cache_resource(show_spinner=False)
def _kept_store() -> _Kept:
    return _Kept()


def shared(ctx, key, fn, *args):
    """memo() keyed by this script run's store version (token) and `key`: what every session on the
    same database and the same choice builds alike (a table, a figure, the price catalog)."""
    return memo((token(ctx), key), fn, *args)


def key_of(mapping: dict) -> tuple:
    """A hashable key for a page's query (filter name -> value or list of values)."""
    return tuple(sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in mapping.items()))


def column_config(table) -> dict:
    """st.column_config for a dashbench table: readable labels and number formats (views.columns)."""
    from dashbench.views.common.columns import COLUMNS, width_of, written

    config = {}
    for name in table.columns:
        spec = COLUMNS.get(name)
        if spec is None:
            continue
        common = dict(label=spec.label, help=spec.help, pinned=spec.pinned or None, width=width_of(name))
        kind = "text" if spec.kind == "number" and written(table[name]) else spec.kind
        if kind == "number":
            config[name] = st.column_config.NumberColumn(format=spec.format, **common)
        elif kind == "datetime":
            config[name] = st.column_config.DatetimeColumn(format=spec.format, **common)
        elif kind == "checkbox":
            config[name] = st.column_config.CheckboxColumn(**common)
        else:
            config[name] = st.column_config.TextColumn(**common)
    return config


def table(frame, hints: dict | None = None, widths: dict | None = None, **kwargs):
    """st.dataframe with dashbench's column labels and formats, without the index; a missing value
    is a blank cell (not Streamlit's grey "None"), and text that only says "None" is missing too.
    `hints` replaces columns' hints for this table (column name -> text), e.g. a cost's unit; `widths` their
    px widths (column name -> px), e.g. a name column fitted to this table's names."""
    kwargs.setdefault("placeholder", "")
    data, config = _shown(frame)
    if hints:
        config = {
            **config,
            **{name: _Config({**config[name], "help": text}) for name, text in hints.items() if name in config},
        }
    if widths:  # a column without a spec in views.common.columns takes its width alone
        config = {
            **config,
            **{name: _Config({**config.get(name, {}), "width": px}) for name, px in widths.items() if name in frame},
        }
    return st.dataframe(data, column_config=config, hide_index=True, **kwargs)


_shown_lock = threading.Lock()
_shown_frames: dict[int, tuple] = {}  # id(frame) -> (weak reference to it, what _shown returns for it)


def _shown(frame) -> tuple:
    """(what st.dataframe is given, its column_config), prepared once while `frame` lives: a table from
    memo() is the same object in every session, so a new visitor's run neither scans it again
    (blank_text) nor converts it to Arrow again (pandas -> Arrow was most of a table's cost; writing
    the Arrow table out is cheap).
    The conversion is Streamlit's own, so the bytes sent are the same. Forgotten when the frame is."""
    from dashbench.views.common.columns import as_shown
    from dashbench.views.common.format import blank_text

    with _shown_lock:
        known = _shown_frames.get(id(frame))
        if known is not None and known[0]() is frame:
            return known[1]
    # st.dataframe deep-copies the config it is given, then drops its None values: dropped here once instead.
    shown = (
        _arrow(blank_text(as_shown(frame))),
        {name: _Config(_set_values(c)) for name, c in column_config(frame).items()},
    )
    key = id(frame)

    def forget(ref, key=key):
        with _shown_lock:
            if _shown_frames.get(key, (None,))[0] is ref:
                del _shown_frames[key]

    with _shown_lock:  # the Arrow table holds no reference to the frame, which stays free to go
        _shown_frames[key] = (weakref.ref(frame, forget), shown)
    return shown


class _Config(dict):
    """A column's config that st.dataframe's copy of it (copy.deepcopy per column, before it changes the copy)
    makes by a plain walk of its dicts and lists: deepcopy's memo and dispatch, per column and visitor, were
    most of what a kept table still cost a new session."""

    def __deepcopy__(self, memo):
        return _plain_copy(self)


def _plain_copy(value):
    if isinstance(value, dict):
        return {k: _plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_copy(v) for v in value]
    return value  # str, numbers, bools, None: never changed in place


def _set_values(config: dict) -> dict:
    """A column's config without its unset (None) entries, at every level."""
    return {k: _set_values(v) if isinstance(v, dict) else v for k, v in config.items() if v is not None}


def _arrow(frame):
    """`frame` as the pyarrow.Table st.dataframe would convert it to; the frame itself where that
    conversion is not Streamlit's to give (not a pandas DataFrame, or a Streamlit without it)."""
    import pandas as pd

    try:
        from streamlit.dataframe_util import convert_pandas_df_to_arrow_table
    except ImportError:
        return frame
    return convert_pandas_df_to_arrow_table(frame) if isinstance(frame, pd.DataFrame) else frame


READ_ONLY_RUN_KEY = "read_only_run_asked"
READ_ONLY_RUN_TEXT = (
    "This dashboard is read-only (`--read-only`): it has no Run page, so /run opens Compare; runs are launched "
    "by a dashboard without `--read-only`, or `python -m dashbench run`."
)


def note_read_only_run(read_only: bool) -> None:
    """Called by the hidden page that claims /run on a read-only dashboard: the page it switches to says
    why it shows Compare (open_page shows it once)."""
    if read_only:
        st.session_state[READ_ONLY_RUN_KEY] = True


def open_page(title: str, flash_key: str | None = None):
    """Every page's opening: its context, its title, the store error instead of the page, and the
    one-shot message that the previous script run left under `flash_key` (e.g. "3 runs deleted")."""
    ctx = page_context()
    st.title(title)
    if st.session_state.pop(READ_ONLY_RUN_KEY, False):
        st.info(READ_ONLY_RUN_TEXT)
    if ctx.store is None:
        show_store_error(ctx.settings, ctx.store_error)
    if flash_key and flash_key in st.session_state:
        st.success(st.session_state.pop(flash_key))  # markdown whose stored parts were escaped when written
    return ctx


OUTAGE_RETRY_ENV = "DASHBENCH_OUTAGE_RETRY_S"


def outage_retry_s(default: float = 3.0) -> float:
    """How often a page shown during a team-store outage asks the server again: DASHBENCH_OUTAGE_RETRY_S,
    seconds above 0 (a value that is not one leaves the default: a page must go on asking)."""
    return positive_seconds(OUTAGE_RETRY_ENV, default)


OUTAGE_RETRY_S = outage_retry_s()  # read once, as the server starts: the fragment's timer is set at import


def show_store_error(settings, message: str) -> None:
    """The store's error instead of the page; during a team-store outage the page asks again every few
    seconds and reruns by itself once the server answers (no restart of the dashboard, no click)."""
    from dashbench.views.common import context

    if context.is_outage(message):
        st.warning(md_text(message), icon=":material/cloud_off:")
        _retry_when_back(settings)
    else:
        st.error(md_text(message))
    st.stop()


def through_outages(panel):
    """A fragment's body that, while the team store's server cannot be reached, says so instead of failing:
    its next timed run tries again, and shows the panel once the server answers."""

    @functools.wraps(panel)
    def shown(*args, **kwargs):
        from dashbench.views.common import context, store_handles

        try:
            return panel(*args, **kwargs)
        except store_handles.StoreUnreachable as exc:
            st.warning(md_text(context.outage_text(exc)), icon=":material/cloud_off:")

    return shown


@st.fragment(run_every=OUTAGE_RETRY_S)
def _retry_when_back(settings) -> None:
    from dashbench.views.common import store_handles

    if store_handles.reachable(settings):
        st.rerun(scope="app")


TILE_CHARS = 12  # the longest value a headline tile shows whole, TILES_PER_ROW to a row at a 1400 px window
TILES_PER_ROW = 3  # six in one row cut a label ("sequences/s, median…") and a device ("4× TP…")


def run_summary(detail: dict, accuracy: list[str] = ()) -> None:
    """A stored run's title, status, error, flags and headline figures (common.stored_runs.run_detail), and a
    to-accuracy run's headline lines (accuracy_text.result_lines). Every stored string goes through
    md_text: a bundle from elsewhere may hold any markup."""
    st.markdown(f"**{md_text(detail['title'])}** — status {md_text(detail['status'])}")
    if detail["error"]:
        st.error(md_text(detail["error"]))
    for note in detail["flags"]:
        st.warning(md_text(note), icon=":material/warning:")
    # A figure is a tile; a name (a model file's "mlp.py:build") is a line of its own: a tile as narrow as a
    # figure's cut it to "mlp…".
    tiles = [figure for figure in detail["headline"] if len(str(figure[1])) <= TILE_CHARS]
    for start in range(0, len(tiles), TILES_PER_ROW):
        for col, (label, value, more) in zip(st.columns(TILES_PER_ROW), tiles[start : start + TILES_PER_ROW]):
            col.metric(md_text(label), value)
            col.caption(md_text_with_commands(more))  # "run `python -m dashbench doctor`" as code
    for label, value, more in detail["headline"]:
        if len(str(value)) > TILE_CHARS:
            st.markdown(
                f"**{md_text(label)}**: {md_text(value)}" + (f" — {md_text_with_commands(more)}" if more else "")
            )
    for line in accuracy:  # a to-accuracy run: reached or not, time to target, a hint at chance
        st.caption(md_text(line))
