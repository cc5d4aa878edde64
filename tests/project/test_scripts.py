"""The README's set-up scripts: install once, start again without reinstalling (pip and streamlit faked)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path):
    """A copy of the scripts and the files they read, with a .venv whose pip and streamlit only log."""
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    for name in ["pyproject.toml", *(p.name for p in ROOT.glob("requirements*.txt"))]:
        shutil.copy(ROOT / name, tmp_path / name)
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("python", "pip", "streamlit"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "$(dirname "$0")/../calls.log"\n')
        (bin_dir / tool).chmod(0o755)
    return tmp_path


def calls(checkout) -> list[str]:
    log = checkout / ".venv" / "calls.log"
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def run(checkout, script, *args):
    subprocess.run(["bash", str(checkout / "scripts" / script), *args], check=True, timeout=60)


def age_stamps(checkout, seconds=3600):
    """Stamps as if the last install was an hour ago (instead of sleeping until mtimes differ)."""
    for stamp in (checkout / ".venv").glob(".installed-*"):
        past = stamp.stat().st_mtime - seconds
        os.utime(stamp, (past, past))


def test_a_second_start_of_the_dashboard_does_not_reinstall(checkout):
    run(checkout, "serve.sh", "--server.port", "9999")
    assert calls(checkout) == [
        "pip install -q --upgrade pip",
        "pip install -q -r requirements.txt",
        "pip install -q -e .",
        "streamlit run app.py --server.port 9999",
    ]
    run(checkout, "serve.sh")
    assert calls(checkout) == ["streamlit run app.py"]


@pytest.mark.parametrize("changed", ["requirements-app.txt", "requirements.txt", "pyproject.toml"])
def test_a_changed_requirement_or_pyproject_installs_again(checkout, changed):
    run(checkout, "serve.sh")
    calls(checkout)
    age_stamps(checkout)
    (checkout / changed).write_text((checkout / changed).read_text() + "\n")
    run(checkout, "serve.sh")
    assert calls(checkout) == [
        "pip install -q --upgrade pip",
        "pip install -q -r requirements.txt",
        "pip install -q -e .",
        "streamlit run app.py",
    ]


def test_the_test_tools_are_installed_even_after_the_dashboard_was(checkout):
    run(checkout, "serve.sh")
    calls(checkout)
    run(checkout, "install.sh", "requirements-dev.txt")
    assert "pip install -q -r requirements-dev.txt" in calls(checkout)
    run(checkout, "install.sh", "requirements-dev.txt")
    assert calls(checkout) == []


def test_a_failed_install_is_tried_again(checkout):
    pip = checkout / ".venv" / "bin" / "pip"
    pip.write_text(pip.read_text() + 'case "$*" in *-e*) exit 1;; esac\n')
    with pytest.raises(subprocess.CalledProcessError):
        run(checkout, "serve.sh")
    assert "streamlit run app.py" not in calls(checkout)
    with pytest.raises(subprocess.CalledProcessError):
        run(checkout, "serve.sh")
    assert "pip install -q -r requirements.txt" in calls(checkout)
