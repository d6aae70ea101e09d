"""Measure-callback plug-ins: what happens after each measured batch (`progress.ProgressCallback` reports it)."""
