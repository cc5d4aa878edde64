"""Compare's widgets: throughput, step time, cost and speed-up of chosen runs, next to published figures.

pages/compare.py only calls show(). Streamlit compiles a page's file again for a visitor who finds no other
session open (it empties its script cache when the last session leaves), paid by every visitor one after
another. A module is compiled once per process.

show() calls one function per panel, top to bottom: a new panel is a function of its own and one call."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashbench.costs import prices, reference
from dashbench.views.common import context, stored_runs
from dashbench.views.common.format import cost_help, md_text, unreadable_note
from dashbench.views.compare import accuracy as accuracy_view
from dashbench.views.compare import choice as compare_choice
from dashbench.views.compare import headline, parity, picker
from dashbench.views.compare import numbers as compare
from dashbench.views.compare import sections as compare_view
from dashbench.views.streamlit import ui


@dataclass
class Offer:
    """The runs the picker offers: ids, their stored rows and labels, the default choice, the caption's counts."""

    ids: list
    runs: pd.DataFrame
    labels: dict
    default_ids: list
    counts: tuple  # (matching the filters, found by the search or None, hidden)


@dataclass
class Chosen:
    """What the "Choose runs" panel settled: the runs and the published rows the panels below draw."""

    chosen: list
    chosen_runs: pd.DataFrame
    chosen_models: list
    published: pd.DataFrame
    show_reference: bool
    ref_keys: list


@dataclass
class Built:
    """The compare frame with speed-ups against the chosen baseline, and the keys its figures are kept by."""

    frame: pd.DataFrame
    choice: tuple  # store version, chosen runs and published rows: what every figure below is kept by
    baseline: str | None
    baselines: dict
    group_bases: dict
    catalog: pd.DataFrame


def _unless_set(key, value):
    """A widget's default, or None once Session State holds its value (Streamlit warns about both)."""
    return None if key in st.session_state else value


def _filters_changed():
    st.session_state.pop("cmp_runs", None)  # the run list follows the filters again
    _runs_changed()


def _runs_changed():
    st.session_state.pop("cmp_ref_rows", None)  # published rows follow the chosen runs' models again


def show() -> None:
    """The page, top to bottom (st.stop() ends it early, as in a page file)."""
    ctx = ui.open_page("Compare")
    db = ui.CachedStore(ctx)  # reads answered from the cache while the database is unchanged
    # One look-up per store version for every session (ui.shared): a new visitor only draws what is kept.
    stored, options, newest = ui.shared(ctx, (), picker.overview, ctx.store)
    if not stored:
        _empty_store(ctx)
    requested = _follow_link(ctx, db)
    with st.expander("Choose runs", expanded=not requested):
        query = stored_runs.query(_filters(options, newest))
        offer = _offered_runs(ctx, db, query)
        chosen = _published_rows(ctx, offer, _runs_picker(offer))
    if unreadable_note(offer.runs):
        st.warning(unreadable_note(offer.runs))
    built = _compare_frame(ctx, db, chosen)
    _flags_and_notes(ctx, built)
    _charts(db, built)
    _time_to_target(db, chosen, built)
    _parity(db, chosen, built)
    _the_numbers(built)
    _epochs(built)
    _published_ratios(chosen)


def _empty_store(ctx) -> None:
    st.markdown(context.EMPTY_STORE_TEXT_READ_ONLY if ctx.settings.read_only else context.EMPTY_STORE_TEXT)
    if not ctx.settings.read_only:
        st.page_link("pages/run.py", label="Go to Run", icon=":material/play_arrow:")


def _follow_link(ctx, db) -> list:
    """The runs a link (?runs=...) names, set as the choice the first time it is followed."""
    linked = tuple(r for r in st.query_params.get("runs", "").split(",") if r.strip())
    # No look-up (and no kept copy) without a link; a short id is resolved as the command line resolves it.
    requested, link_notes = (
        ui.shared(ctx, ("link", linked), compare_choice.linked_runs, ctx.store, linked) if linked else ([], [])
    )
    if link_notes:
        st.warning("**Link to runs (?runs=)**: " + " ".join(link_notes), icon=":material/link_off:")
    if requested and st.session_state.get("cmp_requested") != requested:
        # A link (?runs=...) was followed: it wins over the selection left from an earlier visit, and
        # the filters open on what it points at (set before the widgets exist, as Streamlit requires).
        st.session_state["cmp_requested"] = list(requested)  # copies: the kept list is every visitor's
        st.session_state["cmp_runs"] = list(requested)
        st.session_state["cmp_model"] = picker.models_of(db.runs(run_ids=requested), requested)
        for key in ("cmp_acc", "cmp_backend", "cmp_precision", "cmp_status", "cmp_ref_rows", "cmp_search"):
            st.session_state.pop(key, None)
    return requested


