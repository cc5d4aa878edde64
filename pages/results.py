"""Results: stored runs a page at a time (filtered, searched and sorted in SQL), a run's detail from its
selected row, and bundle export / import / delete."""

from dashbench.views import results_page

results_page.show()  # its widgets live in a module, compiled once per process (see there)
