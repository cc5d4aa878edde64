"""The Run page: its widgets (page), and its form, fleet places, checks and live panel."""
