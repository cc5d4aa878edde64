"""`predict`: a workload's training step on every device of the hardware catalog, by the roofline
fitted to published rows and to the store's measured runs. Stores nothing."""

from __future__ import annotations

import argparse
import shutil
import sys

from dashbench.cli import strict_json
from dashbench.cli.db_args import add_db_argument
from dashbench.cli.spec_args import _int
from dashbench.cli.terminal import shown, shown_lines
from dashbench.core.spec import SpecError
from dashbench.predict import published, table
from dashbench.predict.roofline import CHIP_PRECISIONS, RUN_PRECISIONS, PredictError
from dashbench.predict.words import format_table, target_lines

# The run precision a profile is counted at, for each precision a chip computes at.
PROFILE_PRECISION = {
    "fp32": "float32",
    "tf32": "float32",
    "bf16": "mixed_bfloat16",
    "fp16": "mixed_float16",
    "fp8": "mixed_bfloat16",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "predict",
        help="predict a workload's step on chips this machine lacks (stores nothing)",
        description="Predicted step time, throughput, MFU, bound and cost on the hardware catalog's devices: "
        "a roofline with efficiencies fitted to published rows and your measured runs, banded by its "
        "leave-one-out error. A prediction, never a measurement.",
    )
    p.add_argument("--model", required=True, help="a built-in workload, or path/file.py:build or path/model.keras")
    p.add_argument("--batch-size", required=True, type=_int("batch_size"), help="global batch size")
    p.add_argument(
        "--precision",
        default=None,
        help=f"one of: {', '.join((*CHIP_PRECISIONS, *RUN_PRECISIONS))} (default float32)",
    )
    p.add_argument("--chips", default=1, type=_int("chips"), help="chips of each device, data parallel (default 1)")
    p.add_argument(
        "--devices",
        nargs="+",
        default=None,
        help="catalog names or families (TPU v6e, H100, ...); commas separate them too (default: every device)",
    )
    for name, text in (
        ("image_size", "override the image side"),
        ("seq_len", "override the sequence length"),
        ("width", "override filters / hidden units"),
        ("layers", "override a decoder LM's layers (llama)"),
    ):
        p.add_argument("--" + name.replace("_", "-"), type=_int(name), default=None, help=text)
    p.add_argument("--json", action="store_true", help="print the predictions as one JSON object")
    p.add_argument("--wide", action="store_true", help="every column, not fitted to the terminal")
    add_db_argument(p, read_only_option=True)
    p.set_defaults(func=_predict)


def _predict(args) -> int:
    precision = _precision(args.precision)
    if args.chips < 1:
        raise SpecError("chips", f"must be an integer >= 1, got {args.chips}")
    chips_ = _devices(args.devices)
    try:
        table.check_devices(chips_ if args.devices else [], precision)
    except PredictError as exc:
        raise SpecError(exc.field, str(exc).split(": ", 1)[1]) from None
    profile = _profile(args, precision)
    store = _store(args)
    try:
        rows = table.rows(profile, chips_, args.chips, published.calibration(), store, precision)
    finally:
        if store is not None:
            store.close()
    if args.json:
        print(strict_json.dumps({"kind": "prediction", "profile": profile.to_dict(), "predictions": rows}))
        return 0
    width = None if args.wide or not sys.stdout.isatty() else shutil.get_terminal_size().columns
    print(shown_lines(format_table(rows, width)))
    for line in target_lines(rows):
        print(shown(line))
    return 0


def _precision(text) -> str:
    if text is None:
        return "fp32"
    wanted = RUN_PRECISIONS.get(text, text)
    if wanted not in CHIP_PRECISIONS:
        raise SpecError("precision", f"unknown {text!r}; one of: {', '.join((*CHIP_PRECISIONS, *RUN_PRECISIONS))}")
    return wanted


def _devices(names) -> list:
    from dashbench.hardware import catalog

    if not names:
        return list(catalog.chips())
    wanted = [part.strip() for name in names for part in name.split(",") if part.strip()]
    try:
        return catalog.select(wanted)
    except LookupError as exc:
        raise SpecError("devices", str(exc).split(": ", 1)[-1]) from None


def _profile(args, precision: str):
    """The step's profile, counted here (the CLI's own process may import the engine)."""
    from dashbench.cli.spec_args import spec_values
    from dashbench.core.spec import RunSpec
    from dashbench.engine.profile import step_profile

    values = spec_values(argparse.Namespace(**vars(args) | {"precision": PROFILE_PRECISION[precision]}))
    spec = RunSpec.from_dict(values | {"device": "cpu"})
    try:
        return step_profile(spec)
    except SpecError:
        raise
    except Exception as exc:  # a model file that fails to build: one line naming it
        raise SpecError(
            "model", f"could not profile {args.model}: {' '.join(str(exc).split()) or type(exc).__name__}"
        ) from None


def _store(args):
    from dashbench.store import Store, database_file_exists, default_db_path, location

    path = location(args.db) if args.db else default_db_path()
    if not database_file_exists(path):
        return None  # nothing measured; never create a database to say so
    return Store(path, read_only=True)
