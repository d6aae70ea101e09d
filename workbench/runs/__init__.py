"""A run on disk and as seen by people: its folder, its event log, `Run`, progress and tables."""
