"""Stands in for torch in the run's own processes (`workbench.procs.child_env` puts this folder first on their
PYTHONPATH): TVM's FFI imports torch whenever it is installed, which would cost every tuning, measuring and timing
process seconds and hundreds of MB for a library it does not use. TVM takes this ImportError as "no torch"."""
raise ImportError("torch is kept out of the workbench's tuning processes (workbench.procs.WITHOUT_TORCH)")
