"""What a workload's training step would take on chips this machine lacks: a roofline over the
hardware catalog with efficiencies fitted to published rows and to the store's measured runs
(roofline: the arithmetic; calibration: the fit and its leave-one-out error; published: the
published rows as calibration points; table: one prediction per device with prices, measured
figures and time to a target). No framework imported: a step's cost profile comes in as data."""
