"""The README is the user's manual: a command or run option missing from it fails here."""

import re
from pathlib import Path

from dashbench.cli import build_parser

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices


def test_every_command_is_documented():
    missing = [name for name in _subcommands() if f"python -m dashbench {name}" not in README]
    assert not missing, f"commands missing from README.md: {missing}"


def test_every_run_option_is_documented():
    run = _subcommands()["run"]
    options = [opt for action in run._actions for opt in action.option_strings if opt.startswith("--")]
    missing = [opt for opt in options if opt != "--help" and not re.search(re.escape(opt) + r"\b", README)]
    assert not missing, f"run options missing from README.md: {missing}"


def test_readme_keeps_the_two_setup_commands():
    assert "bash scripts/serve.sh" in README and "bash scripts/test.sh" in README
    for script in ("scripts/serve.sh", "scripts/test.sh"):
        assert (Path(__file__).resolve().parents[1] / script).exists()


def _readme_commands() -> list[str]:
    """The README's shell examples, continuation lines joined and comments dropped."""
    commands, pending = [], ""
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            line = pending + line.split(" #")[0].strip()
            pending = line[:-1] + " " if line.endswith("\\") else ""
            if line and not pending:
                commands.append(" ".join(line.split()))
    return commands


def test_readme_quick_examples_are_the_catalogs_recipe():
    """One quick recipe: every README run with a shape override is its model's quick try as `models`
    prints it (dashbench.models.catalog), and every preset's --quick is its model's recipe."""
    from dashbench.models import catalog, presets

    recipe_options = ("--image-size", "--seq-len", "--width", "--layers", "--batch-size", "--steps")
    quick_runs = [c for c in _readme_commands() if c.startswith("python -m dashbench run ")
                  and any(f"{o} " in c for o in ("--image-size", "--seq-len", "--width"))]
    assert quick_runs, "the README shows no quick try"
    for command in quick_runs:
        words = command.split()
        options = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
        workload = catalog.get(options["--model"])
        recipe = {f"--{k.replace('_', '-')}": str(v) for k, v in workload.quick_recipe().items()}
        assert {k: v for k, v in options.items() if k in recipe_options} == recipe, command
    assert catalog.get("fashion_mnist_cnn").quick_command() in README
    for preset in presets.PRESETS.values():
        recipe = catalog.get(preset.model).quick_recipe()
        assert preset.quick == recipe
        spec = presets.quick_spec(preset.slug, "cpu", check=False)  # its shapes, not its data files
        assert {k: getattr(spec, k) for k in recipe} == recipe, preset.slug
