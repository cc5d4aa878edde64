"""The Run page's form: its defaults, presets filling it, and its values turned into RunSpecs."""

from __future__ import annotations

from dashbench.core.spec import (
    DEFAULT_MAX_EPOCHS,
    HELD_OUT_SYNTHETIC_MODELS,
    LOSS_TARGET_MODELS,
    SPEC_DEFAULTS,
    RunSpec,
    SpecError,
    parse_batch_sizes,
)
from dashbench.store import TERMINAL, new_sweep_id
from dashbench.views.common.format import is_number, md_text
from dashbench.workloads.lm_shape import TARGET_LOG_PERPLEXITY

FORM_FIELDS = (
    "model",
    "batch_size",
    "device",
    "backend",
    "precision",
    "xla",
    "steps",
    "warmup",
    "steps_per_loop",
    "repeats",
    "label",
    "image_size",
    "seq_len",
    "width",
    "layers",
    "data",
    "data_path",
)
# "What to measure": throughput over the measured steps, training to a target accuracy, or a fixed
# number of epochs (the Colab article's way); the last two evaluate the held-out split.
MODES = {
    "throughput": "Throughput (measured steps)",
    "target": "Train to accuracy (target, at most N epochs)",
    "epochs": "Fixed epochs (evaluated after each)",
}
# The fields each to-accuracy mode sends; 0 in steps per epoch / evaluate every means the default. An LM's
# target is a validation loss instead of an accuracy (mode_fields).
MODE_FIELDS = {
    "throughput": (),
    "target": ("target_accuracy", "max_epochs", "steps_per_epoch", "eval_every", "seeds"),
    "epochs": ("epochs", "steps_per_epoch", "eval_every", "seeds"),
}
# The number boxes of the to-accuracy modes: the page shows exactly MODE_FIELDS[mode] of them, so a
# throughput run shows none and a fixed-epochs run no target.
ACCURACY_BOXES = {
    "target_accuracy": {
        "label": "Target accuracy",
        "step": 0.01,
        "format": "%.3f",
        "help": "A validation accuracy in (0, 1]: training stops at the evaluation that reaches it.",
    },
    "target_loss": {
        "label": "Target validation loss",
        "step": 0.1,
        "format": "%.3f",
        "help": f"Mean next-token cross-entropy in nats (log-perplexity), > 0: training stops at the "
        f"evaluation where it falls to this. {TARGET_LOG_PERPLEXITY} is MLPerf Training's target "
        f"for Llama 3.1 8B; one at or below the teacher text's entropy floor is refused.",
    },
    "max_epochs": {
        "label": "Max epochs",
        "step": 1,
        "help": "Stop there, status not_reached, if the target is not met.",
    },
    "epochs": {"label": "Epochs", "step": 1, "help": "Train exactly this many, evaluating after each."},
    "steps_per_epoch": {"label": "Steps per epoch", "step": 1, "help": "0: one pass over the train split."},
    "eval_every": {"label": "Evaluate every (steps)", "step": 1, "help": "0: after every epoch."},
    "seeds": {
        "label": "Seeds",
        "step": 1,
        "help": "Train the same setup this many times (seed, seed+1, …): the median time to target and its spread.",
    },
}


def run_form_defaults(kinds: list[str]) -> dict:
    """Session-state defaults of the Run form (keys run_<field>); 0 in a shape box means full size."""
    return {
        "run_model": "fashion_mnist_cnn",
        "run_batch_size": 32,
        "run_device": kinds[0] if kinds else "cpu",
        "run_backend": SPEC_DEFAULTS["backend"],
        "run_precision": SPEC_DEFAULTS["precision"],
        "run_xla": SPEC_DEFAULTS["xla"],
        "run_steps": SPEC_DEFAULTS["steps"],
        "run_warmup": SPEC_DEFAULTS["warmup"],
        "run_steps_per_loop": SPEC_DEFAULTS["steps_per_loop"],
        "run_repeats": SPEC_DEFAULTS["repeats"],
        "run_label": "",
        "run_image_size": 0,
        "run_seq_len": 0,
        "run_width": 0,
        "run_layers": 0,
        "run_sweep": "",
        "run_preset": "",
        "run_quick": False,
        "run_data": SPEC_DEFAULTS["data"],
        "run_data_path": "",
        "run_mode": "throughput",
        "run_target_accuracy": 0.9,
        "run_target_loss": TARGET_LOG_PERPLEXITY,
        "run_max_epochs": DEFAULT_MAX_EPOCHS,
        "run_epochs": 5,
        "run_steps_per_epoch": 0,
        "run_eval_every": 0,
        "run_seeds": 1,
    }