def _filters(options: dict, newest) -> dict:
    # One row that wraps, not st.columns(5): a column is a block of its own, five messages more per visitor.
    row = st.container(horizontal=True, gap="small")
    return {
        # Throughput of different workloads on one axis means nothing: start from one model.
        "model": row.multiselect(
            "Model",
            options["model"],
            key="cmp_model",
            default=_unless_set("cmp_model", [newest] if newest else []),
            on_change=_filters_changed,
        ),
        "accelerator": row.multiselect(
            "Accelerator", options["accelerator"], key="cmp_acc", on_change=_filters_changed
        ),
        "precision": row.multiselect(
            "Precision", options["precision"], key="cmp_precision", on_change=_filters_changed
        ),
        "backend": row.multiselect("Backend", options["backend"], key="cmp_backend", on_change=_filters_changed),
        # Runs with a result: done, and to-accuracy runs that missed their target (their throughput and
        # curves still compare).
        "status": row.multiselect(
            "Status",
            options["status"],
            default=_unless_set("cmp_status", [s for s in ("done", "not_reached") if s in options["status"]]),
            key="cmp_status",
            on_change=_filters_changed,
        ),
    }


def _offered_runs(ctx, db, query: dict) -> Offer:
    """The runs the picker offers for the filters and the search box."""
    matching, default_ids, recent, hidden = ui.shared(
        ctx, ("picker", ui.key_of(query)), picker.picker_runs, ctx.store, query
    )
    search = st.text_input(
        "Find runs to add (label, id, host, batch, …): matches join the list below", key="cmp_search"
    )
    found = db.run_ids(**query, search=search, limit=picker.PICKER_RUNS) if search.strip() else []
    picked = st.session_state.get("cmp_runs") or []
    offered = list(dict.fromkeys([*picked, *found, *default_ids, *recent]))
    offered_runs = ui.shared(ctx, ("offered", tuple(offered)), picker.runs_by_id, ctx.store, tuple(offered))
    labels = ui.shared(ctx, tuple(offered), picker.labels_by_id, offered_runs)
    offered = [r for r in offered if r in labels]
    default_ids = [r for r in default_ids if r in labels]  # an unreadable stored run is named, not offered
    if "cmp_runs" in st.session_state:  # a chosen run deleted since: dropped, not an error
        st.session_state["cmp_runs"] = [r for r in picked if r in labels]
    counts = (matching, len(found) if search.strip() else None, hidden)
    return Offer(offered, offered_runs, labels, default_ids, counts)


def _runs_picker(offer: Offer) -> list:
    chosen = st.multiselect(
        "Runs",
        offer.ids,
        default=_unless_set("cmp_runs", offer.default_ids),
        format_func=offer.labels.get,
        key="cmp_runs",
        on_change=_runs_changed,
    )
    st.caption(picker.picker_caption(len(chosen), *offer.counts))
    return chosen


def _published_rows(ctx, offer: Offer, chosen: list) -> Chosen:
    show_reference = st.toggle("Show published reference rows", value=True, key="cmp_ref")
    published = ui.memo((), reference.rows)  # the shipped rows: one frame per process, only read here
    ref_names = ui.memo((), picker.reference_names, published)
    picked_key = ("chosen", tuple(offer.ids), tuple(chosen))
    chosen_runs = ui.shared(ctx, picked_key, picker.runs_of, offer.runs, chosen)
    # Kept with the chosen runs: pandas' unique() and tolist() would run again for each new visitor.
    chosen_models, chosen_labels = ui.shared(ctx, picked_key, picker.models_and_labels, chosen_runs)
    ref_default = (
        None
        if "cmp_ref_rows" in st.session_state
        else ui.shared(
            ctx,
            ("ref_default", tuple(chosen)),
            picker.reference_for_models,
            published,
            chosen_models,
            chosen_labels,
        )
    )
    # Pills, not a multiselect: every row stays in view (a multiselect's box cut the 13 chosen by default on
    # the empty store off after three lines), and a click adds or drops one.
    ref_keys = (
        st.pills(
            "Published rows (default: those for the chosen runs' models)",
            list(ref_names),
            selection_mode="multi",
            default=ref_default,
            format_func=ref_names.get,
            key="cmp_ref_rows",
            disabled=not show_reference,
            width="stretch",
        )
        or []
    )
    return Chosen(chosen, chosen_runs, chosen_models, published, show_reference, ref_keys)


