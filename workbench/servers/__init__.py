"""The measuring side: slices (MPS on a GPU, cores on a CPU), RPC servers under them, telemetry."""
