"""Export bundles: round trip, merging, duplicates, and refusal of damaged or foreign files."""

import json

import pandas as pd
import pytest
from fixtures.bundle_fill import fill
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC, result_for

from dashbench.results.result import RunResult
from dashbench.store import BundleError, Store, bundle, schema


def test_round_trip_into_an_empty_store(tmp_path, db_at):
    with Store(tmp_path / "a.sqlite") as source:
        ids = fill(source)
        assert bundle.export_bundle(source, tmp_path / "bundle.json") == 4
        expected_runs = source.runs()
        expected_samples = {run_id: source.samples(run_id) for run_id in ids}
        expected_rows = {run_id: source.get_run(run_id) for run_id in ids}

    data = json.loads((tmp_path / "bundle.json").read_text())
    assert data["format"] == "dashbench-bundle" and data["schema_version"] == schema.SCHEMA_VERSION
    assert data["environment"]["host"] and data["sample_columns"] == ["index", "steps", "duration_s", "loss", "warmup"]

    with Store(db_at) as target:
        counts = bundle.import_bundles(target, [tmp_path / "bundle.json"])
        assert counts == {
            "files": 1,
            "runs_added": 4,
            "runs_skipped": 0,
            "samples_added": 2 + 4 + 8 + 1,
            "runs_differing": [],
        }
        pd.testing.assert_frame_equal(target.runs(), expected_runs)
        for run_id in ids:
            pd.testing.assert_frame_equal(target.samples(run_id), expected_samples[run_id])
            assert target.get_run(run_id) == expected_rows[run_id]


def test_a_bundled_run_is_the_stored_run_and_its_samples(tmp_path, db_at):
    with Store(db_at) as source:
        ids = fill(source)
        bundle.export_bundle(source, tmp_path / "bundle.json")
        stored = {run_id: source.get_run(run_id) for run_id in ids}
        samples = {
            run_id: [[None if pd.isna(v) else v for v in row] for row in source.samples(run_id).values.tolist()]
            for run_id in ids
        }
    runs = json.loads((tmp_path / "bundle.json").read_text())["runs"]
    assert [run["run_id"] for run in runs] == ids  # oldest first
    for run in runs:
        live = {"phase", "cancel_requested", "log_path"}
        row = stored[run["run_id"]]
        result = RunResult.from_dict(run["result"]) if run["result"] is not None else None
        assert {**run, "result": result} == {
            **{k: v for k, v in row.items() if k not in live},
            "samples": samples[run["run_id"]],
        }


def test_same_run_imported_twice_is_kept_once(tmp_path, db_at):
    with Store(tmp_path / "a.sqlite") as source:
        fill(source)
        bundle.export_bundle(source, tmp_path / "all.json")
        bundle.export_bundle(source, tmp_path / "some.json", batch_size=[8, 16])
    with Store(db_at) as target:
        first = bundle.import_bundles(target, [tmp_path / "some.json", tmp_path / "all.json"])
        assert (first["runs_added"], first["runs_skipped"]) == (4, 2)
        again = bundle.import_bundles(target, [tmp_path / "all.json"])
        assert (again["runs_added"], again["runs_skipped"], again["samples_added"]) == (0, 4, 0)
        assert first["runs_differing"] == again["runs_differing"] == []  # the same runs: nothing to say
        assert target.count_runs() == 4
        assert target._read("SELECT count(*) FROM samples")[0][0] == 15


def test_unfinished_runs_arrive_as_interrupted(tmp_path, db_at):
    with Store(tmp_path / "a.sqlite") as source:
        source.create_run(SPEC, status="queued")
        bundle.export_bundle(source, tmp_path / "q.json")
    with Store(db_at) as target:
        bundle.import_bundles(target, [tmp_path / "q.json"])
        run = target.runs().iloc[0]
        # A queued row here would be started by this machine's job runner: it must not be.
        assert run["status"] == "interrupted" and "exported while queued" in run["error"]