def _compare_frame(ctx, db, chosen: Chosen) -> Built:
    """The frame every panel below draws from, and the speed-up baseline's select; stops on no runs."""
    catalog = ui.shared(ctx, (), prices.catalog, db)
    # Everything below is built once per store version and choice, for every session: a rerun that changed
    # nothing, or a new visitor who chose what another did, only draws it.
    refs = tuple(chosen.ref_keys)
    choice = (ui.token(ctx), tuple(chosen.chosen), refs if chosen.show_reference else None)
    frame = ui.memo(
        choice,
        compare.compare_frame,
        chosen.chosen_runs,
        catalog,
        ui.memo(refs, picker.runs_of, chosen.published, chosen.ref_keys, "key") if chosen.show_reference else None,
    )
    if frame.empty:
        st.info("No runs chosen: widen the filters above, or launch one on the Run page.")
        st.stop()
    frame = ui.memo(choice + ("memory",), compare_view.with_memory, frame, db)  # each run's measured peak
    baselines = ui.memo(choice, compare.baseline_choices, frame)
    baseline = st.selectbox(
        "Speed-up baseline",
        list(baselines),
        format_func=baselines.get,
        key="cmp_baseline",
        help="Speed-up is examples/s over this row's, only between rows of the same workload and "
        "shape; every other workload is compared with its own first run.",
    )
    frame, group_bases = ui.memo(choice + (baseline,), compare_view.with_speedups, frame, baseline)
    return Built(frame, choice, baseline, baselines, group_bases, catalog)


def _flags_and_notes(ctx, built: Built) -> None:
    key = built.choice + (built.baseline,)
    flag_lines = ui.memo(key, compare.flag_lines, built.frame)
    if flag_lines:
        st.warning("**Flagged: judge these figures with care**\n\n" + "\n".join(flag_lines), icon=":material/warning:")
    unpriced = ui.memo(key, compare.unpriced_labels, built.frame)
    groups = list(built.group_bases)
    notes = []  # one caption: each element is a message every new visitor's server sends
    if unpriced:
        # Read-only has no price form: prices are set where the results are written.
        where = (
            "Prices are set on the dashboard that writes this database."
            if ctx.settings.read_only
            else "Set one on the Prices page."
        )
        notes.append("No price for: " + ", ".join(md_text(label) for label in unpriced) + ". " + where)
    if len(groups) > 1:
        names = ", ".join(md_text(name) for name in groups)
        notes.append(
            f"{len(groups)} workloads ({names}), each in its own section: throughput and speed-up are "
            "compared only within one workload and shape."
        )
    notes += [md_text(line) for line in ui.memo(built.choice, compare.version_notes, built.frame)]
    if notes:
        st.caption("\n\n".join(notes))
    if unpriced and not ctx.settings.read_only:
        st.page_link("pages/prices.py", label="Set a price", icon=":material/sell:")


def _pairs(figures: list, key_of) -> None:
    """Charts two a row, in one block each (st.columns(2) sent three)."""
    for n, (kind, figure) in enumerate(figures):
        if n % 2 == 0:
            pair = st.container(horizontal=True, gap="small")
        pair.plotly_chart(figure, key=key_of(kind))


def _charts(db, built: Built) -> None:
    """One section of charts per workload; only the charts picked here are built and drawn (the table below
    holds every figure of them)."""
    kinds = ui.memo(built.choice, compare_view.chart_kinds, built.frame)
    picked_charts = (
        st.segmented_control(
            "Charts",
            kinds,
            selection_mode="multi",
            format_func=compare_view.CHARTS.get,
            key="cmp_charts",
            default=_unless_set("cmp_charts", [k for k in compare_view.DEFAULT_CHARTS if k in kinds]),
        )
        or []
    )
    drawn = tuple(k for k in compare_view.CHARTS if k in picked_charts)
    key = built.choice + (built.baseline, drawn)
    args = (built.frame, built.group_bases, built.baselines, db, drawn)
    for i, section in enumerate(ui.memo(key, compare_view.sections, *args)):
        st.subheader(f"Workload: {md_text(section.name)}")
        if section.sweep is not None:
            st.plotly_chart(section.sweep, key=f"chart_sweep_{i}")
        figures = [(kind, getattr(section, kind)) for kind in drawn if kind != "sweep"]
        _pairs(
            [(kind, figure) for kind, figure in figures if figure is not None], lambda kind, i=i: f"chart_{kind}_{i}"
        )


