"""Compare: throughput, step time, cost and speed-up of chosen runs, next to published figures."""

from dashbench.views import compare_page

compare_page.show()  # its widgets live in a module, compiled once per process (see there)
