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
