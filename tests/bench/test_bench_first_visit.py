"""bench/first_visit.py: what it waits for is what the Run page shows, and its table reads as a ratio against
the first checkout (the run itself, fresh servers and Chromium, is a bench's minutes, not a test's)."""

import inspect

from fixtures import bench_scripts

from dashbench.views.run import page as run_page

first_visit = bench_scripts.load("first_visit")


def test_the_bench_waits_for_the_words_the_run_page_says_while_it_looks():
    assert first_visit.LOOKING in inspect.getsource(run_page)


def test_the_table_gives_each_way_in_against_the_first_checkout():
    rows = [
        first_visit.Times("before", "run", [20.0, 22.0, 30.0], [20.0, 22.0, 30.0]),
        first_visit.Times("before", "compare", [12.0], [12.0]),
        first_visit.Times("after", "run", [4.0, 5.5, 9.0], [20.0, 21.0, 25.0]),
        first_visit.Times("after", "compare", [0.6], [3.0]),
    ]
    text = first_visit.table(rows, (2.5, 3.0))
    assert "| after | straight to /run | 5.5 | 21.0 | 0.25× |" in text
    assert "| after | Compare first, then Run in the sidebar | 0.6 | 3.0 | 0.05× |" in text
    assert "| before | straight to /run | 22.0 | 22.0 | 1.00× |" in text
    assert "median of 3 tries" in text and "2.50 / 3.00" in text
