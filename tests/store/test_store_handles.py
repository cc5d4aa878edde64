"""The dashboard keeps one store handle per database across script runs and sessions (store_handles):
the same handle comes back, it sees other processes' commits, a replaced or missing file is opened again,
and a store that fails to open says why on every run."""

import shutil
import threading

import pytest
from fixtures import dashboard_data

from dashbench.store import Store
from dashbench.views.common import settings, store_handles


@pytest.fixture(autouse=True)
def no_kept_handles():
    store_handles.forget()
    yield
    store_handles.forget()


def loaded(db, read_only=True):
    return settings.load(["--db", str(db)] + (["--read-only"] if read_only else []), {})


def test_one_handle_is_shared_and_sees_new_runs(tmp_path):
    db = tmp_path / "runs.sqlite"
    dashboard_data.fill(db, n_runs=3)
    store, error = store_handles.shared_store(loaded(db))
    before = store.count_runs()
    assert error is None and before >= 3
    assert store_handles.shared_store(loaded(db))[0] is store
    assert store_handles.shared_store(loaded(db, read_only=False))[0] is not store  # a mode of its own
    added = dashboard_data.fill(db, n_runs=2, seed=1)  # another connection commits
    again = store_handles.shared_store(loaded(db))[0]
    assert again is store and again.count_runs() == before + len(added)


def test_sessions_on_several_threads_read_one_handle(tmp_path):
    db = tmp_path / "runs.sqlite"
    dashboard_data.fill(db, n_runs=4)
    with Store(db, read_only=True) as other:
        stored = other.count_runs()
    counts, failures = [], []

    def visitor():
        try:
            for _ in range(20):
                counts.append(store_handles.shared_store(loaded(db))[0].count_runs())
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            failures.append(exc)

    threads = [threading.Thread(target=visitor) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [] and counts == [stored] * 80


def test_a_replaced_or_missing_file_is_opened_again(tmp_path):
    db, other = tmp_path / "runs.sqlite", tmp_path / "other.sqlite"
    dashboard_data.fill(db, n_runs=2)
    dashboard_data.fill(other, n_runs=7)
    with Store(db, read_only=True) as a, Store(other, read_only=True) as b:
        counts = a.count_runs(), b.count_runs()
    assert counts[0] != counts[1]
    first = store_handles.shared_store(loaded(db))[0]
    assert first.count_runs() == counts[0]
    replaced = tmp_path / "copy.sqlite"
    shutil.copyfile(other, replaced)
    replaced.replace(db)  # a database copied in under the same name: a new inode
    second = store_handles.shared_store(loaded(db))[0]
    assert second is not first and second.count_runs() == counts[1]
    db.unlink()
    store, error = store_handles.shared_store(loaded(db))
    assert store is None and "No database at" in error
    store, error = store_handles.shared_store(loaded(db))  # not kept: still said on the next run
    assert store is None and "No database at" in error
    shutil.copyfile(other, db)
    assert store_handles.shared_store(loaded(db))[0].count_runs() == counts[1]


def test_a_store_that_fails_to_open_is_not_kept(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database")
    for _ in range(2):
        store, error = store_handles.shared_store(loaded(bad))
        assert store is None and "Cannot open the database" in error
    assert bad.read_text() == "not a database"


def test_a_server_store_is_shared_and_sees_new_runs(pg_url):
    Store(pg_url).close()  # the schema
    store, error = store_handles.shared_store(loaded(pg_url))
    assert error is None
    before = store.count_runs()
    added = dashboard_data.fill(pg_url, n_runs=2)
    again = store_handles.shared_store(loaded(pg_url))[0]
    assert again is store and again.count_runs() == before + len(added)
    store_handles.forget()  # its pooled connection back before the test's database is dropped
