"""Results: stored runs a page at a time (filtered, searched and sorted in SQL), a run's detail from its
selected row, and bundle export / import / delete."""

from dashbench.views.streamlit import needs

needs.stop_if_missing()  # Streamlit may run this file before app.py (views/streamlit/pages_folder.py)
from dashbench.views.results import page as results_page  # noqa: E402

results_page.show()  # its widgets live in a module, compiled once per process (see there)