SHAPE_FIELDS = ("image_size", "seq_len", "width", "layers")  # layers: no box, only the quick try sets it
# The form's words for a spec field, so a refusal names the box to fix.
FIELD_WORDS = {
    "batch_size": "batch size",
    "batch_sizes": "batch sizes",
    "steps": "measured steps",
    "warmup": "warm-up steps",
    "steps_per_loop": "steps per host loop",
    "image_size": "image size",
    "seq_len": "sequence length",
    "target_accuracy": "target accuracy",
    "target_loss": "target validation loss",
    "max_epochs": "max epochs",
    "steps_per_epoch": "steps per epoch",
    "eval_every": "evaluate every (steps)",
    "data_path": "data path",
    "run_mode": "what to measure",
}


def quick_without_preset(state) -> bool:
    """Quick try ticked with no preset: the chosen model's quick shapes (dashbench.workloads.registry) apply."""
    return bool(state.get("run_quick")) and not state.get("run_preset")


def quick_shape_values(model: str) -> dict:
    """The shape boxes of `model`'s quick try (0, full size, where its recipe keeps the default)."""
    from dashbench.workloads import registry

    shapes = registry.get(model).quick_shapes()
    return {f"run_{name}": shapes.get(name, 0) for name in SHAPE_FIELDS}


def quick_toggle_values(state) -> dict:
    """What ticking (or unticking) Quick try with no preset puts in the form: the chosen model's quick
    recipe (shapes, batch size, steps); unticked, full size again, and the default batch size and steps
    where they still hold the recipe's (a value the user typed stays)."""
    from dashbench.workloads import registry

    recipe = registry.get(state.get("run_model")).quick_recipe()
    if state.get("run_quick"):
        return {
            **quick_shape_values(state.get("run_model")),
            "run_batch_size": recipe["batch_size"],
            "run_steps": recipe["steps"],
        }
    defaults = run_form_defaults([])
    out = {f"run_{name}": 0 for name in SHAPE_FIELDS}
    for name in ("batch_size", "steps"):
        if state.get(f"run_{name}") == recipe[name]:
            out[f"run_{name}"] = defaults[f"run_{name}"]
    return out


def model_change_values(state) -> dict:
    """What choosing another model puts in the form: with Quick try ticked and no preset, that model's
    quick recipe (shapes, batch size, steps), as ticking the box with it chosen does. An LM trains to its
    target on its own held-out text: the real data a to-accuracy mode chose becomes synthetic again."""
    data = (
        {"run_data": "synthetic"}
        if state.get("run_model") in HELD_OUT_SYNTHETIC_MODELS and state.get("run_data") == "real"
        else {}
    )
    if not quick_without_preset(state):
        return data
    from dashbench.workloads import registry

    recipe = registry.get(state.get("run_model")).quick_recipe()
    return {
        **quick_shape_values(state.get("run_model")),
        "run_batch_size": recipe["batch_size"],
        "run_steps": recipe["steps"],
        **data,
    }


def quick_caption(model: str) -> str:
    """What Quick try (no preset) runs, from the catalog: "fashion_mnist_cnn's quick try: width 16, …"."""
    from dashbench.workloads import registry

    recipe = registry.get(model).quick_recipe()
    shapes = ", ".join(f"{FIELD_WORDS.get(k, k)} {v}" for k, v in recipe.items() if k in SHAPE_FIELDS)
    return (
        f"Quick try of {model}: {shapes} (the shape boxes follow the model), batch size {recipe['batch_size']}, "
        f"{recipe['steps']} steps — as `python -m dashbench models` prints it."
    )


def refusal_text(exc: Exception) -> str:
    """Why a launch was refused, one line (plain text) naming the form's box: "batch size: …"."""
    field_name = getattr(exc, "field", None)
    text = str(exc)
    if field_name and text.startswith(f"{field_name}: "):
        text = f"{FIELD_WORDS.get(field_name, field_name)}: {text[len(field_name) + 2 :]}"
    return text


