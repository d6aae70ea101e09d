"""On an NVIDIA GPU (the device machine): the engine end to end with MPS slices. Skipped elsewhere."""
import pytest

import workbench as wb

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_cuda_tune_two_shards_two_servers_at_half(tmp_path):
    spec = wb.TuneSpec(model="mlp", target="cuda", shards=2, servers=2, slices=(50,), trials=16,
                       trials_per_batch=8, sweep_slices=(25, 100))
    run = wb.tune(spec, home=str(tmp_path))
    assert run.wait(timeout=900) == "done", run.message
    servers = run.event_list("server_ready")
    total = run.event_list("sweep_point")
    full = next(p for p in total if p["inferred_at"] == 100)["sm_count"]
    mps = run.event_list("mps")
    assert mps and all(m["started"] for m in mps), mps  # its reason says why MPS did not start
    assert all(s["slice_applied"] and s["slicing"] == "mps" for s in servers), servers
    assert all(0 < s["sm_count"] < full for s in servers)  # each server got a part of the SMs
    assert bool(run.results.match.iloc[0])
    quarter = next(p for p in total if p["inferred_at"] == 25)
    assert quarter["latency_ms_median"] > next(p for p in total if p["inferred_at"] == 100)["latency_ms_median"]
