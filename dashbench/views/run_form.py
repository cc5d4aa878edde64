"""The Run page's form: its defaults, presets filling it, and its values turned into RunSpecs."""

from __future__ import annotations

from dashbench.spec import SPEC_DEFAULTS, RunSpec, parse_batch_sizes
from dashbench.store import TERMINAL, new_sweep_id
from dashbench.views.format import is_number, md_text

FORM_FIELDS = ("model", "batch_size", "device", "backend", "precision", "xla", "steps", "warmup", "steps_per_loop", "repeats", "label",
               "image_size", "seq_len", "width")


def run_form_defaults(kinds: list[str]) -> dict:
    """Session-state defaults of the Run form (keys run_<field>); 0 in a shape box means full size."""
    return {
        "run_model": "fashion_mnist_cnn", "run_batch_size": 32, "run_device": kinds[0] if kinds else "cpu",
        "run_backend": SPEC_DEFAULTS["backend"],
        "run_precision": SPEC_DEFAULTS["precision"], "run_xla": SPEC_DEFAULTS["xla"],
        "run_steps": SPEC_DEFAULTS["steps"], "run_warmup": SPEC_DEFAULTS["warmup"],
        "run_steps_per_loop": SPEC_DEFAULTS["steps_per_loop"], "run_repeats": SPEC_DEFAULTS["repeats"],
        "run_label": "",
        "run_image_size": 0, "run_seq_len": 0, "run_width": 0, "run_sweep": "", "run_preset": "", "run_quick": False,
    }


def specs_from_form(state, sweep: bool = False) -> tuple[list[RunSpec], str | None]:
    """The Run form's values → the specs to submit (one, or one per sweep batch size) and a sweep id."""
    values = {name: state.get(f"run_{name}") for name in FORM_FIELDS}
    values["batch_size"] = int(values["batch_size"]) if is_number(values["batch_size"]) else values["batch_size"]
    values["label"] = (values.get("label") or "").strip() or None
    base = build_spec(values)
    if not sweep:
        specs, sweep_id = [base], None
    else:
        sizes = parse_batch_sizes(state.get("run_sweep") or "")
        specs, sweep_id = [base.replace(batch_size=size) for size in sizes], new_sweep_id()
    memory_warnings(specs)  # a point that cannot fit refuses the whole launch before anything is queued
    return specs, sweep_id


def memory_warnings(specs: list[RunSpec]) -> list[str]:
    """Each spec's memory estimate against its device's memory (dashbench.memory): SpecError naming
    batch_size when one cannot fit; the warnings of those past half of it."""
    from dashbench import memory

    return [warning for warning in (memory.check(spec) for spec in specs) if warning]


def launch_conflict(state, launch: bool) -> str | None:
    """What to ask when "Launch run" is clicked with batch sizes in the sweep field (the user may have
    meant a sweep): nothing is queued until they choose. None when the click is unambiguous."""
    sweep_text = (state.get("run_sweep") or "").strip()
    if not launch or not sweep_text:
        return None
    return (f"Nothing launched: the sweep field holds batch sizes ({md_text(sweep_text)}). Click **Launch sweep** to "
            f"queue one run per size, or empty the sweep field and click **Launch run** for one run.")


def finished_runs(store, run_ids: list[str], limit: int = 6) -> list[dict]:
    """The most recent of this session's runs that have ended, newest first."""
    out = []
    for run_id in reversed(run_ids):
        run = store.get_run(run_id)
        if run and run["status"] in TERMINAL:
            out.append(run)
        if len(out) >= limit:
            break
    return out


def build_spec(values: dict) -> RunSpec:
    """Form values → RunSpec; empty shape overrides mean full size. RunSpec validates the fields and
    the workload (no TensorFlow) what the model takes, so a bad form queues nothing."""
    from dashbench import catalog

    clean = {}
    for name, value in values.items():
        if name not in SPEC_DEFAULTS and name not in ("model", "batch_size"):
            continue
        if value is None or value == "" or (name in ("image_size", "seq_len", "width") and value == 0):
            continue
        clean[name] = value
    spec = RunSpec.from_dict(clean)
    catalog.check_spec(spec)
    return spec


def preset_choices() -> dict[str, str]:
    """slug → display name of the seed presets."""
    from dashbench import presets

    return {slug: preset.name for slug, preset in presets.PRESETS.items()}


def preset_description(slug: str) -> str:
    from dashbench import presets

    preset = presets.get(slug)
    return f"{preset.description} — {preset.source}"


def preset_form_values(slug: str, device_class: str, quick: bool = False) -> dict:
    """What choosing a preset puts in the Run form: the article's model, batch size and steps for this
    device class, or (quick) its tiny shapes that run in seconds on a CPU."""
    from dashbench import presets

    spec = presets.quick_spec(slug, device_class) if quick else presets.spec_for(slug, device_class)
    # The device and the backend stay as chosen: a preset is the article's workload, not its framework.
    values = {f"run_{name}": getattr(spec, name) for name in FORM_FIELDS if name not in ("device", "backend")}
    for shape in ("image_size", "seq_len", "width"):
        values[f"run_{shape}"] = values[f"run_{shape}"] or 0
    values["run_label"] = spec.label or ""
    return values


