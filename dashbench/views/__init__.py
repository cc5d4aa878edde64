"""Everything the dashboard pages compute, testable without Streamlit and without TensorFlow.

Pages are thin: they draw widgets and call these modules, one per thing they hold (compare,
results, run_form, live, devices, prices, filters, samples, format, context, columns).
"""
