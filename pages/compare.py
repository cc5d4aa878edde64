"""Compare: throughput, step time, cost and speed-up of chosen runs, next to published figures."""

from dashbench.views.streamlit import needs

needs.stop_if_missing()  # Streamlit may run this file before app.py (views/streamlit/pages_folder.py)
from dashbench.views.compare import page as compare_page  # noqa: E402

compare_page.show()  # its widgets live in a module, compiled once per process (see there)
