"""`preset`: run one of the seed experiments on the device you pick (`preset --list` shows them)."""

from __future__ import annotations

import argparse
import math
import sys

from dashbench.cli import article, strict_json
from dashbench.cli.cluster_args import add_cluster_arguments
from dashbench.cli.db_args import db_path_arg
from dashbench.cli.run_cmd import add_device_wait_arguments
from dashbench.cli.spec_args import add_spec_arguments, spec_values
from dashbench.cli.terminal import fit, shown_lines, terminal_width
from dashbench.core.spec import SpecError
from dashbench.results.result import RunResult
from dashbench.workloads import preset_rows, presets


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "preset",
        help="run a seed experiment (Colab conv2d, RiseML ResNet-50, ...)",
        description=(
            "Run a preset with the article's model, batch size and steps on --device; --quick runs its model's "
            "quick try instead (as `models` prints it: tiny shapes, a small batch, a few steps; seconds on a CPU), "
            "e.g. preset riseml-resnet50 --device cpu --quick. colab-fashion-mnist trains the article's 5 epochs × "
            "100 steps on real Fashion-MNIST (--data-path FOLDER of its IDX files, else Keras's cache), evaluating "
            "the 10,000 test images after each epoch, and prints the validation accuracy per epoch and the 5 "
            "epochs' time beside the article's (TPU “40-odd” seconds, K80 “over 2 minutes”); --data synthetic "
            "measures the same steps' throughput only; --target-accuracy trains to a target instead. "
            "Exit codes as `run`: 0 done, 1 failed, 2 bad input, 3 out of memory, 4 target not reached."
        ),
    )
    parser.add_argument("name", nargs="?", help="preset slug or name (see --list)")
    parser.add_argument("--list", action="store_true", help="list the presets")
    parser.add_argument(
        "--quick", action="store_true", help="its model's quick try (shapes, batch size, steps), as `models` prints it"
    )
    # The spec options `run` takes; each one given overrides the preset's value.
    add_spec_arguments(
        parser,
        model=False,
        required=False,
        help={
            "device": f"device class: {', '.join(preset_rows.DEVICE_CLASSES)}",
            "label": "free text stored with the run (default: preset:<slug>, which links the run to its preset)",
        },
    )
    parser.add_argument("--json", action="store_true", help="print the result (or the list) as JSON")
    parser.add_argument("--no-store", action="store_true", help="do not record the run")
    parser.add_argument(
        "--db", type=db_path_arg, default=None, help="results database (default: $DASHBENCH_DB or ~/.local/share)"
    )
    add_device_wait_arguments(parser)
    add_cluster_arguments(parser)
    parser.set_defaults(func=_handle)


def spec_from_args(args: argparse.Namespace):
    if not args.name:
        raise SpecError("preset", f"name a preset or use --list; presets: {', '.join(presets.PRESETS)}")
    if args.device is None:
        raise SpecError(
            "device", f"is required: one of {', '.join(preset_rows.DEVICE_CLASSES)} (the batch size depends on it)"
        )
    overrides = {name: value for name, value in spec_values(args).items() if name != "device"}
    if args.quick:
        return presets.quick_spec(args.name, args.device, **overrides)
    return presets.spec_for(args.name, args.device, **overrides)


def _handle(args) -> int:
    if args.list:
        return _list(args.json)
    from dashbench.cli import run_cmd

    try:
        spec = spec_from_args(args)
        preset = presets.get(args.name)
    except SpecError as exc:
        return run_cmd.report_invalid(exc, args.json)
    if args.cluster is not None:  # on a Ray cluster's host: launched, followed and reported as `run --cluster`
        from dashbench.cli import cluster_run

        if args.no_store:
            return run_cmd.report_invalid(
                SpecError("no_store", "--no-store is for a run on this machine; leave it out with --cluster"), args.json
            )
        return cluster_run.run(spec, args, args.json, run_cmd.report_invalid, run_cmd.print_json)

    def on_event(event: dict) -> None:
        # A wait for the device shows even with --json (stderr), as `run` shows it.
        if event.get("event") == "phase" and (not args.json or event["phase"].startswith("waiting")):
            print(f"  {event['phase']} …", file=sys.stderr, flush=True)

    if not args.json:
        print(
            f"{preset.name} on {spec.device}: {spec.model}, batch {spec.batch_size}, {_length(spec)}",
            file=sys.stderr,
            flush=True,
        )
    progress = run_cmd.Progress(spec.steps, spec.warmup, spec.steps_per_loop, spec.backend, to_accuracy=True)

    def each(event: dict) -> None:
        on_event(event)
        if event.get("event") == "evaluation" and not args.json:
            progress(event)

    from dashbench.jobs import run_life

    # spec_for checked the spec: once per process.
    ask = run_life.Ask(
        options=lambda: spec,
        db=args.db,
        record=not args.no_store,
        device_wait=args.device_wait,
        checked=True,
        follow=lambda _spec: each,
    )
    code, result = run_cmd.execute(ask, args.json)
    if code:
        return code
    if args.json:
        run_cmd.print_json(result.to_dict())
        return run_cmd.end_code(result)
    print(fit(shown_lines(summary(preset, spec.device, result, db_path=args.db)), terminal_width()))
    changed = _changed_from_article(preset, spec)
    if changed:
        print(f"not the article's setup ({changed}): compare with the published rows with care")
    return run_cmd.end_code(result)


