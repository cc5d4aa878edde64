"""Run: launch a run or a batch-size sweep through the job runner and watch it live."""

from dashbench.views.streamlit import needs

needs.stop_if_missing()  # Streamlit may run this file before app.py (views/streamlit/pages_folder.py)
from dashbench.views.run import page as run_page  # noqa: E402

run_page.show()  # its widgets live in a module, compiled once per process (see there)
