"""Run's widgets: launch a run or a batch-size sweep through the job runner and watch it live.

pages/run.py only calls show(): a page file is compiled again for each visitor who finds no other session
open (Streamlit empties its script cache when the last one leaves), a module once per process (see compare/page.py)."""

from __future__ import annotations

import streamlit as st

from dashbench.core.spec import BACKENDS, DATA_SOURCES, PRECISIONS, SpecError
from dashbench.jobs import checks, max_batch, queue
from dashbench.results import accuracy_text
from dashbench.views.common import context, sample_charts, stored_runs
from dashbench.views.common import devices as device_views
from dashbench.views.common.format import md_text, run_label
from dashbench.views.run import checks as check_views
from dashbench.views.run import fleet as fleet_views
from dashbench.views.run import form as run_form
from dashbench.views.run import live
from dashbench.views.streamlit import ui


def _apply_preset():
    slug = st.session_state["run_preset"]
    if slug:
        st.session_state.update(
            run_form.preset_form_values(slug, st.session_state["run_device"], quick=st.session_state["run_quick"])
        )
    else:
        if st.session_state.get("run_label", "").startswith("preset:"):
            st.session_state["run_label"] = ""  # a custom run must not be filed under the preset it left
        st.session_state.update(run_form.quick_toggle_values(st.session_state))


def _model_changed():
    st.session_state.update(run_form.model_change_values(st.session_state))  # a quick try follows its model


def _mode_changed():
    st.session_state.update(run_form.mode_change_values(st.session_state))  # to accuracy: real data


def show() -> None:
    """The page, top to bottom (st.stop() ends it early, as in a page file)."""
    ctx = ui.page_context()
    st.title("Run")
    if ctx.store is None and ctx.store_error:
        ui.show_store_error(ctx.settings, ctx.store_error)  # an outage of the team store: it retries
    if ctx.settings.read_only or ctx.store is None:
        st.error(md_text(ctx.store_error) or "This dashboard is read-only: runs are launched elsewhere.")
        st.stop()
    db_path = ctx.settings.db_path
    devices, places = _devices_and_places()
    check_state = checks.state(db_path)
    st.fragment(_machine_check_panel, run_every=2.0 if check_state and check_state["running"] else None)(ctx)
    for key, value in run_form.run_form_defaults(devices.kinds).items():
        st.session_state.setdefault(key, value)
    quick_shapes = _model_choice(ctx)
    _what_to_measure()
    buttons = _run_form(devices, places, quick_shapes)
    _launch(ctx, places, buttons)
    search_state = max_batch.state(db_path)
    st.fragment(_search_panel, run_every=2.0 if search_state and search_state["running"] else None)(db_path)
    if not ctx.store.runs(status=["queued", "running"]).empty:
        st.fragment(ui.through_outages(_live_panel), run_every=1.0)(ctx, places)
    _finished(ctx)


def _devices_and_places():
    devices = device_views.device_info(wait=False)
    if devices is None:  # the form is drawn at once, with the CPU; the devices fill in when found
        st.fragment(_until_devices_found, run_every=1.0)()
        st.session_state.setdefault(PROVISIONAL, "run_device" not in st.session_state)
        devices = device_views.LOOKING
    elif st.session_state.pop(PROVISIONAL, False):
        _device_found(devices.kinds)
    if devices.error:
        st.warning(md_text(devices.error))
    places = fleet_views.places()  # "this machine", and a Ray cluster's places when RAY_ADDRESS names one
    if places.error:
        st.warning(f"The cluster at {md_text(places.address)}: {md_text(places.error)}")
    return devices, places


PROVISIONAL = "run_device_provisional"  # the CPU was chosen only because the devices were not known yet


def _until_devices_found():
    if device_views.device_info(wait=False) is None:
        st.caption("Looking for devices on this machine… the form offers the CPU until they are found.")
    else:
        st.rerun(scope="app")


def _device_found(kinds: list[str]) -> None:
    """The CPU offered while the discovery ran was no one's choice: the machine's default device replaces it,
    and a preset chosen meanwhile takes that device's values."""
    state = st.session_state
    if state.get("run_device", kinds[0]) == kinds[0]:
        return
    state["run_device"] = kinds[0]
    if state.get("run_preset"):
        state.update(run_form.preset_form_values(state["run_preset"], kinds[0], quick=state.get("run_quick", False)))


