"""Predict's widgets: pick a step (a stored run's profile, or a workload profiled in a child process),
a precision and chips; see every device's predicted throughput and cost with its band, your measured
runs beside them, and the cheapest device to the target. Nothing here imports a user's model: the
profile is data (pages/predict.py only calls show())."""

from __future__ import annotations

import streamlit as st

from dashbench.core.spec import MODELS, SpecError
from dashbench.predict import words
from dashbench.predict.roofline import CHIP_PRECISIONS, PredictError
from dashbench.views.common.format import md_text
from dashbench.views.predict import charts, profiles
from dashbench.views.predict import table as predict_table
from dashbench.views.streamlit import ui
from dashbench.workloads import model_file

SOURCES = ("a stored run", "a workload, profiled in a child process")
RUN_PRECISION = {
    "fp32": "float32",
    "tf32": "float32",
    "bf16": "mixed_bfloat16",
    "fp16": "mixed_float16",
    "fp8": "mixed_bfloat16",
}
CHIP_PRECISION = {"float32": "fp32", "mixed_bfloat16": "bf16", "mixed_float16": "fp16"}


def show() -> None:
    ctx = ui.open_page("Predict")
    st.caption(
        "Predicted, not measured: a roofline with efficiencies fitted to published rows and your runs. "
        "The band is the predictor's leave-one-out error for the device family and kind of workload."
    )
    source = st.radio("Profile from", SOURCES, key="pred_source", horizontal=True)
    profile = _stored(ctx) if source == SOURCES[0] else _workload(ctx)
    if profile is None:
        return
    cols = st.columns(2)
    given = profile["precision"] if isinstance(profile, dict) else profile.precision
    default = (
        CHIP_PRECISIONS.index(CHIP_PRECISION.get(given, given))
        if CHIP_PRECISION.get(given, given) in CHIP_PRECISIONS
        else 0
    )
    precision = cols[0].selectbox("Precision", CHIP_PRECISIONS, index=default, key="pred_precision")
    chips = int(cols[1].number_input("Chips of each device", min_value=1, value=1, step=1, key="pred_chips"))
    try:
        rows = profiles.predictions(profile, chips, precision, ctx.store)
    except (SpecError, PredictError) as exc:
        st.error(md_text(exc))
        return
    if not rows:
        st.info("No device of the catalog computes at this precision.")
        return
    st.plotly_chart(charts.figure(rows), key="pred_chart")
    full = words.frame(rows)
    shown, widths = predict_table.headline(full)
    ui.table(shown, widths=widths, width="content")
    folded = f"Every column ({len(full.columns)}): step time, spot price, calibration"
    with st.expander(folded, key="pred_all", on_change="rerun") as every_column:
        if every_column.open:  # built only while open
            ui.table(full, widths=predict_table.widths(full))
    for note in sorted({r["band_note"] for r in rows if r["band_note"]}):
        st.caption(md_text(note))
    lines = words.target_lines(rows)
    if lines:
        st.markdown("\n".join(f"- {md_text(line.strip())}" for line in lines[1:]), help=lines[0])
        st.caption(md_text(lines[0]))


def _stored(ctx):
    choices = ui.shared(ctx, (), profiles.stored, ctx.store)
    if not choices:
        st.info("No stored run carries its step's profile yet: profile a workload instead, or run one.")
        return None
    labels = [c["label"] for c in choices]
    label = st.selectbox("Stored run", labels, key="pred_run")
    return choices[labels.index(label)]["profile"]


def _workload(ctx):
    folder = model_file.models_dir(ctx.settings.models_dir or "")
    models = [*MODELS, *model_file.choices(folder)]
    cols = st.columns(3)
    model = cols[0].selectbox("Model", models, key="pred_model")
    batch = int(cols[1].number_input("Global batch", min_value=1, value=32, step=1, key="pred_batch"))
    precision = cols[2].selectbox(
        "Profile at",
        list(RUN_PRECISION.values())[:1] + ["mixed_bfloat16", "mixed_float16"],
        key="pred_profile_precision",
    )
    shape = {}
    with st.expander("Shape (blank: the workload's full size)"):
        row = st.columns(4)
        for i, name in enumerate(profiles.SHAPES):
            value = row[i].number_input(name.replace("_", " "), min_value=1, value=None, step=1, key=f"pred_{name}")
            if value:
                shape[name] = int(value)
    wanted = (model, batch, precision, tuple(sorted(shape.items())))
    if st.button("Profile it", key="pred_profile"):
        try:
            target = model
            if model not in MODELS:
                ref = model_file.reference_in(folder, model)
                builder = model_file.builder_of(ref["model"])
                target = ref["model_path"] + (f":{builder}" if builder else "")
            st.session_state["pred_profiled"] = (wanted, profiles.child_profile(target, batch, precision, shape))
        except SpecError as exc:
            st.error(md_text(exc))
            return None
    done = st.session_state.get("pred_profiled")
    if not done or done[0] != wanted:
        st.caption("Profiling builds the model in its own process (no weights allocated); nothing is stored.")
        return None
    return done[1]
