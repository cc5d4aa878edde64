"""The Streamlit bootstrap and glue: the only views that import Streamlit, beside each page's page.py."""