def _machine_check_panel(ctx):
    """The host's last `dashbench doctor` verdict and a button that runs it again in the background;
    refreshes on its own while a check started here is running."""
    db_path = ctx.settings.db_path
    with context.own_store(ctx.settings) as store:
        status = check_views.machine_check(store)
    state = checks.state(db_path)
    with st.container(border=True, key="machine_check"):
        cols = st.columns([5, 1])
        getattr(cols[0], status.level)(status.text)  # made here from a date and a known verdict
        running = bool(state and state["running"])
        if cols[1].button(
            "Check this machine",
            key="run_check_machine",
            disabled=running,
            help="Runs `python -m dashbench doctor` in the background: matmul peaks, the "
            "stopwatch and placement, per device and backend.",
        ):
            checks.launch(db_path)
            st.rerun(scope="app")
        line = check_views.check_progress(state, checks.log_tail(state["log_path"]) if state else "")
        if line:
            (st.info if running else st.error)(md_text(line))
        for detail in status.details:
            st.caption(md_text(detail))
    if st.session_state.get("check_was_running") and not running:
        st.session_state["check_was_running"] = False
        st.rerun(scope="app")  # the check landed: redraw once with its verdict
    st.session_state["check_was_running"] = running


def _model_choice(ctx) -> bool:
    """Preset, model and quick try; True when the quick try's shapes are set without a preset."""
    preset_names = run_form.preset_choices()
    cols = st.columns([3, 2, 1.3])
    cols[0].selectbox(
        "Preset (an experiment from the seed articles)",
        [""] + list(preset_names),
        key="run_preset",
        format_func=lambda slug: preset_names.get(slug, "— none: set everything below —"),
        on_change=_apply_preset,
    )
    # Outside the form: the quick try's caption, batch and shapes follow a model as soon as it is chosen;
    # inside, the page would only see the choice on launch.
    cols[1].selectbox(
        "Model", run_form.model_choices(ctx.settings.models_dir), key="run_model", on_change=_model_changed
    )
    cols[2].checkbox(
        "Quick try (tiny shapes)",
        key="run_quick",
        on_change=_apply_preset,
        help="The preset's or model's quick try (`python -m dashbench models`): tiny shapes, a small "
        "batch and a few steps — seconds on a CPU, for trying it out.",
    )
    if st.session_state["run_preset"]:
        st.caption(run_form.preset_description(st.session_state["run_preset"]))
    quick_shapes = run_form.quick_without_preset(st.session_state)
    if quick_shapes:  # the shape boxes show the model the form last submitted; the launch uses its own
        st.session_state.update(run_form.quick_shape_values(st.session_state["run_model"]))
        st.caption(run_form.quick_caption(st.session_state["run_model"]))
    return quick_shapes


def _what_to_measure() -> None:
    # Outside the form: choosing a mode redraws the page at once with only that mode's boxes; inside a form
    # the choice would wait for a launch.
    with st.container(border=True, key="run_accuracy_box"):
        st.radio(
            "What to measure",
            list(run_form.MODES),
            key="run_mode",
            horizontal=True,
            format_func=run_form.MODES.get,
            on_change=_mode_changed,
            help="Training to accuracy evaluates the whole held-out split after every epoch (or every K "
            "steps) and needs real data: Fashion-MNIST's IDX files, or an image folder with train/ "
            "and validation/ (a subfolder per class); llama trains to a validation loss on held-out "
            "teacher text of its own (synthetic). Time to target counts evaluations; compile and "
            "data loading are reported apart.",
        )
        cols = st.columns([1, 3])
        cols[0].selectbox("Data", DATA_SOURCES, key="run_data")
        cols[1].text_input(
            "Data path (real: the folder of Fashion-MNIST's IDX files, empty for Keras's cache; "
            "folder: train/ and validation/)",
            key="run_data_path",
        )
        note = run_form.data_note(st.session_state)
        if note:  # before launch: an offline machine has no Keras cache to fill
            st.info(md_text(note), icon=":material/folder_open:")
        boxes = run_form.mode_boxes(st.session_state["run_mode"], st.session_state.get("run_model"))
        for col, (key, box) in zip(st.columns(5) if boxes else [], boxes):  # 5: the most a mode has
            col.number_input(key=key, **box)


