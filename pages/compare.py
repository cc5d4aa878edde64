"""Compare: throughput, step time, cost and speed-up of chosen runs, next to published figures."""

import streamlit as st

from dashbench.views import charts, ui

from dashbench.costs import prices, reference
from dashbench.views import compare, context, filters
from dashbench.views.format import md_text, run_label, unreadable_note
from dashbench.views.samples import step_samples

ctx = ui.open_page("Compare")

runs = ctx.store.runs()
if unreadable_note(runs):
    st.warning(unreadable_note(runs))
if runs.empty:
    st.markdown(context.EMPTY_STORE_TEXT_READ_ONLY if ctx.settings.read_only else context.EMPTY_STORE_TEXT)
    if not ctx.settings.read_only:
        st.page_link("pages/run.py", label="Go to Run", icon=":material/play_arrow:")

requested = [r for r in st.query_params.get("runs", "").split(",") if r and r in runs["run_id"].values]
if requested and st.session_state.get("cmp_requested") != requested:
    # A link (?runs=...) was followed: it wins over the selection left from an earlier visit, and
    # the filters open on what it points at (set before the widgets exist, as Streamlit requires).
    st.session_state["cmp_requested"] = requested
    st.session_state["cmp_runs"] = requested
    st.session_state["cmp_model"] = compare.models_of(runs, requested)
    st.session_state.pop("cmp_acc", None)
    st.session_state.pop("cmp_backend", None)
    st.session_state.pop("cmp_precision", None)
    st.session_state.pop("cmp_status", None)
    st.session_state.pop("cmp_ref_rows", None)


def _unless_set(key, value):
    """A widget's default, or None once Session State holds its value (Streamlit warns about both)."""
    return None if key in st.session_state else value


def _filters_changed():
    st.session_state.pop("cmp_runs", None)  # the run list follows the filters again
    _runs_changed()


def _runs_changed():
    st.session_state.pop("cmp_ref_rows", None)  # published rows follow the chosen runs' models again


with st.expander("Choose runs", expanded=not requested):
    options = filters.filter_options(runs)
    cols = st.columns(5)
    selections = {
        # Throughput of different workloads on one axis means nothing: start from one model.
        "model": cols[0].multiselect("Model", options.get("model", []), key="cmp_model",
                                     default=_unless_set("cmp_model", compare.default_models(runs)),
                                     on_change=_filters_changed),
        "accelerator": cols[1].multiselect("Accelerator", options.get("accelerator", []), key="cmp_acc",
                                           on_change=_filters_changed),
        "precision": cols[2].multiselect("Precision", options.get("precision", []), key="cmp_precision",
                                         on_change=_filters_changed),
        "backend": cols[3].multiselect("Backend", options.get("backend", []), key="cmp_backend",
                                       on_change=_filters_changed),
        "status": cols[4].multiselect("Status", options.get("status", []),
                                      default=_unless_set("cmp_status", ["done"] if "done" in options.get(
                                          "status", []) else []),
                                      key="cmp_status", on_change=_filters_changed),
    }
    filtered = filters.apply_filters(runs, selections)
    labels = {r["run_id"]: run_label(r) for r in filtered.to_dict("records")}
    by_id = runs.set_index("run_id")
    labels.update({r: run_label(by_id.loc[r].to_dict() | {"run_id": r})
                   for r in st.session_state.get("cmp_runs", []) if r in by_id.index and r not in labels})
    chosen = st.multiselect("Runs (the newest 12 that pass the filters; add or remove by hand)", list(labels),
                            default=_unless_set("cmp_runs", list(filtered["run_id"])[:12]), format_func=labels.get,
                            key="cmp_runs", on_change=_runs_changed)
    show_reference = st.toggle("Show published reference rows", value=True, key="cmp_ref")
    published = reference.rows()
    ref_names = dict(zip(published["key"], published["name"]))
    chosen_models = runs.loc[runs["run_id"].isin(chosen), "model"].unique().tolist()
    chosen_labels = runs.loc[runs["run_id"].isin(chosen), "label"].tolist()
    ref_keys = st.multiselect("Published rows (default: those for the chosen runs' models)", list(ref_names),
                              default=_unless_set("cmp_ref_rows", compare.reference_for_models(
                                  published, chosen_models, chosen_labels)),
                              format_func=ref_names.get, key="cmp_ref_rows", disabled=not show_reference)

