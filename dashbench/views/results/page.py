"""Results' widgets: stored runs a page at a time (filtered, searched and sorted in SQL), a run's detail from
its selected row, and bundle export / import / delete.

pages/results.py only calls show(): a page file is compiled again for each visitor who finds no other session
open (Streamlit empties its script cache when the last one leaves), a module once per process (see compare/page.py)."""

from __future__ import annotations

import streamlit as st

from dashbench.costs import prices
from dashbench.results import accuracy_text
from dashbench.views.common import context, sample_charts, stored_runs
from dashbench.views.common.format import cost_help, md_text, unreadable_note
from dashbench.views.common.samples import prepare_samples
from dashbench.views.results import runs as results
from dashbench.views.streamlit import ui


def _query_changed():
    st.session_state["res_page"] = 1  # a new filter, search or order starts at its first page


def show() -> None:
    """The page, top to bottom (st.stop() ends it early, as in a page file)."""
    ctx = ui.open_page("Results", flash_key="res_flash")
    db = ui.CachedStore(ctx)  # reads answered from the cache while the database is unchanged
    # One look-up per store version for every session (ui.shared): a new visitor only draws what is kept.
    stored, facets = ui.shared(ctx, (), results.overview, ctx.store)
    if not stored:
        st.markdown(context.EMPTY_STORE_TEXT_READ_ONLY if ctx.settings.read_only else context.EMPTY_STORE_TEXT)
    query = _filters(facets)
    total = db.count_runs(**query) if query else stored
    shown, table = _page_of_runs(ctx, db, query, total, stored)
    selected = _runs_table(shown, table)
    _run_detail(ctx, db, selected, ctx.settings.read_only)
    _export(ctx, query, total)
    if not ctx.settings.read_only:
        _import(ctx)
        _delete(ctx, shown, selected)


def _filters(facets: dict) -> dict:
    # One row that wraps, as Compare's: each filter as wide as its chips (ui.LAYOUT_CSS), where fixed columns
    # cut "fashion_mnist_cnn" and even the placeholder short.
    row = st.container(horizontal=True, gap="small")
    any_of = {"placeholder": "any", "on_change": _query_changed}
    selections = {
        "model": row.multiselect("Model", facets["model"], key="res_model", **any_of),
        "accelerator": row.multiselect("Accelerator", facets["accelerator"], key="res_acc", **any_of),
        "precision": row.multiselect("Precision", facets["precision"], key="res_precision", **any_of),
        "backend": row.multiselect("Backend", facets["backend"], key="res_backend", **any_of),
        "status": row.multiselect("Status", facets["status"], key="res_status", **any_of),
    }
    search = row.text_input("Search (label, host, id, model, error, …)", key="res_search", on_change=_query_changed)
    return stored_runs.query(selections, search)


def _page_of_runs(ctx, db, query: dict, total: int, stored: int):
    """Sort and page boxes, and (the page's stored rows, its table) built once per store version, query and
    page for every session: a new visitor only draws it."""
    pages = results.page_count(total)
    if st.session_state.get("res_page", 1) > pages:  # the store or the filters shrank under the page shown
        st.session_state["res_page"] = pages
    cols = st.columns([2, 1, 3])
    sort = cols[0].selectbox(
        "Sort by",
        list(results.SORTS),
        format_func=lambda k: results.SORTS[k][0],
        key="res_sort",
        on_change=_query_changed,
    )
    page = cols[1].number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, step=1, key="res_page")
    catalog = ui.shared(ctx, (), prices.catalog, db)
    shown, table = ui.shared(
        ctx, (ui.key_of(query), sort, page), results.page_of_runs, ctx.store, query, sort, page, catalog
    )
    if unreadable_note(shown):
        st.warning(unreadable_note(shown))
    models = shown["model"] if "model" in shown else ()
    cols[2].caption(results.page_caption(total, stored, page, len(shown), results.SORTS[sort][0], models=models))
    return shown, table


def _runs_table(shown, table) -> list:
    """The table of the page's runs; the ids of the rows selected in it."""
    # Row positions mean these rows only: other rows (a new run, a delete, another page) get a fresh table.
    event = ui.table(
        table,
        key=results.table_key(table["run_id"] if "run_id" in table else []),
        hints={"usd_per_million_examples": cost_help(shown["model"] if "model" in shown else ())},
        on_select="rerun",
        selection_mode="multi-row",
    )
    selected = [table["run_id"].iloc[i] for i in event.selection.rows if i < len(table)]
    st.session_state["res_selected"] = selected
    return selected