def _run_form(devices, places, quick_shapes: bool) -> tuple[bool, bool, bool]:
    """The form's boxes and its three buttons: (launch, launch sweep, find the largest batch) clicked."""
    # Enter in a field must never launch anything: only a click on a button does.
    with st.form("run_form", enter_to_submit=False):
        _where_and_how(devices, places)
        _steps_and_shapes(quick_shapes)
        cols = st.columns(3)
        launch = cols[0].form_submit_button("Launch run", type="primary", key="run_launch")
        launch_sweep = cols[1].form_submit_button("Launch sweep", key="run_launch_sweep")
        find_max = cols[2].form_submit_button(
            "Find the largest batch",
            key="run_find_max",
            help="Doubling from the batch size above until a try runs out of memory, then binary search: each try "
            "its own run of few steps, queued as one sweep (`python -m dashbench sweep --model MODEL --find-max-batch`).",
        )
    return launch, launch_sweep, find_max


def _where_and_how(devices, places) -> None:
    cols = st.columns([1, 2, 1, 1])  # the device's name is long ("CPU: Intel(R) Xeon(R) CPU @ 2.20GHz")
    # The batch box stops at 1; the other whole-number boxes have no min_value: a value out of range is
    # refused on launch in words ("Not launched: steps: …").
    cols[0].number_input(
        "Global batch size",
        min_value=1,
        step=1,
        key="run_batch_size",
        help="At least 1: the batch of one step, split across every chip.",
    )
    cols[1].selectbox(
        "Device", devices.kinds, key="run_device", format_func=lambda k: devices.description.get(k, k.upper())
    )
    cols[2].selectbox(
        "Backend",
        BACKENDS,
        key="run_backend",
        help="Keras backend: TensorFlow (the default), or JAX. Sweeps use it for every point.",
    )
    cols[3].selectbox("Precision", PRECISIONS, key="run_precision")
    if len(places.options) > 1:
        st.selectbox(
            "Where",
            places.options,
            key="run_place",
            format_func=places.labels.get,
            help="This machine's queue, or a place on the Ray cluster (free devices now); the Device "
            "above is what the run uses there. A cluster run lands in the team store.",
        )


def _steps_and_shapes(quick_shapes: bool) -> None:
    cols = st.columns(5)
    cols[0].number_input("Measured steps", step=1, key="run_steps")
    cols[1].number_input("Warm-up steps", step=1, key="run_warmup")
    cols[2].number_input("Steps per host loop", step=1, key="run_steps_per_loop")
    cols[3].number_input(
        "Repeats",
        step=1,
        key="run_repeats",
        help="Measure the steps this many times after one compile: the median is the figure, "
        "and a spread (CV) over 5% is flagged unstable.",
    )
    cols[4].checkbox("XLA (jit_compile)", key="run_xla")
    st.text_input("Label (optional, stored with the run)", key="run_label")
    with st.expander("Quick shapes (smaller than full size, e.g. to try a model on a CPU; 0 = full size)"):
        cols = st.columns(3)
        cols[0].number_input("Image size", step=1, key="run_image_size", disabled=quick_shapes)
        cols[1].number_input("Sequence length", step=1, key="run_seq_len", disabled=quick_shapes)
        cols[2].number_input("Width (filters / hidden units)", step=1, key="run_width", disabled=quick_shapes)
    st.text_input("Batch sizes for a sweep (e.g. 32, 64, 128): one run per size, queued", key="run_sweep")