def model_choices(models_dir: str | None) -> list[str]:
    """The Model box: the built-ins, then the models folder's files ('mlp.py:build', 'vit.keras'),
    found without importing them; never a free-text path."""
    from dashbench.core.spec import MODELS
    from dashbench.workloads import model_file

    return [*MODELS, *model_file.choices(model_file.models_dir(models_dir or ""))]


def specs_from_form(state, sweep: bool = False, models_dir: str | None = None) -> tuple[list[RunSpec], str | None]:
    """The Run form's values → the specs to submit (one, or one per sweep batch size) and a sweep id,
    each checked (catalog.check_spec) once; their memory is the launcher's to check (memory_warnings).
    With Quick try and no preset, the shapes are the submitted model's quick shapes, whatever the
    shape boxes held for the model chosen before."""
    values = {name: state.get(f"run_{name}") for name in FORM_FIELDS}
    values.update(mode_values(state))
    values["data_path"] = (values.get("data_path") or "").strip() or None
    if quick_without_preset(state):
        values.update({k[len("run_") :]: v for k, v in quick_shape_values(values["model"]).items()})
    values["batch_size"] = int(values["batch_size"]) if is_number(values["batch_size"]) else values["batch_size"]
    values["label"] = (values.get("label") or "").strip() or None
    base = build_spec(values, models_dir)
    if not sweep:
        specs, sweep_id = [base], None
    else:
        sizes = parse_batch_sizes(state.get("run_sweep") or "")
        specs, sweep_id = [base.replace(batch_size=size) for size in sizes], new_sweep_id()
    return specs, sweep_id


def mode_change_values(state) -> dict:
    """What choosing a mode puts in the form: a to-accuracy mode needs real data with a held-out split,
    so synthetic data becomes Fashion-MNIST (real); an image folder or real data stays, and so does an LM's
    synthetic text, which has its own held-out split."""
    if (
        state.get("run_mode") in ("target", "epochs")
        and state.get("run_data") == "synthetic"
        and state.get("run_model") not in HELD_OUT_SYNTHETIC_MODELS
    ):
        return {"run_data": "real"}
    return {}


def data_note(state) -> str | None:
    """Where a to-accuracy run's data must be, said before launch when it is not there: Fashion-MNIST's
    four IDX files (train and t10k) in the data path or Keras's cache, or an image folder; None when
    the files are found, or for a throughput run (synthetic data needs no files)."""
    from dashbench.workloads import datasets

    if state.get("run_mode") not in ("target", "epochs"):
        return None
    path = (state.get("run_data_path") or "").strip() or None
    if state.get("run_data") == "folder":
        if path:
            return None  # its train/ and validation/ are checked on launch, where a bad folder is named
        return (
            "An image folder needs its path: a folder with train/ and validation/, a subfolder per class "
            "(train/cat/1.png, validation/cat/7.png, …)."
        )
    if state.get("run_data") != "real":
        return None
    try:
        datasets.fashion_mnist_dir(path, datasets.FASHION_FILES + datasets.FASHION_TEST_FILES)
    except SpecError:
        folder = path or str(datasets.KERAS_FASHION_CACHE)
        names = ", ".join(datasets.FASHION_FILES + datasets.FASHION_TEST_FILES)
        return (
            f"No Fashion-MNIST files in {folder}: put the four IDX files ({names}; .gz or not) in a "
            f"folder and give it as Data path, or leave Data path empty and fill {datasets.KERAS_FASHION_CACHE} "
            "(keras.datasets.fashion_mnist.load_data() does, where the machine is online). Or choose Data "
            "folder: an image folder with train/ and validation/, a subfolder per class."
        )
    return None


def mode_values(state) -> dict:
    """The to-accuracy fields of the chosen mode (none for a throughput run); whole numbers as ints."""
    mode = state.get("run_mode") or "throughput"
    if mode not in MODES:
        raise SpecError("run_mode", f"unknown choice {mode!r}; choose one of: {', '.join(MODES)}")
    out = {}
    for name in mode_fields(mode, state.get("run_model")):
        value = state.get(f"run_{name}")
        if name in ("steps_per_epoch", "eval_every") and value in (0, None, ""):
            continue  # the default: one pass over the train split; evaluate after every epoch
        if name not in ("target_accuracy", "target_loss") and is_number(value) and float(value).is_integer():
            value = int(value)
        out[name] = value
    return out