def test_backend_travels_and_an_old_bundle_without_it_means_tensorflow(tmp_path, db_at):
    jax = SPEC.replace(backend="jax")
    with Store(tmp_path / "a.sqlite") as source:
        run_id = source.create_run(jax)
        source.finish_run(run_id, "done", result_for(jax, 10.0, backend="jax", backend_version="0.10.2"))
        bundle.export_bundle(source, tmp_path / "new.json")
    data = json.loads((tmp_path / "new.json").read_text())
    assert data["runs"][0]["spec"]["backend"] == "jax" and data["runs"][0]["result"]["backend"] == "jax"
    # A bundle written before backends: schema v3, no backend in spec or result.
    old = json.loads(json.dumps(data))
    old["schema_version"] = 3
    old["runs"][0]["run_id"] = "old-run"
    del old["runs"][0]["spec"]["backend"]
    for key in ("backend", "backend_version"):
        del old["runs"][0]["result"][key]
    old["runs"][0]["result"]["env"] = {"tensorflow": "2.17.0"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    with Store(db_at) as target:
        bundle.import_bundles(target, [tmp_path / "new.json", tmp_path / "old.json"])
        by_id = target.runs().set_index("run_id")
        assert by_id.loc[run_id, ["backend", "backend_version"]].tolist() == ["jax", "0.10.2"]
        assert by_id.loc["old-run", ["backend", "backend_version"]].tolist() == ["tensorflow", "2.17.0"]
        assert target.get_run("old-run")["spec"]["backend"] == "tensorflow"


def _bundle(tmp_path) -> dict:
    with Store(tmp_path / "src.sqlite") as source:
        fill(source)
        bundle.export_bundle(source, tmp_path / "good.json")
    return json.loads((tmp_path / "good.json").read_text())


def _damage(data: dict, how: str):
    if how == "truncated":
        return json.dumps(data)[:-200]
    if how == "foreign":
        return json.dumps({"name": "someone else's file", "runs": []})
    if how == "array":
        return json.dumps([1, 2, 3])
    if how == "newer schema":
        return json.dumps({**data, "schema_version": schema.SCHEMA_VERSION + 1})
    if how == "schema as text":
        return json.dumps({**data, "schema_version": "three"})
    if how == "no runs":
        return json.dumps({k: v for k, v in data.items() if k != "runs"})
    if how == "run without status":
        runs = [dict(r) for r in data["runs"]]
        del runs[2]["status"]
        return json.dumps({**data, "runs": runs})
    if how == "bad spec":
        runs = [dict(r) for r in data["runs"]]
        runs[1]["spec"] = {**runs[1]["spec"], "batch_size": 0}
        return json.dumps({**data, "runs": runs})
    if how == "bad sample":
        runs = [dict(r) for r in data["runs"]]
        runs[0]["samples"] = [[0, 1]]
        return json.dumps({**data, "runs": runs})
    if how == "bad time":
        runs = [dict(r) for r in data["runs"]]
        runs[3]["created_at"] = "yesterday"
        return json.dumps({**data, "runs": runs})
    raise AssertionError(how)


@pytest.mark.parametrize(
    "how, message",
    [
        ("truncated", r"not valid JSON \(truncated or damaged\?\): .* \(line 1, column"),
        ("foreign", "not a dashbench bundle"),
        ("array", "not a dashbench bundle"),
        ("newer schema", f"the bundle has schema v{schema.SCHEMA_VERSION + 1} but this dashbench reads up to"),
        ("schema as text", "schema_version: must be a whole number"),
        ("no runs", "runs: missing"),
        ("run without status", "run #3 .*missing field 'status'"),
        ("bad spec", "run #2 .*spec: batch_size: must be an integer >= 1"),
        ("bad sample", r"run #1 .*samples\[0\]: expected a list of 5 values"),
        ("bad time", "run #4 .*created_at: not an ISO 8601 time"),
    ],
)
def test_bad_bundles_are_refused_and_nothing_is_written(tmp_path, how, message, db_at):
    data = _bundle(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(_damage(data, how))
    with Store(db_at) as target:
        keep = target.create_run(SPEC)
        before = target.runs()
        # The good file is listed first: one transaction means none of it lands either.
        with pytest.raises(BundleError, match=message) as caught:
            bundle.import_bundles(target, [tmp_path / "good.json", bad])
        assert str(bad) in str(caught.value) and "nothing was imported" in str(caught.value)
        pd.testing.assert_frame_equal(target.runs(), before)
        assert target._read("SELECT count(*) FROM samples")[0][0] == 0
        assert list(target.runs()["run_id"]) == [keep]


def test_missing_and_binary_files_are_refused(tmp_path):
    binary = tmp_path / "image.png"
    binary.write_bytes(bytes(range(256)) * 4)
    with Store(tmp_path / "t.sqlite") as target:
        with pytest.raises(BundleError, match="cannot read the file"):
            bundle.import_bundles(target, [tmp_path / "nope.json"])
        with pytest.raises(BundleError, match="not a text file|not valid JSON"):
            bundle.import_bundles(target, [binary])
        assert target.count_runs() == 0
