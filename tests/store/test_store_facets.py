"""The pages' filter options (Store.facets) cost the same whatever the store holds: each column's distinct
values are found one index lookup per value, not by a walk of every run (the 1M-run check: the
walk was 0.1-0.4 s a column there). Counted in SQLite's virtual-machine steps, not timed."""

from fixtures import bench_scripts

from dashbench.store import Store, browse


def facets_and_steps(path) -> tuple[dict, int]:
    with Store(path, read_only=True) as store:
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0  # go on

        store._db.conn.set_progress_handler(count, 10)
        found = store.facets()
        store._db.conn.set_progress_handler(None, 0)
        plain = {
            c: [r[0] for r in store._read(f"SELECT DISTINCT {c} FROM runs WHERE {c} IS NOT NULL ORDER BY 1")]
            for c in browse.FACET_COLUMNS
        }
    assert found == plain  # the same answer as the walk
    return found, steps[0]


def test_filter_options_take_as_many_steps_at_3000_runs_as_at_300(tmp_path):
    fill = bench_scripts.load("store_queries").fill
    small, big = tmp_path / "small.sqlite", tmp_path / "big.sqlite"
    fill(small, 300, 1)
    fill(big, 3000, 1)
    small_facets, small_steps = facets_and_steps(small)
    big_facets, big_steps = facets_and_steps(big)
    assert small_facets == big_facets and len(big_facets["model"]) > 1
    # A walk of each column's index would take ten times the steps at ten times the runs.
    assert big_steps < 2 * small_steps, (small_steps, big_steps)