def _launch(ctx, places, buttons: tuple[bool, bool, bool]) -> None:
    """What a click on one of the form's buttons queues, or one line on why not."""
    launch, launch_sweep, find_max = buttons
    db_path = ctx.settings.db_path
    unclear = run_form.launch_conflict(st.session_state, launch)
    if unclear:
        st.warning(unclear)
        return
    if launch or launch_sweep:
        try:
            specs, sweep_id = run_form.specs_from_form(
                st.session_state, sweep=launch_sweep, models_dir=ctx.settings.models_dir
            )
            place = st.session_state.get("run_place") or fleet_views.THIS_MACHINE
            launcher = fleet_views.launcher(places.address, place)
            # A point that cannot fit here refuses the whole launch before anything is queued; a cluster's
            # run processes check their own. The specs are checked once, so the launcher does not again.
            warnings = run_form.memory_warnings(specs) if launcher.checks_here else []
            ids = [launcher.launch(spec, db_path, sweep_id=sweep_id, checked=True) for spec in specs]
        except SpecError as exc:
            st.error(f"Not launched: {md_text(run_form.refusal_text(exc))}")
        else:
            for warning in warnings:
                st.warning(f"Memory: {md_text(warning)}")
            st.session_state.setdefault("my_runs", []).extend(ids)
            st.success(f"Queued {len(ids)} run(s)" + (f" as sweep `{sweep_id}`" if sweep_id else "") + ".")
            if note := launcher.note(db_path):
                st.info(f"Note: {md_text(note)}.")
    if find_max:
        try:
            if st.session_state.get("run_place"):
                raise SpecError("where", "the largest-batch search runs on this machine: choose “this machine”")
            base, _sweep = run_form.specs_from_form(st.session_state, models_dir=ctx.settings.models_dir)
            run_form.memory_warnings(base)  # the search starts from a batch that fits this machine
            max_batch.launch(base[0], db_path)
        except SpecError as exc:
            st.error(f"Not launched: {md_text(run_form.refusal_text(exc))}")


def _search_panel(db_path):
    """The largest-batch search started here: going (its tries are the active runs below), or its answer."""
    search = max_batch.state(db_path)
    if search is None:
        return
    if search["running"]:
        st.info(f"Finding the largest batch of {md_text(search['model'])} that fits: each try is a run below.")
    elif search["summary"]:
        st.success("  \n".join(md_text(line) for line in max_batch.summary_lines(search["summary"])))
    else:
        st.error(
            f"The search for the largest batch ended without an answer (exit code {search['returncode']}): "
            f"{md_text(checks.log_tail(search['log_path']))}"
        )
    if st.session_state.get("search_was_running") and not search["running"]:
        st.session_state["search_was_running"] = False
        st.rerun(scope="app")  # the answer landed: redraw once with it and its runs
    st.session_state["search_was_running"] = search["running"]


def _live_panel(ctx, places):
    """Refreshes on its own while runs are active; a plain function of the store underneath."""
    db_path = ctx.settings.db_path
    with context.own_store(ctx.settings) as store:
        fleet_views.tend(db_path, places.address)  # the queue moves on; lost hosts' and ended jobs' runs end
        current = live.running_first(store.runs(status=["queued", "running"]))
    if current.empty:
        st.rerun(scope="app")  # all finished: redraw the page once with their headlines
    st.subheader(f"Active runs ({len(current)})")  # in here, so a run that ends or is cancelled leaves the count
    for _, row in current.iterrows():
        run_id = row["run_id"]
        view = live.live_view(queue.progress(run_id, db_path))
        with st.container(border=True):
            cols = st.columns([5, 1])
            cols[0].markdown(f"**{md_text(run_label(row))}** — {view.text}")
            if cols[1].button("Cancel", key=f"cancel_{run_id}"):
                fleet_views.cancel(run_id, db_path, places.address)
            st.progress(view.fraction)
            if not view.samples.empty:
                st.plotly_chart(sample_charts.live(view.samples), key=f"live_{run_id}")


def _finished(ctx) -> None:
    mine = run_form.finished_runs(ctx.store, st.session_state.get("my_runs", []))
    earlier = not mine  # a reload or a new tab: this session launched nothing, the store's last runs instead
    if earlier:
        mine = run_form.recent_finished(ctx.store)
    if not mine:
        return
    st.subheader("Last finished in this store" if earlier else "Finished")
    for run in mine:
        detail = stored_runs.run_detail(run)
        with st.container(border=True):
            ui.run_summary(detail, accuracy_text.result_lines(run.get("result")))
    cols = st.columns(2)
    cols[0].page_link(
        "pages/compare.py",
        label="Compare these runs",
        icon=":material/bar_chart:",
        query_params={"runs": ",".join(r["run_id"] for r in mine)},
    )
    cols[1].page_link("pages/results.py", label="Every stored run in Results", icon=":material/table_rows:")
