"""The CLI is the top of the run's path: it parses and prints, and nothing under it climbs back into it.
Nothing outside dashbench/cli/ (and dashbench/__main__, which runs it) imports dashbench.cli, at module
level or inside a function; and the modules a run's spec passes through on its way from the CLI to the
store load none of the CLI's."""

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = "dashbench.cli"
# Where a run's spec goes once the CLI has parsed it: its life, the runner, the queue, the launchers.
RUN_PATH = (
    "dashbench.jobs.run_life",
    "dashbench.jobs.runner",
    "dashbench.jobs.queue",
    "dashbench.jobs.launchers",
    "dashbench.jobs.model_check",
    "dashbench.fleet.launcher",
    "dashbench.fleet.submit",
    "dashbench.engine.loop",
)


def modules(root: Path) -> dict[str, Path]:
    """Every Python file of the app and the package, by module name (app.py is `app`)."""
    found = {}
    for path in [root / "app.py", *sorted((root / "pages").glob("*.py")), *sorted((root / "dashbench").rglob("*.py"))]:
        if path.exists():
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, relative ones resolved, lazy ones included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def climbs_into_cli(root: Path) -> list[str]:
    """`file:line: importer → imported` for every import of the CLI from outside it."""
    out = []
    for name, path in modules(root).items():
        if name == CLI or name.startswith(CLI + ".") or name == "dashbench.__main__":
            continue
        for line, target in imported(name, path):
            if target == CLI or target.startswith(CLI + "."):
                out.append(f"{path.relative_to(root)}:{line}: {name} → {target}")
    return out


def test_nothing_outside_the_cli_imports_it():
    found = climbs_into_cli(ROOT)
    assert not found, "imports of dashbench.cli from outside it:\n" + "\n".join(found)


def test_the_walk_finds_a_climb_into_the_cli_wherever_it_hides(tmp_path):
    for package in ("dashbench", "dashbench/cli", "dashbench/jobs", "pages"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "dashbench" / "__main__.py").write_text("from dashbench.cli import main\n")
    (tmp_path / "dashbench" / "cli" / "run_cmd.py").write_text("from dashbench.jobs import run_life\n")
    (tmp_path / "dashbench" / "jobs" / "run_life.py").write_text("def later():\n    from ..cli import run_cmd\n")
    (tmp_path / "dashbench" / "jobs" / "queue.py").write_text("import dashbench.cli.run_cmd as cmd\n")
    (tmp_path / "pages" / "run.py").write_text("from dashbench import cli\n")
    assert sorted(climbs_into_cli(tmp_path)) == [
        "dashbench/jobs/queue.py:1: dashbench.jobs.queue → dashbench.cli.run_cmd",
        "dashbench/jobs/run_life.py:2: dashbench.jobs.run_life → dashbench.cli.run_cmd",
        "pages/run.py:1: pages.run → dashbench.cli",
    ]


def test_a_runs_path_from_the_cli_loads_nothing_of_the_cli():
    """In a fresh interpreter: the modules a parsed spec passes through, imported, bring no CLI module."""
    script = (
        "import importlib, json, sys\n"
        f"for name in {list(RUN_PATH)!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m == {CLI!r} or m.startswith({CLI + '.'!r}))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
