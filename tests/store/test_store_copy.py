"""`dashbench store copy`: a whole store (runs with samples, price overrides, calibrations, first CPU
probes) into another, idempotently, SQLite to SQLite and to and from a real PostgreSQL server."""

import json

import pytest
from fixtures.pg_server import skip_unless_the_store_takes_urls
from fixtures.stored_runs import SPEC, result_for, samples_for

from dashbench.cli import main
from dashbench.store import Store, StoreError, bundle

PRICE = {"key": "user:V100", "device": "V100", "unit": "gpu", "on_demand_usd_per_hour": 2.5, "provider": "GCP"}
CALIBRATION = {
    "host": "box-a",
    "device": "cpu",
    "backend": "tensorflow",
    "verdict": "ok",
    "peaks": {"float32": 1.25},
    "versions": {"tensorflow": "2.19.1"},
    "reasons": [],
    "created_at": 1.7e9,
}


def fill(store: Store) -> dict:
    """Two ended runs with samples, a failed one, a queued one, a price, a calibration, first probes (one
    of a host with no run or calibration in the store)."""
    ids = []
    for batch in (8, 16):
        spec = SPEC.replace(batch_size=batch)
        run_id = store.create_run(spec)
        store.add_samples(run_id, samples_for(batch // 4))
        store.finish_run(run_id, "done", result_for(spec, 10.0 * batch))
        ids.append(run_id)
    failed = store.create_run(SPEC.replace(label="oom"))
    store.finish_run(failed, "failed", error="ResourceExhaustedError: out of memory")
    queued = store.create_run(SPEC.replace(label="waiting"), status="queued")
    store.set_price_override(PRICE)
    store.add_calibration(CALIBRATION)
    store.keep_first_cpu_peaks("box-a", "jax", {"float32": 0.5, "bfloat16": 0.25}, run_id=ids[0])
    store.keep_first_cpu_peaks("laptop", "tensorflow", {"float32": 0.125})
    return {"ended": ids + [failed], "queued": queued}


def contents(store: Store) -> dict:
    """What a copy must carry, in a form two databases can be compared by."""
    return {
        "runs": [
            {k: v for k, v in run.items() if k not in ("phase", "cancel_requested", "log_path", "pid")}
            for run in sorted(
                store.export_rows(status=["done", "failed", "cancelled", "interrupted"]), key=lambda r: r["run_id"]
            )
        ],
        "prices": [{k: v for k, v in row.items() if k != "updated_at"} for row in store.price_overrides()],
        "calibrations": [{k: v for k, v in row.items() if k != "id"} for row in store.calibrations()],
        "probes": store.first_cpu_probes(),  # with created_at and run_id: copied as they are
    }


def copy(source, target, capsys) -> tuple[int, str, str]:
    code = main(["store", "copy", "--from", str(source), "--to", str(target)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_copy_carries_everything_ended_and_a_second_copy_adds_nothing(tmp_path, capsys):
    with Store(tmp_path / "a.sqlite") as source:
        made = fill(source)
        expected = contents(source)
    code, out, err = copy(tmp_path / "a.sqlite", tmp_path / "b.sqlite", capsys)
    assert (code, err) == (0, "")
    assert "runs: 3 added (6 samples), 0 already there" in out
    assert "price overrides: 1 added; calibrations: 1 added; first CPU probes: 3 added" in out
    assert "still queued or running, left out: 1" in out
    with Store(tmp_path / "b.sqlite") as target:
        assert contents(target) == expected
        assert sorted(target.run_ids()) == sorted(made["ended"])  # the queued run stays where it can run

    code, out, err = copy(tmp_path / "a.sqlite", tmp_path / "b.sqlite", capsys)
    assert (code, err) == (0, "")
    assert "runs: 0 added (0 samples), 3 already there and kept" in out
    assert "price overrides: 0 added; calibrations: 0 added; first CPU probes: 0 added" in out
    with Store(tmp_path / "b.sqlite") as target:
        assert contents(target) == expected and len(target.calibrations()) == 1


def test_the_reverse_copy_gives_the_same_store_back(tmp_path, capsys):
    with Store(tmp_path / "a.sqlite") as source:
        fill(source)
        expected = contents(source)
    assert copy(tmp_path / "a.sqlite", tmp_path / "b.sqlite", capsys)[0] == 0
    assert copy(tmp_path / "b.sqlite", tmp_path / "home.sqlite", capsys)[0] == 0
    with Store(tmp_path / "home.sqlite") as home:
        assert contents(home) == expected


def test_what_the_target_has_is_kept_and_named_when_it_differs(tmp_path, capsys):
    with Store(tmp_path / "a.sqlite") as source:
        ids = fill(source)["ended"]
        bundle.export_bundle(source, tmp_path / "bundle.json", run_ids=[ids[0]])
    data = json.loads((tmp_path / "bundle.json").read_text())
    data["runs"][0]["label"] = "relabelled there"
    (tmp_path / "bundle.json").write_text(json.dumps(data))
    with Store(tmp_path / "a.sqlite") as source:
        theirs = {(p["host"], p["backend"], p["dtype"]): p for p in source.first_cpu_probes()}
    with Store(tmp_path / "b.sqlite") as target:
        bundle.import_bundles(target, [tmp_path / "bundle.json"])
        target.set_price_override({**PRICE, "on_demand_usd_per_hour": 3.0})
        target.keep_first_cpu_peaks("box-a", "jax", {"float32": 0.75}, run_id="probed-there")
        ours = target.first_cpu_probes()[0]
    code, out, err = copy(tmp_path / "a.sqlite", tmp_path / "b.sqlite", capsys)
    assert (code, err) == (0, "")
    assert "runs: 2 added" in out and "1 already there and kept" in out
    assert f"run {ids[0]}: the target's copy differs in label; kept the target's" in out
    assert "kept the target's price override user:V100" in out
    assert "first CPU probes: 2 added" in out and "kept the target's first CPU probe box-a/jax/float32" in out
    with Store(tmp_path / "b.sqlite") as target:
        assert target.get_run(ids[0])["label"] == "relabelled there"
        assert target.price_overrides()[0]["on_demand_usd_per_hour"] == 3.0
        assert target.count_runs() == 3
        probes = {(p["host"], p["backend"], p["dtype"]): p for p in target.first_cpu_probes()}
        assert probes[("box-a", "jax", "float32")] == ours
        assert probes == {**theirs, ("box-a", "jax", "float32"): ours}


def test_a_damaged_first_probe_is_left_out_and_named_the_others_copied(tmp_path, capsys):
    import sqlite3

    with Store(tmp_path / "a.sqlite") as store:
        fill(store)
    with sqlite3.connect(tmp_path / "a.sqlite") as raw:  # a row no Store method would write
        raw.execute("INSERT INTO first_cpu_probes VALUES ('box-b', 'jax', 'float32', -1.0, 1.7e9, NULL)")
    raw.close()
    code, out, err = copy(tmp_path / "a.sqlite", tmp_path / "b.sqlite", capsys)
    assert (code, err) == (0, "") and "first CPU probes: 3 added" in out
    assert "left out, unreadable: first CPU probe box-b/jax/float32: tflops: " in out
    with Store(tmp_path / "b.sqlite") as target:
        assert {p["host"] for p in target.first_cpu_probes()} == {"box-a", "laptop"}


@pytest.mark.parametrize(
    "source, target, field, words",
    [
        ("{tmp}/missing.sqlite", "{tmp}/b.sqlite", "from", "no database at"),
        ("{tmp}/a.sqlite", "{tmp}/a.sqlite", "to", "is the store given as --from"),
        ("{tmp}/a.sqlite", "{tmp}/./a.sqlite", "to", "is the store given as --from"),
        ("", "{tmp}/b.sqlite", "from", "give a SQLite file path or a postgresql+psycopg:// URL"),
        ("{tmp}/a.sqlite", "{tmp}", "to", "is a folder"),
    ],
)
def test_bad_stores_are_one_line_naming_the_field_and_nothing_is_written(
    tmp_path, capsys, source, target, field, words
):
    with Store(tmp_path / "a.sqlite") as store:
        fill(store)
    before = (tmp_path / "a.sqlite").read_bytes()
    code, out, err = copy(source.format(tmp=tmp_path), target.format(tmp=tmp_path), capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {field}: ") and words in err and err.count("\n") == 1, err
    assert (tmp_path / "a.sqlite").read_bytes() == before
    assert not (tmp_path / "missing.sqlite").exists() and not (tmp_path / "b.sqlite").exists()


@pytest.mark.parametrize(
    "url",
    [
        "mysql://writer:s3cret@db.example/dashbench",
        "postgresql+psycopg://writer:s3cret@127.0.0.1:9/dashbench",
        # unescaped / and @ in it: still all password, no piece of it shown
        "postgresql+psycopg://writer:s3c/re@t@127.0.0.1:9/dashbench",
    ],
)
def test_a_password_in_a_url_is_never_printed(tmp_path, capsys, url):
    with Store(tmp_path / "a.sqlite") as store:
        fill(store)
    for source, target in ((tmp_path / "a.sqlite", url), (url, tmp_path / "b.sqlite")):
        code, out, err = copy(source, target, capsys)
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
        assert not any(piece in out + err for piece in ("s3cret", "s3c", "re@t", "c/re")), err
        assert "writer:***@" in err or "mysql://…" in err or "is not accepted" in err, err


# -- PostgreSQL: once the Store opens a URL ----------------------------------------------------------


def test_sqlite_into_postgresql_and_back_home(tmp_path, capsys, pg_url):
    skip_unless_the_store_takes_urls(pg_url)
    with Store(tmp_path / "a.sqlite") as source:
        fill(source)
        expected = contents(source)
    # A password in the URL (the test server trusts local connections) is shown as ***.
    team = pg_url.replace("postgres@", "postgres:s3cret@", 1)
    code, out, err = copy(tmp_path / "a.sqlite", team, capsys)
    assert (code, err) == (0, "") and "runs: 3 added (6 samples)" in out, err
    assert "s3cret" not in out and "postgres:***@127.0.0.1" in out
    code, out, _ = copy(tmp_path / "a.sqlite", team, capsys)
    assert code == 0 and "runs: 0 added (0 samples), 3 already there and kept" in out
    assert "price overrides: 0 added; calibrations: 0 added; first CPU probes: 0 added" in out
    with Store(pg_url) as store:
        assert contents(store) == expected
    assert copy(pg_url, tmp_path / "home.sqlite", capsys)[0] == 0
    with Store(tmp_path / "home.sqlite") as home:
        assert contents(home) == expected


def test_runs_travel_in_batches_and_a_copy_cut_short_is_finished_by_the_next(tmp_path, capsys, monkeypatch):
    import sqlite3

    from dashbench.cli import store_cmd

    with Store(tmp_path / "a.sqlite") as source:
        ended = fill(source)["ended"]
        expected = contents(source)
    monkeypatch.setattr(store_cmd, "BATCH", 2)
    calls = []
    real = Store.import_rows

    def full_disk_on_the_second_batch(self, runs):
        calls.append(1)
        if len(calls) == 2:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, runs)

    monkeypatch.setattr(Store, "import_rows", full_disk_on_the_second_batch)
    code, out, err = copy(tmp_path / "a.sqlite", tmp_path / "b.sqlite", capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: to: the copy stopped: database or disk is full; what was copied is kept")
    with Store(tmp_path / "b.sqlite") as target:
        assert sorted(target.run_ids()) == sorted(ended[:2])  # the first batch, whole
    monkeypatch.setattr(Store, "import_rows", real)
    code, out, _ = copy(tmp_path / "a.sqlite", tmp_path / "b.sqlite", capsys)
    assert code == 0 and "runs: 1 added (0 samples), 2 already there and kept" in out
    with Store(tmp_path / "b.sqlite") as target:
        assert contents(target) == expected


def test_a_password_quoted_by_an_error_is_masked(tmp_path, capsys, monkeypatch):
    import dashbench.store

    url = "postgresql+psycopg://writer:s3cret@db-host/dashbench"

    def refuses(text, read_only=False):
        raise StoreError(f"db: cannot open {text}: password s3cret rejected")

    with Store(tmp_path / "a.sqlite") as store:
        fill(store)
    monkeypatch.setattr(dashbench.store, "Store", refuses)
    code, out, err = copy(tmp_path / "a.sqlite", url, capsys)
    assert code == 2 and "s3cret" not in out + err
    assert "from: cannot open " in err and "***" in err


def test_read_only_mode_copies_nothing(tmp_path, capsys, monkeypatch):
    with Store(tmp_path / "a.sqlite") as store:
        fill(store)
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "1")
    code, out, err = copy(tmp_path / "a.sqlite", tmp_path / "b.sqlite", capsys)
    assert code == 2 and out == "" and err.startswith("error: to: cannot copy into --to: read-only mode"), err
    assert not (tmp_path / "b.sqlite").exists()


# -- a store at an older schema ----------------------------------------------------------------------


def old_store(path) -> dict:
    """A v7 SQLite file as dashbench before alembic left it (WAL, as a store is), with two runs: what
    `contents` of the store it upgrades to holds."""
    import contextlib
    import sqlite3

    from fixtures.old_stores import old_file

    runs = [
        (
            f"old-{batch}",
            SPEC.replace(batch_size=batch).to_dict(),
            result_for(SPEC.replace(batch_size=batch), 10.0 * batch),
        )
        for batch in (8, 16)
    ]
    old_file(path, 7, runs)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    upgraded = path.parent.parent / "upgraded-by-hand.sqlite"
    old_file(upgraded, 7, runs)
    with Store(upgraded) as store:
        return contents(store)


def test_a_store_at_an_older_schema_is_copied_and_left_as_it_was(tmp_path, capsys, pg_url):
    skip_unless_the_store_takes_urls(pg_url)
    (tmp_path / "home").mkdir()
    old = tmp_path / "home" / "old.sqlite"
    expected = old_store(old)
    before = old.read_bytes()
    for target in (tmp_path / "b.sqlite", pg_url):
        code, out, err = copy(old, target, capsys)
        assert (code, err) == (0, ""), err
        assert "runs: 2 added (6 samples), 0 already there" in out
        with Store(target) as store:
            assert contents(store) == expected and len(store.samples("old-8")) == 3
        assert old.read_bytes() == before  # not upgraded, not even touched
        assert sorted(p.name for p in old.parent.iterdir()) == ["old.sqlite"]  # nor anything left beside it
    code, out, _ = copy(old, pg_url, capsys)
    assert code == 0 and "runs: 0 added (0 samples), 2 already there and kept" in out


def test_a_postgres_store_at_an_older_schema_names_the_command_that_upgrades_it(tmp_path, capsys, pg_url):
    from dashbench.store import migrate

    assert migrate.upgrade_postgres(pg_url, "db", to=10) == (0, 10)
    team = pg_url.replace("postgres@", "postgres:s3cret@", 1)
    code, out, err = copy(team, tmp_path / "b.sqlite", capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "has schema v10" in err and "s3cret" not in err
    shown = team.replace("s3cret", "***")
    assert f"python -m dashbench store upgrade --db '{shown}'" in err, err
    assert not (tmp_path / "b.sqlite").exists()