catalog = prices.catalog(ctx.store)
frame = compare.compare_frame(runs[runs["run_id"].isin(chosen)], catalog,
                              published[published["key"].isin(ref_keys)] if show_reference else None)
if frame.empty:
    st.info("No runs chosen: widen the filters above, or launch one on the Run page.")
    st.stop()

baselines = compare.baseline_choices(frame)
baseline = st.selectbox("Speed-up baseline", list(baselines), format_func=baselines.get, key="cmp_baseline",
                        help="Speed-up is examples/s over this row's, only between rows of the same workload and "
                             "shape; every other workload is compared with its own first run.")
groups = compare.workload_groups(frame)
# Each workload (and shape) against its own baseline: the chosen one in its group, the first run elsewhere.
group_bases = {name: compare.group_baseline(rows, baseline) for name, rows in groups}
frame = frame.assign(speedup=float("nan"))
for name, rows in groups:
    if group_bases[name]:
        frame.loc[rows.index, "speedup"] = compare.speedup_vs(rows, group_bases[name])["speedup"]

flag_lines = compare.flag_lines(frame)
if flag_lines:
    st.warning("**Flagged: judge these figures with care**\n\n" + "\n".join(flag_lines), icon=":material/warning:")
unpriced = frame[(frame["kind"] == "measured") & frame["usd_per_million_examples"].isna()]
if not unpriced.empty:
    # Read-only has no price form: prices are set where the results are written.
    where = ("Prices are set on the dashboard that writes this database." if ctx.settings.read_only
             else "Set one on the Prices page.")
    st.caption("No price for: " + ", ".join(md_text(label) for label in unpriced["label"]) + ". " + where)
    if not ctx.settings.read_only:
        st.page_link("pages/prices.py", label="Set a price", icon=":material/sell:")

if len(groups) > 1:
    names = ", ".join(md_text(name) for name, _rows in groups)
    st.caption(f"{len(groups)} workloads ({names}), each in its own section: throughput and speed-up are "
               "compared only within one workload and shape.")
for i, (name, _rows) in enumerate(groups):
    rows = frame[compare.group_of(frame) == name]
    st.subheader(f"Workload: {md_text(name)}")
    sweeps = compare.sweep_frame(rows)
    if not sweeps.empty:
        st.plotly_chart(charts.throughput_vs_batch(sweeps), key=f"chart_sweep_{i}")
    left, right = st.columns(2)
    left.plotly_chart(charts.throughput(rows), key=f"chart_throughput_{i}")
    base = group_bases[name]
    right.plotly_chart(charts.speedup(rows, baselines.get(base, "—") if base else "—"), key=f"chart_speedup_{i}")
    measured = rows[rows["kind"] == "measured"]
    if not measured.empty:
        left.plotly_chart(charts.step_time_distribution(step_samples(ctx.store, measured)), key=f"chart_steps_{i}")
    right.plotly_chart(charts.cost_per_million(rows), key=f"chart_cost_{i}")

st.subheader("The numbers")
table = compare.compare_table(frame)
ui.table(table)
st.download_button("Download CSV", compare.csv_bytes(table), file_name="dashbench-compare.csv", mime="text/csv",
                   icon=":material/download:")

with st.expander("Time and cost of N epochs"):
    cols = st.columns(2)
    dataset_size = cols[0].number_input("Dataset size (examples)", min_value=1, value=60_000, step=1000,
                                        key="cmp_dataset")
    epochs = cols[1].number_input("Epochs", min_value=0.1, value=5.0, step=1.0, key="cmp_epochs")
    ui.table(compare.epochs_table(frame, catalog, int(dataset_size), float(epochs)))
    left_out = compare.epochs_left_out(frame)
    if left_out:
        st.caption("Left out, not at full size (their time is not the full-size model's): "
                   + ", ".join(md_text(label) for label in left_out) + ".")

if show_reference:
    ratios = compare.published_ratios(published[published["model"].isin(chosen_models)] if chosen_models
                                      else published)
    if not ratios.empty:
        with st.expander("Published ratios (computed from raw figures where the article gave them)"):
            ui.table(ratios)
