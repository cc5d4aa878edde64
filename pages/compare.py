"""Compare: throughput, step time, cost and speed-up of chosen runs, next to published figures."""

import streamlit as st

from dashbench import charts, costs, reference, ui, views

ctx = ui.page_context()
st.title("Compare")
if ctx.store is None:
    st.error(ctx.store_error)
    st.stop()

runs = ctx.store.runs()
if runs.empty:
    st.markdown(views.EMPTY_STORE_TEXT_READ_ONLY if ctx.settings.read_only else views.EMPTY_STORE_TEXT)
    if not ctx.settings.read_only:
        st.page_link("pages/run.py", label="Go to Run", icon=":material/play_arrow:")

requested = [r for r in st.query_params.get("runs", "").split(",") if r]

with st.expander("Choose runs", expanded=not requested):
    options = views.filter_options(runs)
    cols = st.columns(4)
    selections = {
        "model": cols[0].multiselect("Model", options.get("model", []), key="cmp_model"),
        "accelerator": cols[1].multiselect("Accelerator", options.get("accelerator", []), key="cmp_acc"),
        "precision": cols[2].multiselect("Precision", options.get("precision", []), key="cmp_precision"),
        "status": cols[3].multiselect("Status", options.get("status", []),
                                      default=["done"] if "done" in options.get("status", []) else [],
                                      key="cmp_status"),
    }
    filtered = views.apply_filters(runs, selections)
    labels = {r["run_id"]: views.run_label(r) for _, r in filtered.iterrows()}
    default = [r for r in requested if r in labels] or list(labels)[:12]
    if requested and st.session_state.get("cmp_requested") != requested:
        # A link (?runs=...) was followed: it wins over the selection left from an earlier visit.
        st.session_state["cmp_requested"] = requested
        st.session_state["cmp_runs"] = [r for r in requested if r in runs["run_id"].values]
        labels.update({r: views.run_label(runs.set_index("run_id").loc[r].to_dict() | {"run_id": r})
                       for r in st.session_state["cmp_runs"] if r not in labels})
    chosen = st.multiselect("Runs (filtered; pick by hand)", list(labels), default=default,
                            format_func=labels.get, key="cmp_runs")
    show_reference = st.toggle("Show published reference rows", value=True, key="cmp_ref")
    published = reference.rows()
    ref_names = dict(zip(published["key"], published["name"]))
    chosen_models = runs.loc[runs["run_id"].isin(chosen), "model"].unique().tolist()
    chosen_labels = runs.loc[runs["run_id"].isin(chosen), "label"].tolist()
    ref_keys = st.multiselect("Published rows (default: those for the chosen runs' models)", list(ref_names),
                              default=views.reference_for_models(published, chosen_models, chosen_labels),
                              format_func=ref_names.get, key="cmp_ref_rows", disabled=not show_reference)

catalog = costs.catalog(ctx.store)
frame = views.compare_frame(runs[runs["run_id"].isin(chosen)], catalog,
                            published[published["key"].isin(ref_keys)] if show_reference else None)
if frame.empty:
    st.info("No runs chosen: widen the filters above, or launch one on the Run page.")
    st.stop()

baselines = views.baseline_choices(frame)
baseline = st.selectbox("Speed-up baseline", list(baselines), format_func=baselines.get, key="cmp_baseline")
frame = views.speedup_vs(frame, baseline) if baseline else frame.assign(speedup=float("nan"))

flag_lines = views.flag_lines(frame)
if flag_lines:
    st.warning("**Flagged: judge these figures with care**\n\n" + "\n".join(flag_lines), icon=":material/warning:")
unpriced = frame[(frame["kind"] == "measured") & frame["usd_per_million_examples"].isna()]
if not unpriced.empty:
    st.caption("No price for: " + ", ".join(unpriced["label"]) + ". Set one on the Prices page.")
    if not ctx.settings.read_only:
        st.page_link("pages/prices.py", label="Set a price", icon=":material/sell:")

models = sorted(frame.loc[frame["kind"] == "measured", "model"].dropna().unique())
if len(models) == 1:
    st.subheader(f"Workload: {models[0]}")
left, right = st.columns(2)
left.plotly_chart(charts.throughput(frame), key="chart_throughput")
right.plotly_chart(charts.speedup(frame, baselines.get(baseline, "—")), key="chart_speedup")
left.plotly_chart(charts.step_time_distribution(views.step_samples(ctx.store, frame)), key="chart_steps")
right.plotly_chart(charts.cost_per_million(frame), key="chart_cost")
sweeps = views.sweep_frame(frame)
if not sweeps.empty:
    st.plotly_chart(charts.throughput_vs_batch(sweeps), key="chart_sweep")

with st.expander("Time and cost of N epochs"):
    cols = st.columns(2)
    dataset_size = cols[0].number_input("Dataset size (examples)", min_value=1, value=60_000, step=1000,
                                        key="cmp_dataset")
    epochs = cols[1].number_input("Epochs", min_value=0.1, value=5.0, step=1.0, key="cmp_epochs")
    st.dataframe(views.epochs_table(frame, catalog, int(dataset_size), float(epochs)), hide_index=True)

if show_reference:
    ratios = views.published_ratios(published[published["model"].isin(chosen_models)] if chosen_models
                                    else published)
    if not ratios.empty:
        with st.expander("Published ratios (computed from raw figures where the article gave them)"):
            st.dataframe(ratios, hide_index=True)

table = views.compare_table(frame)
st.dataframe(table, hide_index=True)
st.download_button("Download CSV", views.csv_bytes(table), file_name="dashbench-compare.csv", mime="text/csv")
