"""bench/dashboard_scale.py end to end on a tiny store: AppTest only, no browser, docs left alone."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dashboard_scale_prints_a_table_for_a_tiny_store(tmp_path):
    docs = (ROOT / "docs" / "PERFORMANCE.md").read_bytes()
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "dashboard_scale.py"),
            "--runs",
            "200",
            "--samples",
            "3",
            "--tries",
            "1",
            "--reruns",
            "2",
            "--no-docs",
            "--no-browser",
            "--pages",
            "prices,compare",
            "--keep",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 200 |")]
    assert {tuple(c.strip() for c in row.split("|")[2:4]) for row in rows} == {
        ("normal", "prices"),
        ("normal", "compare"),
        ("read-only", "prices"),
        ("read-only", "compare"),
    }
    assert "| first load s |" in done.stdout and "load average" in done.stdout
    assert (ROOT / "docs" / "PERFORMANCE.md").read_bytes() == docs  # --no-docs
