"""The Compare page: its widgets (page), and its numbers, choice, sections, to-target and parity."""
