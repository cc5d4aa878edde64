"""dashbench as an installed package: the `dashbench` command next to `python -m dashbench`, and a wheel
that carries the shipped data and only the package."""

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from dashbench.workloads import registry

ROOT = Path(__file__).resolve().parents[2]


def cli(argv, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_dashbench_command_answers_like_python_m_dashbench(tmp_path):
    command = Path(sys.executable).parent / "dashbench"
    assert command.exists(), f"no {command}: install dashbench into this environment (`pip install -e .`)"
    # From another folder, so the installed package answers rather than the current directory.
    by_command = cli([str(command), "models", "--json"], tmp_path)
    by_module = cli([sys.executable, "-m", "dashbench", "models", "--json"], tmp_path)
    assert by_command.returncode == 0 and by_module.returncode == 0, (
        by_command.stderr[-2000:] + by_module.stderr[-2000:]
    )
    models = json.loads(by_command.stdout)
    assert models == json.loads(by_module.stdout)
    assert [m["name"] for m in models] == list(registry.names())


def test_the_dashbench_command_exits_with_the_cli_exit_code(tmp_path):
    bad = cli([str(Path(sys.executable).parent / "dashbench"), "run", "--model", "no-such-model", "--json"], tmp_path)
    assert bad.returncode == 2, bad.stderr[-2000:]
    assert json.loads(bad.stdout)["status"] == "invalid"


def test_the_wheel_holds_the_package_its_data_and_the_command(tmp_path):
    source = tmp_path / "src"  # a copy: building in the checkout would leave build/ behind
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "dashbench", source / "dashbench", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("dashbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    data = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "dashbench" / "data").iterdir())
    assert data and set(data) <= set(names), set(data) - set(names)
    assert {"dashbench/__main__.py", "dashbench/engine/workloads/flops.py", "dashbench/views/streamlit/ui.py"} <= set(
        names
    )
    # The store's alembic environment: every revision, and the template `migrate revision` writes from.
    revisions = {
        f"dashbench/store/migrations/versions/{p.name}"
        for p in (ROOT / "dashbench" / "store" / "migrations" / "versions").glob("[0-9]*.py")
    }
    assert revisions and revisions | {
        "dashbench/store/migrations/env.py",
        "dashbench/store/migrations/script.py.mako",
    } <= set(names)
    assert {n.split("/")[0] for n in names if not n.startswith("dashbench-")} == {"dashbench"}  # no pages/, tests/
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "dashbench = dashbench.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
