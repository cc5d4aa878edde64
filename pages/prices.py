"""Prices: the catalog in use (shipped defaults and your overrides), and the published reference rows."""

from dashbench.views import prices_page

prices_page.show()  # its widgets live in a module, compiled once per process (see there)