def mode_fields(mode: str, model: str | None = None) -> tuple:
    """The fields `mode` sends for `model`: an LM's target is a validation loss, not an accuracy."""
    fields = MODE_FIELDS.get(mode, ())
    if model in LOSS_TARGET_MODELS:
        fields = tuple("target_loss" if name == "target_accuracy" else name for name in fields)
    return fields


def mode_boxes(mode: str, model: str | None = None) -> list[tuple[str, dict]]:
    """(session key, number_input arguments) of the boxes `mode` shows, in order; none for throughput."""
    return [(f"run_{name}", ACCURACY_BOXES[name]) for name in mode_fields(mode, model)]


def memory_warnings(specs: list[RunSpec]) -> list[str]:
    """Each spec's memory estimate against its device's memory (dashbench.workloads.memory): SpecError naming
    batch_size when one cannot fit; the warnings of those past half of it."""
    from dashbench.workloads import memory

    return [warning for warning in (memory.check(spec) for spec in specs) if warning]


def launch_conflict(state, launch: bool) -> str | None:
    """What to ask when "Launch run" is clicked with batch sizes in the sweep field (the user may have
    meant a sweep): nothing is queued until they choose. None when the click is unambiguous."""
    sweep_text = (state.get("run_sweep") or "").strip()
    if not launch or not sweep_text:
        return None
    return (
        f"Nothing launched: the sweep field holds batch sizes ({md_text(sweep_text)}). Click **Launch sweep** to "
        f"queue one run per size, or empty the sweep field and click **Launch run** for one run."
    )


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


def recent_finished(store, limit: int = 3) -> list[dict]:
    """The newest runs of this store that have ended, newest first: what a fresh visit to the Run page
    (a reload, another tab) shows in place of this session's runs, which it has none of."""
    run_ids = store.run_ids(status=sorted(TERMINAL), limit=limit)
    return [run for run in (store.get_run(run_id) for run_id in run_ids) if run]


def build_spec(values: dict, models_dir: str | None = None) -> RunSpec:
    """Form values → RunSpec; empty shape overrides mean full size. RunSpec validates the fields and
    the workload (no TensorFlow) what the model takes, so a bad form queues nothing. A model file is
    resolved inside the models folder (refused outside it) and hashed, never imported here."""
    from dashbench.workloads import catalog, model_file

    clean = {}
    for name, value in values.items():
        if name not in SPEC_DEFAULTS and name not in ("model", "batch_size"):
            continue
        if value is None or value == "" or (name in SHAPE_FIELDS and value == 0):
            continue
        clean[name] = value
    if model_file.looks_like_file(clean.get("model")):
        clean.update(model_file.reference_in(model_file.models_dir(models_dir or ""), clean["model"]))
    spec = RunSpec.from_dict(clean)
    catalog.check_spec(spec)
    return spec


def preset_choices() -> dict[str, str]:
    """slug → display name of the seed presets."""
    from dashbench.workloads import presets

    return {slug: preset.name for slug, preset in presets.PRESETS.items()}


def preset_description(slug: str) -> str:
    from dashbench.workloads import presets

    preset = presets.get(slug)
    return f"{preset.description} — {preset.source}"


def preset_form_values(slug: str, device_class: str, quick: bool = False) -> dict:
    """What choosing a preset puts in the Run form: the article's model, batch size and steps for this
    device class, or (quick) its tiny shapes that run in seconds on a CPU."""
    from dashbench.workloads import presets

    # Its data files are looked for when it is launched (the refusal names the data path then), not here.
    spec = (
        presets.quick_spec(slug, device_class, check=False)
        if quick
        else presets.spec_for(slug, device_class, check=False)
    )
    # The device, the backend and a data path typed stay as chosen: a preset is the article's workload,
    # not its framework or where this machine keeps the data.
    values = {
        f"run_{name}": getattr(spec, name) for name in FORM_FIELDS if name not in ("device", "backend", "data_path")
    }
    for shape in SHAPE_FIELDS:
        values[f"run_{shape}"] = values[f"run_{shape}"] or 0
    values["run_label"] = spec.label or ""
    values["run_mode"] = "epochs" if spec.epochs else "target" if spec.target is not None else "throughput"
    if spec.to_accuracy:
        values.update(
            run_epochs=spec.epochs or 5,
            run_steps_per_epoch=spec.steps_per_epoch or 0,
            run_eval_every=spec.eval_every or 0,
            run_seeds=spec.seeds,
        )
    return values
