"""`workbench` on a shell: the same engine as the notebook, with progress lines and tables."""
