"""Every `python -m dashbench …` command a reader may copy, from the README, docs/ and the dashboard's own
text, is one the command line accepts as written: no required option left out, no option it lacks."""

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from dashbench.cli import UsageError, build_parser

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"`(python -m dashbench [^`]+)`")
ELIDED = ("…", "...", "<", "[")  # a shape, not a command: `run ...`, `import <bundle>`


def written_commands() -> list[tuple[str, str]]:
    """(where, command) for each inline command of the README, docs/*.md and dashbench/views/**.py."""
    places = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "dashbench" / "views").rglob("*.py")),
    ]
    found = []
    for path in places:
        text = path.read_text(encoding="utf-8")
        for command in COMMAND.findall(text):
            if not any(mark in command for mark in ELIDED) and "{" not in command:
                found.append((str(path.relative_to(ROOT)), " ".join(command.split())))
    return found


def refusal(command: str) -> str | None:
    """The command line's complaint about the command, or None when it parses."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(shlex.split(command)[3:])
    except UsageError as exc:
        return str(exc)
    except SystemExit as exc:
        return (err.getvalue().strip().splitlines() or ["exit " + str(exc.code)])[-1] if exc.code else None
    return None


def test_commands_are_found_in_docs_and_pages():
    where = {place for place, _ in written_commands()}
    assert "docs/dashboard.md" in where and any(place.startswith("dashbench/views/") for place in where)


@pytest.mark.parametrize("where, command", written_commands())
def test_every_written_command_parses_as_written(where, command):
    assert refusal(command) is None, (where, command, refusal(command))


def test_the_check_refuses_an_export_without_its_out():
    assert "--out" in refusal("python -m dashbench export")
    assert refusal("python -m dashbench export --out bundle.json") is None


# A module named by its path inside the package (views/run/fleet.py), as docs/architecture.md names them.
MODULE_PATH = re.compile(
    r"(?<![\w/.])((?:"
    + "|".join(p.name for p in (ROOT / "dashbench").iterdir() if p.is_dir() and not p.name.startswith("_"))
    + r")/[\w/]+\.py)\b"
)


def test_every_module_the_architecture_page_names_exists():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(MODULE_PATH.findall(text))
    assert "jobs/runner.py" in named  # the pattern finds what the page names
    missing = [p for p in named if not (ROOT / "dashbench" / p).exists() and "/X/" not in p]  # X: any page's
    assert sorted(missing) == []
