"""The wait for a run's first tuned batch, read from its events: how long after the first server, and by step."""
from __future__ import annotations


def first_tuned_batch_after_server(events: list[dict]) -> float | None:
    """Seconds from the first server ready to the first measured batch of a run's events (None if either is
    missing)."""
    ready = [e["t"] for e in events if e["kind"] == "server_ready"]
    batches = [e["t"] for e in events if e["kind"] == "batch"]
    return round(min(batches) - min(ready), 1) if batches and ready else None


def _defaults_steps(chunks: list[dict]) -> dict[str, float | None]:
    """The default schedules' schedule, build and measure seconds, summed over the chunks timed (None where none
    was timed or a chunk did not say: a warm run whose memory holds the defaults, an older log)."""
    said = bool(chunks) and all(c.get("steps_s") for c in chunks)
    return {f"defaults_{k}": round(sum(c["steps_s"].get(k, 0.0) for c in chunks), 2) if said else None
            for k in ("schedule", "build", "measure")}


def first_tuned_batch_steps(events: list[dict]) -> dict | None:
    """Where the wait for the first measured batch went, by the first batch's shard (seconds): its default schedules
    (`_defaults_steps`; the first chunk's measure includes waiting for the servers), `to_start` from its last
    default to its start (the plan by measured time, design spaces, cost model), then the batch's own search, build
    and measure (None where a step did not happen or was not reported)."""
    batches = [e for e in events if e["kind"] == "batch"]
    if not batches:
        return None
    first = min(batches, key=lambda e: e["t"])
    mine = [e for e in events if e.get("shard") == first["shard"] and e.get("tuned_at") == first.get("tuned_at")]
    chunks = [e for e in mine if e["kind"] == "defaults" and not e.get("remembered")]
    started = [e["t"] for e in mine if e["kind"] == "shard_started"]
    to_start = round(min(started) - max(c["t"] for c in chunks), 2) if chunks and started else None
    return {**_defaults_steps(chunks), "to_start": to_start,
            **{k: first.get(f"{k}_s") for k in ("search", "build", "measure")}}
