"""The Results table names the price row behind each run's cost, beside the cost: a CPU run's
cost comes from a per-vCPU row the user would otherwise never see."""

from fixtures.stored_runs import SPEC, result_for

from dashbench.costs import prices
from dashbench.store import Store
from dashbench.views.results import runs as results


def test_each_priced_run_names_its_price_row_beside_its_cost(tmp_path):
    with Store(tmp_path / "p.sqlite") as store:
        run_id = store.create_run(SPEC)
        store.finish_run(run_id, "done", result=result_for(SPEC, 500.0, env={"cpu_count": 16}))
        runs, catalog = store.runs(), prices.catalog(store)
    table = results.results_table(runs, catalog)
    columns = list(table.columns)
    assert columns.index("usd_per_million_examples") < columns.index("price_key") <= columns.index("flags") + 1
    (row,) = table.to_dict("records")
    assert row["usd_per_million_examples"] > 0 and row["price_key"] in set(catalog["key"])
    assert sum(key is not None for key in table["price_key"]) == table["usd_per_million_examples"].notna().sum()
