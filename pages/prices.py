"""Prices: the catalog in use (shipped defaults and your overrides), and the published reference rows."""

from dashbench.views.streamlit import needs

needs.stop_if_missing()  # Streamlit may run this file before app.py (views/streamlit/pages_folder.py)
from dashbench.views.prices import page as prices_page  # noqa: E402

prices_page.show()  # its widgets live in a module, compiled once per process (see there)
