"""The Run page: its widgets (page), and its form, devices, fleet places, checks and live panel."""
