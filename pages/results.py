"""Results: every stored run, a detail view, and bundle export / import / delete."""

import streamlit as st

from dashbench.views import charts, ui

from dashbench.costs import prices
from dashbench.views import context, filters, results
from dashbench.views.format import md_text, run_label, unreadable_note
from dashbench.views.samples import prepare_samples

ctx = ui.open_page("Results", flash_key="res_flash")
read_only = ctx.settings.read_only

runs = ctx.store.runs()
if unreadable_note(runs):
    st.warning(unreadable_note(runs))
if runs.empty:
    st.markdown(context.EMPTY_STORE_TEXT_READ_ONLY if read_only else context.EMPTY_STORE_TEXT)

options = filters.filter_options(runs)
cols = st.columns([1, 1, 1, 1, 1, 2])
selections = {
    "model": cols[0].multiselect("Model", options.get("model", []), key="res_model"),
    "accelerator": cols[1].multiselect("Accelerator", options.get("accelerator", []), key="res_acc"),
    "precision": cols[2].multiselect("Precision", options.get("precision", []), key="res_precision"),
    "backend": cols[3].multiselect("Backend", options.get("backend", []), key="res_backend"),
    "status": cols[4].multiselect("Status", options.get("status", []), key="res_status"),
}
search = cols[5].text_input("Search (label, host, id, …)", key="res_search")
filtered = filters.apply_filters(runs, selections, search)
st.caption(f"{len(filtered)} of {len(runs)} runs, newest first. Click a column header to sort; "
           "cost is on-demand USD per million examples (\"no price\" runs are blank).")
ui.table(results.results_table(filtered, prices.catalog(ctx.store)))

if not filtered.empty:
    st.subheader("Run detail")
    labels = {r["run_id"]: f"{run_label(r)} — {r['status']}" for _, r in filtered.iterrows()}
    done = filtered.index[filtered["status"] == "done"]
    first_done = filtered.index.get_loc(done[0]) if len(done) else 0
    run_id = st.selectbox("Run", list(labels), index=first_done, format_func=labels.get, key="res_detail")
    run = ctx.store.get_run(run_id)
    detail = results.run_detail(run)
    if detail["unreadable"]:
        st.warning(md_text(f"Part of this stored run could not be read: {detail['unreadable']}"))
    ui.run_summary(detail)
    samples = prepare_samples(ctx.store.samples(run_id))
    left, right = st.columns(2)
    left.plotly_chart(charts.loss_curve(samples), key="detail_loss")
    right.plotly_chart(charts.step_time_series(samples), key="detail_steps")
    st.page_link("pages/compare.py", label="Compare this run", icon=":material/bar_chart:",
                 query_params={"runs": run_id})
    with st.expander("Environment and placement"):
        st.json({"env": detail["env"], "placement": detail["placement"]})
    with st.expander("Spec"):
        st.json(detail["spec"])

st.subheader("Export")
if not filtered.empty:
    export_ids = filtered["run_id"].tolist()
    # Built only when clicked, in its own read-only connection (this run's handle is closed by then).
    st.download_button(f"Download bundle of the {len(export_ids)} runs shown above",
                       lambda: results.bundle_bytes(ctx.settings.db_path, export_ids),
                       file_name="dashbench-bundle.json", mime="application/json", on_click="ignore")
else:
    st.caption("Nothing to export.")

if not read_only:
    def _delete():
        # A callback (before the next run draws anything), so the table shows the store without them and
        # the widgets can be cleared: a key popped in the page body keeps its value in the browser.
        doomed = st.session_state.get("res_delete") or []
        with context.own_store(ctx.settings) as store:
            message, ok = results.delete_runs(store, doomed)
        if not ok:  # a queued or running run: kept, and the choice stays for after a cancel
            st.session_state["res_delete_refused"] = message
            return
        st.session_state["res_flash"] = message
        st.session_state["res_delete"] = []
        st.session_state["res_delete_confirm"] = False
        st.session_state.pop("res_detail", None)

    st.subheader("Import")
    # A new key empties the uploader once its files are in (its value cannot be set from Python).
    upload_key = f"res_import_{st.session_state.get('res_import_round', 0)}"
    uploads = st.file_uploader("Bundles made with `python -m dashbench export`", accept_multiple_files=True,
                               key=upload_key)
    if uploads and st.button("Import", key="res_import_go"):
        message, ok = results.import_uploads(ctx.store, [(u.name, u.getvalue()) for u in uploads])
        if ok:  # drawn again from the top, so the table above lists what came in
            st.session_state["res_flash"] = message
            st.session_state["res_import_round"] = st.session_state.get("res_import_round", 0) + 1
            st.rerun()
        st.error(message)

    st.subheader("Delete")
    st.multiselect("Runs to delete", list(filtered["run_id"]), key="res_delete",
                   format_func=lambda r: run_label(filtered.set_index("run_id").loc[r].to_dict() | {"run_id": r}))
    st.checkbox("Yes, delete these runs and their samples", key="res_delete_confirm")
    ready = bool(st.session_state.get("res_delete")) and st.session_state.get("res_delete_confirm", False)
    st.button("Delete", disabled=not ready, key="res_delete_go", on_click=_delete)
    if "res_delete_refused" in st.session_state:
        st.error(st.session_state.pop("res_delete_refused"))
