"""The dashboard's pages, one folder each (run, compare, results, prices), what they share (common), and
the Streamlit bootstrap and glue (streamlit).

Only each page's page.py and the streamlit folder import Streamlit; every other module here is plain
Python, tested without a Streamlit script run and without TensorFlow (tests/project/test_architecture.py).
"""