def _length(spec) -> str:
    if spec.epochs is not None:
        per = f" × {spec.steps_per_epoch} steps" if spec.steps_per_epoch else ""
        return f"{spec.epochs} epochs{per}, evaluated after each"
    if spec.target is not None:
        what = "loss" if spec.target_metric == "val_loss" else "accuracy"
        return f"to validation {what} {spec.target:g} in at most {spec.epoch_limit()} epochs"
    return f"{spec.steps} steps"


def summary(preset, device_class: str, result: RunResult, db_path=None) -> str:
    """The result, its cost where priced, and the published rows for this device class."""
    from dashbench.costs import prices, reference, run_cost
    from dashbench.results import accuracy_text

    unit = result.unit
    lines = [result.describe()]
    store = None
    if result.run_id:
        from dashbench.store import Store, StoreError

        try:
            store = Store(db_path, read_only=True)
        except StoreError:
            store = None  # the shipped prices still say something
    try:
        price = run_cost.match_price(
            result.accelerator, result.accelerator_count, prices.catalog(store), (result.env or {}).get("cpu_count")
        )
    finally:
        if store is not None:
            store.close()
    if price is None:
        lines.append(f"cost: no price for {result.accelerator} (set one: python -m dashbench prices set …)")
    else:
        per_m = run_cost.usd_per_million_examples(result.examples_per_sec, price["usd_per_hour"])
        spot = run_cost.usd_per_million_examples(result.examples_per_sec, price["usd_per_hour_spot"])
        text = f"cost: ${per_m:,.4g} per million {unit} on-demand" if per_m is not None else "cost: —"
        if spot is not None:
            text += f", ${spot:,.4g} spot"
        lines.append(f"{text} ({price['key']})")
    headline = accuracy_text.headline(result.accuracy, price["usd_per_hour"] if price else None)
    if headline:
        lines.append("to accuracy: " + "\n  ".join(headline))
        lines += article.article_lines(result.spec or {"label": presets.LABEL_PREFIX + preset.slug}, result)
        return "\n".join(lines)
    rows = reference.rows().set_index("key")
    for key in preset.reference_by_device.get(device_class, ()):
        row = rows.loc[key]
        eps = row["examples_per_sec"]
        figure = f" = {row['examples_per_sec_qualifier']}{eps:,.1f} {unit}/s" if _finite(eps) else ""
        flags = f" [{', '.join(row['flags'])}]" if row["flags"] else ""
        lines.append(f"published: {row['name']}: {row['figure_text']}{figure}{flags} ({row['source']})")
    return "\n".join(lines)


def _changed_from_article(preset, spec) -> str:
    original = presets.spec_for(preset.slug, spec.device, check=False)
    changed = [
        f"{name} {getattr(spec, name)}"
        for name in (
            "image_size",
            "seq_len",
            "width",
            "batch_size",
            "precision",
            "data",
            "epochs",
            "steps_per_epoch",
            "target_accuracy",
            "target_loss",
        )
        if getattr(spec, name) != getattr(original, name)
    ]
    return ", ".join(changed)


def _list(as_json: bool) -> int:
    if as_json:
        out = [
            {
                "slug": p.slug,
                "name": p.name,
                "model": p.model,
                "description": p.description,
                "source": p.source,
                "per_device": p.per_device,
                "references": list(p.references),
                "quick": presets.quick_recipe(p),
            }
            for p in presets.PRESETS.values()
        ]
        print(strict_json.dumps(out, indent=2))
        return 0
    for p in presets.PRESETS.values():
        batches = ", ".join(f"{d} {p.per_device[d]['batch_size']}" for d in preset_rows.DEVICE_CLASSES)
        steps = ", ".join(f"{d} {p.per_device[d]['steps']}" for d in preset_rows.DEVICE_CLASSES)
        print(f"{p.slug:<22} {p.name}")
        print(f"{'':<22} model {p.model}; batch {batches}; steps {steps}; {p.source}")
    return 0


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
