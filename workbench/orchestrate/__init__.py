"""Carrying out a run: launch, the detached supervisor that reconciles wanted and running processes, clusters."""
