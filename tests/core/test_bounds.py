"""Numbers too large for any device are one error line naming the field and the allowed range,
never an OverflowError from SQLite, NumPy or TensorFlow."""

import pytest

from dashbench.cli import main
from dashbench.core.spec import RunSpec, SpecError
from dashbench.store import Store

HUGE = "99999999999999999999999"


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, field, allowed",
    [
        (["run", "--model", "conv2d", "--batch-size", HUGE, "--device", "cpu"], "batch_size", "2147483647"),
        (
            ["run", "--model", "conv2d", "--batch-size", "8", "--image-size", "100000", "--device", "cpu"],
            "image_size",
            "8192",
        ),
        (["run", "--model", "bilstm", "--batch-size", "8", "--seq-len", HUGE, "--device", "cpu"], "seq_len", "1048576"),
        (["run", "--model", "conv2d", "--batch-size", "8", "--width", HUGE, "--device", "cpu"], "width", "65536"),
        (["run", "--model", "conv2d", "--batch-size", "8", "--steps", HUGE, "--device", "cpu"], "steps", "1000000000"),
        (["run", "--model", "conv2d", "--batch-size", "8", "--seed", HUGE, "--device", "cpu"], "seed", "4294967295"),
        (["sweep", "--model", "conv2d", "--device", "cpu", "--batch-sizes", f"1,{HUGE}"], "batch_sizes", "2147483647"),
        (
            ["prices", "set", "--device", "TPU v2", "--unit", "board-hour", "--chips", HUGE, "--on-demand", "4.5"],
            "chips_per_unit",
            "100000",
        ),
        (
            ["prices", "set", "--device", "CPU", "--unit", "hour", "--on-demand", "1e400"],
            "on_demand_usd_per_hour",
            "finite",
        ),
        (
            ["prices", "set", "--device", "CPU", "--unit", "hour", "--on-demand", "1", "--spot", "9" * 400],
            "spot_usd_per_hour",
            "finite",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_numbers_too_large_are_one_line_naming_the_field_and_the_range(argv, field, allowed, tmp_path, capsys):
    db = tmp_path / "n.sqlite"
    code, out, err = run_cli(capsys, *argv, "--db", db)
    assert code == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: ") and allowed in lines[0], err
    assert len(lines[0]) < 300  # a 400-digit number is cut, not printed whole
    if db.exists():
        with Store(db) as store:
            assert store.runs().empty and store.price_overrides() == []


def test_a_spec_refuses_fields_past_their_bounds_before_any_device_sees_them():
    with pytest.raises(SpecError, match=r"^batch_size: must be an integer from 1 to 2147483647"):
        RunSpec(model="conv2d", batch_size=2**31)
    with pytest.raises(SpecError, match=r"^image_size: must be an integer from 1 to 8192, got 100000$"):
        RunSpec(model="conv2d", batch_size=8, image_size=100000)
    assert RunSpec(model="conv2d", batch_size=2**31 - 1, image_size=8192, seed=2**32 - 1).seed == 2**32 - 1