def _run_detail(ctx, db, selected: list, read_only: bool) -> None:
    st.subheader("Run detail")
    if not selected:
        # Read-only has no Delete section below to point at.
        st.caption(
            "Select a run (the box at the left of its row) to see its loss curve, step times, environment "
            "and spec here" + ("." if read_only else "; select several to delete them below.")
        )
        return
    run_id = selected[0]
    if len(selected) > 1:
        st.caption(f"{len(selected)} runs selected: the first one's detail.")
    run = db.get_run(run_id)
    detail = stored_runs.run_detail(run) if run is not None else None
    if detail is None:
        st.warning(f"Run {md_text(run_id)} is no longer stored.")
        return
    if detail["unreadable"]:
        st.warning(md_text(f"Part of this stored run could not be read: {detail['unreadable']}"))
    ui.run_summary(detail, accuracy_text.result_lines(run.get("result")))
    curve = ui.shared(ctx, ("curve", run_id), stored_runs.run_curve, run)
    if curve is not None:  # a to-accuracy run: its validation accuracy and loss per evaluation, per seed
        st.plotly_chart(curve, key="detail_accuracy")
    samples = prepare_samples(db.sample_buckets(run_id))
    left, right = st.columns(2)
    left.plotly_chart(sample_charts.loss_curve(samples), key="detail_loss")
    right.plotly_chart(sample_charts.step_time_series(samples), key="detail_steps")
    st.page_link(
        "pages/compare.py",
        label="Compare " + ("these runs" if len(selected) > 1 else "this run"),
        icon=":material/bar_chart:",
        query_params={"runs": ",".join(selected)},
    )
    with st.expander("Environment and placement"):
        st.json({"env": detail["env"], "placement": detail["placement"]})
    with st.expander("Spec"):
        st.json(detail["spec"])


def _export(ctx, query: dict, total: int) -> None:
    st.subheader("Export")
    if not total:
        st.caption("Nothing to export.")
        return
    # Built only when clicked, in its own read-only connection (this run's handle is closed by then).
    st.download_button(
        f"Download bundle of the {total:,} runs that pass the filters",
        lambda: results.bundle_bytes(ctx.settings.db_path, **query),
        file_name="dashbench-bundle.json",
        mime="application/json",
        on_click="ignore",
    )


def _import(ctx) -> None:
    st.subheader("Import")
    # A new key empties the uploader once its files are in (its value cannot be set from Python).
    upload_key = f"res_import_{st.session_state.get('res_import_round', 0)}"
    uploads = st.file_uploader(
        "Bundles made with `python -m dashbench export --out bundle.json`", accept_multiple_files=True, key=upload_key
    )
    if uploads and st.button("Import", key="res_import_go"):
        message, ok = results.import_uploads(ctx.store, [(u.name, u.getvalue()) for u in uploads])
        if ok:  # drawn again from the top, so the table above lists what came in
            st.session_state["res_flash"] = message
            st.session_state["res_import_round"] = st.session_state.get("res_import_round", 0) + 1
            st.rerun()
        st.error(message)


def _delete(ctx, shown, selected: list) -> None:
    def delete_selected():
        # A callback (before the next run draws anything), so the table shows the store without them.
        doomed = st.session_state.get("res_selected") or []
        with context.own_store(ctx.settings) as store:
            message, ok = results.delete_runs(store, doomed)
        if not ok:  # a queued or running run: kept, and the selection stays for after a cancel
            st.session_state["res_delete_refused"] = message
            return
        st.session_state["res_flash"] = message
        st.session_state["res_delete_confirm"] = False

    st.subheader("Delete")
    if not selected:
        st.caption("Select the runs to delete in the table above.")
    else:
        st.markdown(
            f"Delete the {len(selected)} selected run{'s' if len(selected) > 1 else ''}: "
            + ", ".join(md_text(results.short_label(shown, r)) for r in selected)
            + "."
        )
        st.checkbox("Yes, delete these runs and their samples", key="res_delete_confirm")
        ready = st.session_state.get("res_delete_confirm", False)
        st.button("Delete", disabled=not ready, key="res_delete_go", on_click=delete_selected)
    if "res_delete_refused" in st.session_state:
        st.error(st.session_state.pop("res_delete_refused"))
