"""The tuning client and its MetaSchedule plug-ins: one process tunes one shard and writes its events."""
