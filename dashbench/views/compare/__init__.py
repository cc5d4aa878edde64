"""The Compare page: its widgets (page), and its run picker, choice, numbers, sections, to-target and parity."""
