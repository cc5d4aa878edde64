"""Command-line options shared by every command that builds a RunSpec (run, sweep, preset)."""

from __future__ import annotations

import argparse

from dashbench.core.spec import (
    BACKENDS,
    DATA_SOURCES,
    DEVICES,
    MODELS,
    PRECISIONS,
    SPEC_DEFAULTS,
    RunSpec,
    ascii_float,
    ascii_int,
)
from dashbench.workloads import model_file
from dashbench.workloads.lm_shape import TARGET_LOG_PERPLEXITY


def add_spec_arguments(
    parser: argparse.ArgumentParser,
    *,
    model: bool = True,
    batch_size: bool = True,
    required: bool = True,
    help: dict[str, str] | None = None,
) -> None:
    """Values are checked by RunSpec, not argparse, so every error reads the same. Every option
    defaults to None (RunSpec fills in its defaults), so `given_fields` tells what was typed.
    `required`: argparse insists on --model/--batch-size; `help` replaces an option's help text."""
    texts = {
        "model": f"one of: {', '.join(MODELS)}; or your own: path/file.py:build (a builder function) or "
        "path/model.keras (a saved Keras 3 model)",
        "batch_size": "global batch size",
        "device": f"one of: {', '.join(DEVICES)}",
        "backend": f"Keras backend, one of: {', '.join(BACKENDS)} (default tensorflow)",
        "precision": f"one of: {', '.join(PRECISIONS)}",
        "xla": "compile the step with XLA",
        "steps": "measured steps",
        "warmup": "warm-up steps (not measured)",
        "steps_per_loop": "steps per host call",
        "replicas": "CPU logical devices / GPUs used",
        "data": f"one of: {', '.join(DATA_SOURCES)}",
        "data_path": "real: the folder with Fashion-MNIST's IDX files (train + t10k); folder: an image folder "
        "with train/ and validation/, a subfolder per class",
        "image_size": "override the image side",
        "seq_len": "override the sequence length",
        "width": "override filters / hidden units",
        "layers": "override a decoder LM's layers (llama)",
        "tpu": "TPU name or address (default: this TPU VM)",
        "label": "free text stored with the run",
        "seed": "random seed (weights and synthetic data)",
        "repeats": "measure the steps this many times after one compile: the median is the figure, "
        "the spread (CV) is shown and over 5% flagged unstable",
        # To accuracy: real data with a held-out split, evaluated whole at each evaluation.
        "target_accuracy": "train to this validation accuracy, a fraction in (0, 1], e.g. 0.9; the run stops "
        "there, or ends not_reached after --max-epochs (needs --data real or folder)",
        "target_loss": f"train until the validation loss (mean next-token cross-entropy in nats: an LM's "
        f"log-perplexity) falls to this, a number > 0; alone it is MLPerf Training's Llama 3.1 8B "
        f"target {TARGET_LOG_PERPLEXITY}. llama evaluates on held-out teacher text (no --data needed); "
        f"a target at or below the teacher's entropy floor is refused",
        "max_epochs": "with --target-accuracy: the most epochs trained before the run ends not_reached (default 20)",
        "epochs": "train exactly this many epochs, evaluating after each (the Colab article's way); "
        "not with --target-accuracy",
        "steps_per_epoch": "training steps per epoch (default: one pass over the train split; more repeat it)",
        "eval_every": "evaluate the whole held-out split every K training steps (default: after every epoch)",
        "seeds": "train the same setup this many times, seeds --seed, --seed+1, …, in one run: the headline is "
        "the median time to target with its spread",
    } | (help or {})
    integers = {
        "batch_size",
        "steps",
        "warmup",
        "steps_per_loop",
        "replicas",
        "image_size",
        "seq_len",
        "width",
        "layers",
        "seed",
        "repeats",
        "max_epochs",
        "epochs",
        "steps_per_epoch",
        "eval_every",
        "seeds",
    }
    floats = {"target_accuracy", "target_loss"}
    for name in ("model", "batch_size", *SPEC_DEFAULTS):
        if name in FILE_FIELDS:  # set from --model's file, never typed
            continue
        if (name == "model" and not model) or (name == "batch_size" and not batch_size):
            continue
        option = "--" + name.replace("_", "-")
        text = texts.get(name, name.replace("_", " ")).replace(
            "%", "%%"
        )  # argparse %-formats help: a bare "5%" crashed --help
        if name == "xla":
            parser.add_argument(option, action="store_true", default=None, help=text)
            continue
        kind = _int(name) if name in integers else _float(name) if name in floats else None
        if name == "target_loss":  # the convention's value when given bare
            parser.add_argument(option, type=kind, default=None, nargs="?", const=TARGET_LOG_PERPLEXITY, help=text)
            continue
        parser.add_argument(
            option, type=kind, default=None, required=required and name in ("model", "batch_size"), help=text
        )


FILE_FIELDS = ("model_path", "model_sha256")


def given_fields(args: argparse.Namespace) -> list[str]:
    """The spec fields typed on the command line, in RunSpec's order."""
    return [name for name in ("model", "batch_size", *SPEC_DEFAULTS) if getattr(args, name, None) is not None]


def spec_values(args: argparse.Namespace) -> dict:
    """The typed spec fields and their values (what overrides a base spec, e.g. a preset's). A --model
    that names a file becomes the file's identity, path and hash (dashbench/workloads/model_file.py)."""
    values = {name: getattr(args, name) for name in given_fields(args)}
    if model_file.looks_like_file(values.get("model")):
        values.update(model_file.reference(values["model"]))
    return values


def spec_from_args(args: argparse.Namespace, **overrides) -> RunSpec:
    values = spec_values(args)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return RunSpec.from_dict(values)


def _int(field_name: str):
    def parse(text: str) -> int:
        try:
            return ascii_int(text)  # int() reads ８ as 8
        except ValueError:
            shown = text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"
            raise argparse.ArgumentTypeError(f"{field_name}: must be an integer, got {shown!r}") from None

    parse.__name__ = field_name
    return parse


def _float(field_name: str):
    """A finite number (a fraction such as 0.9 is checked in range by RunSpec)."""

    def parse(text: str) -> float:
        try:
            value = ascii_float(text)
        except ValueError:
            value = None
        if value is None or value != value or value in (float("inf"), float("-inf")):
            shown = text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"
            raise argparse.ArgumentTypeError(f"{field_name}: must be a number, got {shown!r}") from None
        return value

    parse.__name__ = field_name
    return parse
