"""The maintained benchmark tools: run each from the repository root as `python -m bench.NAME`."""
