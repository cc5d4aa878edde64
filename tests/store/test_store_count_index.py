"""Compare's count of the runs matching its filters (`count(*) … WHERE model IN … AND status IN …`) is
answered from the (model, status) index of schema v10 on both databases, in a new store and in one
upgraded from v9."""

from fixtures.old_stores import V9, old_file
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC

from dashbench.store import Store, migrate, queries

FILTERS = {"model": ["fashion_mnist_cnn", "resnet50"], "status": ["done", "failed"]}


def _plan(store: Store) -> str:
    where, params, _limit = queries.where_clause(FILTERS, store.dialect)
    sql = f"SELECT count(*) FROM runs{where}"
    if not store.is_server:
        return " ".join(str(row[-1]) for row in store._read(f"EXPLAIN QUERY PLAN {sql}", params))
    with store._write("plan") as conn:
        # A store of a few runs is read whole cheaper than through any index: ask which index it takes.
        conn.execute("SET LOCAL enable_seqscan = off")
        return " ".join(row[0] for row in conn.execute(f"EXPLAIN {sql}", params).fetchall())


def test_the_count_of_a_filter_reads_the_model_status_index(db_at):
    with Store(db_at) as store:
        ids = [
            store.create_run(SPEC.replace(model=model), status="queued")
            for model in ("fashion_mnist_cnn", "resnet50", "bilstm")
        ]
        store.finish_run(ids[0], "failed", error="x")
        plan = _plan(store)
        assert "runs_model_status" in plan, plan
        assert store.count_runs(**FILTERS) == 1 and store.count_runs(model=FILTERS["model"]) == 2
    if not on_server(db_at):
        assert "COVERING INDEX runs_model_status" in plan  # the runs' rows are never read


def test_a_v9_store_gains_the_index_on_upgrade(tmp_path):
    path = tmp_path / "v9.sqlite"
    old_file(path, V9, [("old-run", SPEC.to_dict(), None)])
    assert migrate.upgrade_sqlite(path)[0] == V9
    with Store(path, read_only=True) as store:
        assert "runs_model_status" in _plan(store)
        assert store.count_runs(model="fashion_mnist_cnn", status="done") == 1
