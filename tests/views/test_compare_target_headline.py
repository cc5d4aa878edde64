"""Compare's "Time and cost to target" table as first shown: the run, epochs, time and cost to target,
narrow enough for a 1400 px window (tests/views/test_to_target.py checks it on a stored section)."""

import pandas as pd

from dashbench.views.compare import accuracy as accuracy_view


def test_an_empty_column_is_dropped_and_the_run_always_kept():
    table = accuracy_view.target_table([])
    table = pd.DataFrame(
        {c: [None, None] for c in table.columns}
        | {"run": ["#a", "#b"], "device": ["CPU · jax", "CPU · tensorflow"], "time to target (s, median)": [1.0, 2.0]}
    )
    shown = accuracy_view.target_headline(table)
    assert list(shown.table.columns) == ["device", "run", "time to target (s, median)"]
    assert shown.caption == ""  # nothing shared: the empty columns are not a shared value
    one = accuracy_view.target_headline(table.iloc[:1].assign(device=[None]))
    assert list(one.table.columns) == ["run", "time to target (s, median)"]


def test_a_value_every_row_shares_is_said_once_and_a_headline_column_stays_a_column():
    table = pd.DataFrame(
        {
            "device": ["CPU · jax", "CPU · jax"],
            "run": ["#a", "#a"],
            "target": [0.9, 0.9],
            "how": ["measured", "predicted"],
            "time to target (s, median)": [3.0, 3.0],
        }
    )
    shown = accuracy_view.target_headline(table)
    assert list(shown.table.columns) == ["device", "run", "time to target (s, median)"]
    assert shown.caption == "The same on every row: target **0\\.9**."  # markdown-escaped
