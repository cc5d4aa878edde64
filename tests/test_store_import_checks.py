"""An imported bundle can never make the store unreadable: every field of a run is checked, a bad
file is refused in one line naming the file, the run and the field, and nothing is written."""

import copy
import json
import math
import random
import subprocess
import sys

import pytest
from test_store import SPEC, result_for
from test_store_bundle import fill

from dashbench.result import RunResult, _json_fields, _RULES
from dashbench.store import BundleError, ReadOnlyError, Store, StoreError, bundle
from dashbench.views import compare, results


@pytest.fixture
def exported(tmp_path):
    """(a valid bundle as data, a store holding one other run)."""
    with Store(tmp_path / "source.sqlite") as source:
        fill(source)
        bundle.export_bundle(source, tmp_path / "good.json")
    target = tmp_path / "target.sqlite"
    with Store(target) as store:
        store.create_run(SPEC, status="queued")
    return json.loads((tmp_path / "good.json").read_text()), target


def write(tmp_path, data, name="bad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def plain(markdown: str) -> str:
    """md_text's escapes and word breaks taken out again."""
    return markdown.replace("\\", "").replace("\u200b", "")


def snapshot(db) -> tuple:
    with Store(db, read_only=True) as store:
        return store.count_runs(), store.export_rows()


def set_path(run, path, value):
    *parents, last = path
    for key in parents:
        run = run[key]
    run[last] = value


# (path inside the first run, bad value, the field the message must name)
CASES = [
    (("result", "examples_per_sec"), "fast", "result.examples_per_sec"),
    (("result", "examples_per_sec"), -1.0, "result.examples_per_sec"),
    (("pid",), "abc", "pid"),
    (("created_at",), "0001-01-01T00:00:00+00:00", "created_at"),
    (("created_at",), "2999-01-01T00:00:00+00:00", "created_at"),
    (("finished_at",), "2001-01-01T00:00:00+00:00", "finished_at"),
    (("result", "accelerator_count"), "1", "result.accelerator_count"),
    (("result", "samples"), "2", "result.samples"),
    (("result", "global_batch_size"), "8", "result.global_batch_size"),
    (("result", "flags"), ["fast_enough"], "result.flags"),
    (("result", "losses"), [1.0, "x"], "result.losses[1]"),
    (("result", "examples_per_sec_ci95"), [1.0], "result.examples_per_sec_ci95"),
    (("host",), ["a", "b"], "host"),
    (("host",), {"a": 1}, "host"),
    (("label",), ["x"], "label"),
    (("label",), {"x": 1}, "label"),
    (("result", "accelerator"), ["CPU"], "result.accelerator"),
    (("samples", 1, 0), 0, "samples[1].index"),
    (("samples", 0, 0), 2**63, "samples[0].index"),
    (("samples", 0, 0), math.inf, "samples[0].index"),
    (("samples", 0, 1), 0, "samples[0].steps"),
    (("samples", 0, 2), math.nan, "samples[0].duration_s"),
    (("samples", 0, 4), 1, "samples[0].warmup"),
    (("spec", "batch_size"), 2**70, "spec: batch_size"),
    (("spec", "label"), ["x"], "spec: label"),
    (("run_id",), "../../x\n", "run_id"),
    (("run_id",), ["x"], "run_id"),
    (("result", "backend"), "pytorch", "result.backend"),
    (("result", "backend"), 3, "result.backend"),
    (("result", "backend_version"), ["0.4"], "result.backend_version"),
    (("spec", "backend"), "pytorch", "spec: backend"),
]


@pytest.mark.parametrize("path, value, field", CASES, ids=[f"{'.'.join(map(str, c[0]))}={c[1]!r}" for c in CASES])
def test_a_bad_field_is_refused_in_one_line_and_nothing_is_written(tmp_path, exported, path, value, field):
    data, db = exported
    good = write(tmp_path, data, "good.json")
    bad = copy.deepcopy(data)
    run_id = bad["runs"][0]["run_id"]
    set_path(bad["runs"][0], path, value)
    before = snapshot(db)
    with Store(db) as store:
        with pytest.raises(BundleError) as caught:
            bundle.import_bundles(store, [good, write(tmp_path, bad)])
    message = str(caught.value)
    assert "\n" not in message
    assert str(tmp_path / "bad.json") in message and f"{field}:" in message
    if path != ("run_id",):
        assert run_id in message
    assert snapshot(db) == before  # the good file was not imported either


def test_the_cli_refuses_a_bad_bundle_with_one_error_line(tmp_path, exported):
    data, db = exported
    data["runs"][0]["result"]["examples_per_sec"] = "fast"
    path = write(tmp_path, data)
    before = snapshot(db)
    done = subprocess.run([sys.executable, "-m", "dashbench", "import", "--db", str(db), str(path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "result.examples_per_sec" in lines[0]
    assert "Traceback" not in done.stderr
    assert snapshot(db) == before


def test_a_valid_bundle_still_imports_whole(tmp_path, exported):
    data, db = exported
    with Store(db) as store:
        counts = bundle.import_bundles(store, [write(tmp_path, data, "good.json")])
        assert counts["runs_added"] == 4
        assert store.count_runs() == 5


def test_the_upload_shows_any_store_error_as_a_message(tmp_path, exported):
    data, db = exported
    with Store(db, read_only=True) as store:
        message, ok = results.import_uploads(store, [("good.json", json.dumps(data).encode())])
    assert not ok and plain(message).startswith("Import failed: cannot import runs: the store") and "is open read-only" in plain(message)


def test_the_upload_names_the_bad_field(tmp_path, exported):
    data, db = exported
    data["runs"][0]["host"] = ["a"]
    with Store(db) as store:
        message, ok = results.import_uploads(store, [("bad.json", json.dumps(data).encode())])
    assert not ok and "host: must be text or null, got ['a']" in plain(message)
    # The file is named as the user uploaded it, not by the scratch copy the import read.
    assert "bad.json" in plain(message) and "/tmp" not in plain(message) and "0-bad.json" not in plain(message)


def test_every_result_field_has_a_strict_rule_and_engine_results_pass():
    assert {f.name for f in _json_fields()} == set(_RULES)
    with open("tests/fixtures/result_v3.json") as fh:
        RunResult.check(json.load(fh))
    RunResult.check(result_for(SPEC, 100.0, flags=["above_peak"], losses=[2.0, None]))
    RunResult.check({"examples_per_sec_ci95": [1.0, None], "future_key": {"anything": [1]}})  # newer writers' keys
    with pytest.raises(ValueError, match="^mfu: must be a finite number >= 0 or null, got inf$"):
        RunResult.check({"mfu": math.inf})
    # from_dict stays tolerant: a row already stored still loads.
    assert RunResult.from_dict({"examples_per_sec": "fast"}).examples_per_sec == "fast"


# -- fuzz: a valid bundle, mutated at random ---------------------------------------------------------

_BAD_VALUES = ["x", "", [], [1], [[1, [2]]], {}, {"a": [1]}, True, None, 0, -1, 10**30, -(10**30), 1e308,
               math.nan, math.inf, -math.inf, 0.5, "2024-01-01T00:00:00", "NaN"]


def _paths(value, prefix=()):
    """Every key path inside a run (dict keys and list positions)."""
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, prefix + (key,))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, prefix + (i,))


def _mutate(data, rng: random.Random):
    run = rng.choice(data["runs"])
    path = rng.choice([p for p in _paths(run) if p])
    *parents, last = path
    holder = run
    for key in parents:
        holder = holder[key]
    if isinstance(holder, dict) and rng.random() < 0.15:
        del holder[last]
        return f"del {path}"
    value = rng.choice(_BAD_VALUES)
    holder[last] = copy.deepcopy(value)
    return f"{path} = {value!r}"


def test_fuzzed_bundles_are_refused_cleanly_or_leave_the_store_readable(tmp_path, exported, capsys):
    from dashbench.cli import main

    data, db = exported
    rng = random.Random(20261130)
    original = {run["run_id"] for run in snapshot(db)[1]}
    for attempt in range(50):
        mutated = copy.deepcopy(data)
        what = [_mutate(mutated, rng) for _ in range(rng.randint(1, 3))]
        path = write(tmp_path, mutated, f"fuzz{attempt}.json")
        before = snapshot(db)
        with Store(db) as store:
            try:
                bundle.import_bundles(store, [path])
            except StoreError as exc:
                assert "\n" not in str(exc) and str(path) in str(exc), what
                assert snapshot(db) == before, what
        capsys.readouterr()
        assert main(["list", "--json", "--db", str(db)]) == 0, what
        json.loads(capsys.readouterr().out)
        with Store(db, read_only=True) as store:
            runs = store.runs()
            results.results_table(runs)
            compare.compare_frame(runs)
            for run_id in runs["run_id"]:
                store.get_run(run_id)
                store.samples(run_id)
        # Start each attempt from the store as it was, so an accepted mutation does not hide the next.
        with Store(db) as store:
            store.delete_runs([r for r in store.runs()["run_id"] if r not in original])


def test_a_read_only_store_refuses_an_import_in_one_line(tmp_path, exported):
    data, db = exported
    with Store(db, read_only=True) as store:
        with pytest.raises(ReadOnlyError):
            bundle.import_bundles(store, [write(tmp_path, data)])
