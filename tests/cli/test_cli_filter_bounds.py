"""The integer filters of `list` and `export` (--limit, --batch-size) take the bounds `run` takes:
a value out of range is one line naming the field and the range, exit 2, never a traceback or
a silent "everything"."""

import json

import pytest
from fixtures.stored_runs import SPEC, result_for

from dashbench.cli import main
from dashbench.core.spec import LIMITS
from dashbench.store import Store


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "bounds.sqlite"
    with Store(path) as store:
        for batch in (16, 32, 64):
            spec = SPEC.replace(batch_size=batch)
            store.finish_run(store.create_run(spec), "done", result_for(spec, 10.0 * batch))
    return path


BAD = [
    (["--limit", "9223372036854775808"], "limit"),
    (["--limit", "-1"], "limit"),
    (["--limit", "0"], "limit"),
    (["--limit", "ten"], "limit"),
    (["--limit", "9" * 5000], "limit"),
    (["--batch-size", "99999999999999999999999"], "batch_size"),
    (["--batch-size", f"16,{LIMITS['batch_size'] + 1}"], "batch_size"),
    (["--batch-size", "0"], "batch_size"),
    (["--batch-size", "-8"], "batch_size"),
    (["--batch-size", "8.5"], "batch_size"),
]


@pytest.mark.parametrize("command", ["list", "export"])
@pytest.mark.parametrize("argv, field", BAD, ids=lambda v: v if isinstance(v, str) else " ".join(v)[:30])
def test_an_integer_filter_out_of_range_is_one_line_naming_field_and_range(command, argv, field, db, tmp_path, capsys):
    out_file = tmp_path / "bundle.json"
    extra = ["--out", str(out_file)] if command == "export" else []
    code = main([command, "--db", str(db), *argv, *extra])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and not out_file.exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), err
    assert len(lines[0]) < 200  # a 5000-digit value is cut, not echoed whole
    high = LIMITS["batch_size"]
    assert f"from 1 to {high}" in lines[0]


def test_limits_in_range_still_filter(db, capsys):
    assert main(["list", "--db", str(db), "--json", "--limit", "2"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2
    assert main(["list", "--db", str(db), "--json", "--batch-size", f" 16, 64 ,{LIMITS['batch_size']}"]) == 0
    assert sorted(r["batch_size"] for r in json.loads(capsys.readouterr().out)) == [16, 64]
