"""Task-scheduler plug-ins: which task gets the next batch (`streaming.StreamingScheduler`)."""
