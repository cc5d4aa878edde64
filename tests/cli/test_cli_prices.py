import hashlib
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from dashbench.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _shipped_digest() -> str:
    return hashlib.sha256(resources.files("dashbench").joinpath("data/prices.csv").read_bytes()).hexdigest()


def _prices_json(capsys, db) -> dict:
    assert main(["prices", "--json", "--db", str(db)]) == 0
    return {row["key"]: row for row in json.loads(capsys.readouterr().out)}


def test_set_list_reset_through_the_cli(tmp_path, capsys):
    db = tmp_path / "results.sqlite"
    before = _shipped_digest()
    shipped = _prices_json(capsys, db)  # no database yet: the shipped rows only, and none is created
    assert not db.exists()
    assert shipped["gcp-tpu-v2-8"]["chips_per_unit"] == 4 and shipped["gcp-tpu-v2-8"]["origin"] == "shipped"

    assert (
        main(
            [
                "prices",
                "set",
                "--device",
                "TPU v2",
                "--unit",
                "board-hour",
                "--provider",
                "GCP",
                "--on-demand",
                "3.00",
                "--db",
                str(db),
            ]
        )
        == 0
    )
    assert "overrides the shipped price" in capsys.readouterr().out
    assert main(["prices", "--db", str(db), "set", "--device", "cpu", "--unit", "hour", "--on-demand", "0.1"]) == 0
    assert "new price" in capsys.readouterr().out

    merged = _prices_json(capsys, db)
    board = merged["gcp-tpu-v2-8"]
    assert (board["origin"], board["on_demand_usd_per_hour"], board["chips_per_unit"]) == ("override", 3.0, 4)
    assert board["spot_usd_per_hour"] is None
    cpu = merged["this-machine-cpu-hour"]
    assert (cpu["device"], cpu["provider"], cpu["origin"]) == ("CPU", "this machine", "override")
    assert len(merged) == len(shipped) + 1

    assert main(["prices", "--db", str(db)]) == 0
    table = capsys.readouterr().out
    assert "this-machine-cpu-hour" in table and "override" in table and "shipped" in table

    assert main(["prices", "reset", "--key", "this-machine-cpu-hour", "--db", str(db)]) == 0
    assert "removed your price this-machine-cpu-hour" in capsys.readouterr().out
    assert "this-machine-cpu-hour" not in _prices_json(capsys, db)
    assert main(["prices", "reset", "--db", str(db)]) == 0
    assert "removed 1 override" in capsys.readouterr().out
    assert _prices_json(capsys, db) == shipped
    assert _shipped_digest() == before


@pytest.mark.parametrize(
    "argv, field",
    [
        (["prices", "set", "--device", "V100", "--unit", "day", "--on-demand", "1"], "unit"),
        (["prices", "set", "--device", "V100", "--unit", "hour", "--on-demand", "x"], "on_demand_usd_per_hour"),
        (
            ["prices", "set", "--device", "V100", "--unit", "hour", "--on-demand", "1", "--chips", "two"],
            "chips_per_unit",
        ),
        (["prices", "reset", "--key", "nope"], "key"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(tmp_path, capsys, argv, field):
    assert main(argv + ["--db", str(tmp_path / "results.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}: ") and err.count("\n") == 1


def test_preset_list(capsys):
    assert main(["preset", "--list", "--json"]) == 0
    listed = {p["slug"]: p for p in json.loads(capsys.readouterr().out)}
    assert listed["riseml-resnet50"]["per_device"]["tpu"]["batch_size"] == 1024
    assert main(["preset", "--list"]) == 0
    assert "riseml-bilstm" in capsys.readouterr().out
    assert main(["preset", "riseml-resnet50"]) == 2
    assert capsys.readouterr().err.startswith("error: device: ")


def test_prices_through_python_dash_m(tmp_path):
    env = {**os.environ, "DASHBENCH_DB": str(tmp_path / "results.sqlite")}
    out = subprocess.run(
        [sys.executable, "-m", "dashbench", "prices", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert {row["key"] for row in json.loads(out)} >= {"gcp-tpu-v2-8", "gcp-v100", "aws-p3.8xlarge"}


def test_preset_summary_prices_the_result_and_shows_the_published_rows():
    from dashbench.cli.preset_cmd import summary
    from dashbench.results.result import RunResult
    from dashbench.workloads import presets

    result = RunResult(
        unit="images",
        examples_per_sec=2000.0,
        accelerator="TPU v2",
        accelerator_count=4,
        step_time_median_s=0.064,
        samples=7,
    )
    text = summary(presets.get("colab-conv2d"), "tpu", result)
    # One TPU v2-8 board at $4.50/h over 7.2 M images/h.
    assert f"${4.50 / 7.2:,.4g} per million images on-demand, ${1.35 / 7.2:,.4g} spot (gcp-tpu-v2-8)" in text
    assert "1.22 ms / iteration = 104,918.0 images/s [above_peak]" in text
    assert "2.47 s / iteration (ran on the CPU)" in text
    unpriced = summary(presets.get("riseml-bilstm"), "gpu", result.replace(accelerator="Gaudi2"))
    assert "no price for Gaudi2" in unpriced and "1,658 examples/s" in unpriced