def _time_to_target(db, chosen: Chosen, built: Built) -> None:
    if not ui.memo(built.choice + ("to_accuracy",), accuracy_view.to_accuracy_chosen, chosen.chosen_runs):
        return  # a throughput-only choice reads no result here: read only when a chosen run trained on real data
    key = built.choice + ("to_target",)
    target = ui.memo(key, accuracy_view.target_section, db, tuple(chosen.chosen), built.catalog)
    if target is None:
        return
    st.subheader("Time and cost to target")
    if target.note:  # one line, not an empty chart, for what is not there to draw
        st.caption(target.note)
    figures = [
        ("to_target_time", target.time),
        ("to_target_cost", target.cost),
        ("accuracy_time", target.against_time),
        ("accuracy_cost", target.against_cost),
    ]
    _pairs([(key, figure) for key, figure in figures if figure is not None], lambda key: f"chart_{key}")
    ui.table(target.shown.table)
    if target.shown.caption:
        st.caption(target.shown.caption)
    # Built only while open, as the numbers' full table.
    with st.expander(f"Every column ({len(target.table.columns)})", key="cmp_target_all", on_change="rerun") as box:
        if box.open:
            ui.table(target.table)
    if target.caption:
        st.caption(target.caption)


def _parity(db, chosen: Chosen, built: Built) -> None:
    verdicts = ui.memo(built.choice + ("parity",), accuracy_view.parity_verdicts, db, chosen.chosen_runs)
    if not verdicts:
        return
    st.subheader("Convergence parity")
    parity_lines = parity.flag_lines(verdicts)
    if any(v.flags for v in verdicts):
        st.warning("**Trains differently on another device**\n\n" + "\n".join(parity_lines), icon=":material/warning:")
    elif parity_lines:
        st.caption("\n".join(parity_lines))
    summary = parity.summary(verdicts)
    if summary:
        st.caption(md_text(summary))


def _the_numbers(built: Built) -> None:
    st.subheader("The numbers")
    denominators = compare.mfu_denominators_note(built.frame)
    if denominators:
        st.caption(md_text(denominators))
    key = built.choice + (built.baseline,)
    table = ui.memo(key, compare.compare_table, built.frame)
    # One table per workload section when there are several: each has its own speed-up baseline. Each shows
    # the figures a row is read for; the other columns are in the full table below and the CSV.
    parts = ui.memo(key + ("parts",), compare_view.table_parts, table, built.frame, built.group_bases)
    for head, shown in ui.memo(key + ("headline",), headline.headline_parts, parts):
        if head:
            st.markdown(head)
        # As wide as its columns: a stretched grid widens only its unpinned figures, never the pinned name.
        ui.table(shown.table, hints=shown.hints, widths=shown.widths, width="content")
        if shown.caption:
            st.caption(shown.caption)
    # Built only while open, as the epochs table: a closed expander's table still cost every visit its Arrow.
    with st.expander(f"Every column ({len(table.columns)})", key="cmp_numbers_all", on_change="rerun") as every_column:
        if every_column.open:
            ui.table(table, hints={"usd_per_million_examples": cost_help(table["model"] if "model" in table else ())})
    # Written only when clicked.
    st.download_button(
        "Download CSV",
        lambda: compare.csv_bytes(table),
        file_name="dashbench-compare.csv",
        mime="text/csv",
        icon=":material/download:",
        on_click="ignore",
    )


def _epochs(built: Built) -> None:
    # Built only while open: a closed expander's table would cost every filter change its price matching.
    with st.expander("Time and cost of N epochs", key="cmp_epochs_open", on_change="rerun") as epochs_box:
        if not epochs_box.open:
            return
        cols = st.columns(2)
        dataset_size = cols[0].number_input(
            "Dataset size (examples)", min_value=1, value=60_000, step=1000, key="cmp_dataset"
        )
        epochs = cols[1].number_input("Epochs", min_value=0.1, value=5.0, step=1.0, key="cmp_epochs")
        key = built.choice + (built.baseline, int(dataset_size), float(epochs))
        ui.table(ui.memo(key, compare.epochs_table, built.frame, built.catalog, int(dataset_size), float(epochs)))
        left_out = compare.epochs_left_out(built.frame)
        if left_out:
            st.caption(
                "Left out, not at full size (their time is not the full-size model's): "
                + ", ".join(md_text(label) for label in left_out)
                + "."
            )


def _published_ratios(chosen: Chosen) -> None:
    if not chosen.show_reference:
        return
    models = chosen.chosen_models
    ratios = ui.memo(tuple(models), compare.published_ratios_for, chosen.published, models)
    if ratios.empty:
        return
    # Built only while open, as the epochs table: a closed expander's table still cost every visit its Arrow.
    with st.expander(
        "Published ratios (computed from raw figures where the article gave them)",
        key="cmp_ratios_open",
        on_change="rerun",
    ) as ratios_box:
        if ratios_box.open:
            ui.table(ratios)
