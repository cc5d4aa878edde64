"""What the pages share, without Streamlit: wording, columns, charts, samples, settings, the AppContext."""
