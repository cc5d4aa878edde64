"""bench/server_cost.py end to end on a tiny store (one page, one visitor, one 'at once' on the same server:
--same-server): docs left alone."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures import bench_scripts

ROOT = Path(__file__).resolve().parents[2]
server_cost = bench_scripts.load("server_cost")


@pytest.mark.skipif(
    not bench_scripts.load("dashboard_scale").browser_available(), reason="needs Chromium and playwright"
)
def test_server_cost_prints_cpu_per_visit_for_a_tiny_store(tmp_path):
    docs = (ROOT / "docs" / "PERFORMANCE.md").read_bytes()
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "server_cost.py"),
            "--runs",
            "200",
            "--samples",
            "3",
            "--visits",
            "1",
            "--together",
            "1",
            "--pages",
            "prices",
            "--idle-s",
            "0.1",
            "--quiet-s",
            "0.2",
            "--same-server",
            "--no-docs",
            "--keep",
            str(tmp_path),
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("| 200 | prices |")]
    cells = [cell.strip() for cell in row.split("|")[1:-1]]
    assert len(cells) == 10 and "n/a" not in cells  # every column filled
    assert "load average" in done.stdout and "a Streamlit page with a title only" in done.stdout
    saved = json.loads(out.read_text())
    (figures,) = saved["rows"]
    assert figures["page"] == "prices" and figures["cpu_per_visit_s"] > 0 and len(figures["together_s"]) == 1
    # the floor taken right before and right after the page's visitors, and the page's figure above it
    assert saved["floor_takes"] == [figures["floor_before_s"], figures["floor_after_s"]]
    floor = (figures["floor_before_s"] + figures["floor_after_s"]) / 2
    assert cells[4] == f"{figures['cpu_per_visit_s'] - floor:+.3f}"
    assert (ROOT / "docs" / "PERFORMANCE.md").read_bytes() == docs  # --no-docs


def test_the_baseline_is_shown_beside_the_figures():
    row = server_cost.PageCost(
        100_000,
        "compare",
        first_cpu_s=0.3,
        first_s=4.0,
        cpu_per_visit_s=0.05,
        visit_s=[2.0],
        together_cpu_per_visit_s=0.06,
        together_s=[5.0, 6.0],
        load=3.0,
    )
    before = dict(
        vars(
            server_cost.PageCost(
                100_000,
                "compare",
                first_cpu_s=0.4,
                first_s=5.0,
                cpu_per_visit_s=0.2,
                visit_s=[3.0],
                together_cpu_per_visit_s=0.3,
                together_s=[9.0],
                load=4.0,
            )
        )
    )
    row.floor_before_s, row.floor_after_s = 0.02, 0.03
    text = server_cost.table([row], {(100_000, "compare"): before}, type("Args", (), {"together": 8}))
    assert "0.200 / 0.050 ✗ (4.0×)" in text and "0.40 / 5.0 → 0.30 / 4.0" in text and "4.0 → 3.0" in text
    assert "0.020 / 0.030" in text and "+0.175 → +0.025" in text  # the floor beside, and each above it


def test_a_quiet_window_of_no_time_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        server_cost.parse_args(["--quiet-s", "0"])
    assert exit_.value.code == 2 and capsys.readouterr().err.strip().endswith("--quiet-s: more than 0 seconds")
