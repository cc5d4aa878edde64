"""Predict: a workload's step on chips this machine lacks, with its measured error and prices."""

from dashbench.views.streamlit import needs

needs.stop_if_missing()  # Streamlit may run this file before app.py (views/streamlit/pages_folder.py)
from dashbench.views.predict import page as predict_page  # noqa: E402

predict_page.show()  # its widgets live in a module, compiled once per process
