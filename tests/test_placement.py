"""Server placement across GPUs, checked with the device count given explicitly (no GPU needed)."""
import os
import socket

import pytest

from workbench.hardware import GpuInfo, visible
from workbench.mps import MpsDaemon, is_short_folder, pipe_folder
from workbench.servers.placement import choose_gpus, place_servers, servers_per_gpu
from workbench.servers.slices import SliceHost, apply_slice, cpu_binding
from workbench.spec import Slice, SpecError, TuneSpec


def test_choose_gpus_defaults_to_all_and_checks_indices():
    assert choose_gpus(None, 4) == (0, 1, 2, 3)
    assert choose_gpus((1, 3), 4) == (1, 3)
    with pytest.raises(SpecError) as err:
        choose_gpus((0, 2), 2)
    assert err.value.field == "gpus" and "0 to 1" in str(err.value)
    with pytest.raises(SpecError):
        choose_gpus(None, 0)


@pytest.mark.parametrize("servers,gpus,expected", [
    (4, (0,), [0, 0, 0, 0]),
    (4, (0, 1), [0, 1, 0, 1]),
    (5, (0, 1), [0, 1, 0, 1, 0]),
    (8, (0, 1, 2, 3), [0, 1, 2, 3, 0, 1, 2, 3]),
    (2, (2, 3), [2, 3]),
])
def test_round_robin_placement(servers, gpus, expected):
    placement = place_servers(servers, gpus)
    assert placement == expected
    counts = servers_per_gpu(placement)
    assert max(counts.values()) - min(counts.values()) <= 1


def _daemon(root, started):
    d = MpsDaemon(str(root), f"GPU-{root.name}")
    d.started = started
    d.reason = "" if started else "nvidia-cuda-mps-control not found"
    return d


def test_each_server_joins_its_own_gpus_daemon(tmp_path):
    daemons = {g: _daemon(tmp_path / f"gpu{g}", True) for g in (0, 1)}
    uuids = {0: "GPU-aaaa", 1: "GPU-bbbb"}
    host = SliceHost("cuda", (), (0, 1), daemons, uuids)
    bindings = [apply_slice(host, 25, i, gpu) for i, gpu in enumerate(place_servers(4, (0, 1)))]
    pipes = [b.env["CUDA_MPS_PIPE_DIRECTORY"] for b in bindings]
    assert pipes == [daemons[0].pipe_dir, daemons[1].pipe_dir] * 2
    assert all(b.applied and b.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25" for b in bindings)
    # each client names device 0 of its daemon (which exposes only its GPU), never an inherited index
    assert all(b.env["CUDA_VISIBLE_DEVICES"] == "0" for b in bindings)


def test_without_mps_servers_are_pinned_and_say_they_are_not_sliced(tmp_path):
    daemons = {g: _daemon(tmp_path / f"gpu{g}", False) for g in (0, 1)}
    uuids = {0: "GPU-aaaa", 1: "GPU-bbbb"}
    bindings = [apply_slice(SliceHost("cuda", (), (0, 1), daemons, uuids), 50, i, gpu) for i, gpu in enumerate([0, 1])]
    assert [b.env["CUDA_VISIBLE_DEVICES"] for b in bindings] == ["GPU-aaaa", "GPU-bbbb"]
    assert not any(b.applied for b in bindings) and "not sliced" in bindings[0].reason
    whole = apply_slice(SliceHost("cuda", (), (0,), {}, {0: "GPU-aaaa"}), 100, 0, 0)
    assert whole.applied and whole.env == {}  # one GPU: nothing to pin


def test_cpu_slices_are_disjoint_core_blocks():
    cores = list(range(8))
    blocks = [cpu_binding(Slice(25), cores, i).cores for i in range(4)]
    assert blocks == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert cpu_binding(Slice(25), cores, 0).env["TVM_NUM_THREADS"] == "2"


def test_gpus_field_is_validated():
    assert TuneSpec(gpus="0,1").gpus == (0, 1)
    for bad in ("0,0", "a", (-1,)):
        with pytest.raises(SpecError) as err:
            TuneSpec(gpus=bad)
        assert err.value.field == "gpus"


GPUS4 = tuple(GpuInfo(i, "NVIDIA H200", f"GPU-{i}aaa-{i}", 9, 0, 143771) for i in range(4))


@pytest.mark.parametrize("env,expected", [
    (None, [0, 1, 2, 3]),
    ("1", [1]),
    ("2,0", [2, 0]),
    ("GPU-3aaa", [3]),
    ("1,7,2", [1]),  # as in CUDA: an unknown entry hides itself and everything after it
    ("", []),
    ("1,1", [1]),
])
def test_cuda_visible_devices_selects_and_orders_gpus(env, expected):
    assert [g.index for g in visible(GPUS4, env)] == expected


def _binds(path: str) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.bind(path)
            return True
        except OSError:
            return False


def test_mps_pipe_folder_fits_unix_sockets_under_a_deep_home(tmp_path):
    assert pipe_folder("/tmp/wbhome/runs/r/mps/gpu0") == "/tmp/wbhome/runs/r/mps/gpu0/pipe"  # fits: kept
    deep = tmp_path / ("d" * 60) / "runs" / "20261130-002909-mlp-d331" / "mps" / "gpu0"
    deep.mkdir(parents=True)
    assert not _binds(str(deep / "control"))  # what the daemon would have met there
    daemon = MpsDaemon(str(deep), "GPU-aaaa", pipe_dir=pipe_folder(str(deep)))
    assert is_short_folder(daemon.pipe_dir) and os.path.isdir(daemon.pipe_dir)
    assert _binds(os.path.join(daemon.pipe_dir, "control"))
    assert daemon.client_env(25)["CUDA_MPS_PIPE_DIRECTORY"] == daemon.pipe_dir
    assert daemon.log_dir == str(deep / "log")  # logs stay with the run
    daemon.stop()  # never started (as after a supervisor killed with its daemon): the folder still goes
    assert not os.path.exists(daemon.pipe_dir)
    kept = MpsDaemon(str(tmp_path / "mps"))
    os.makedirs(kept.pipe_dir)
    kept.remove_short_folder()  # a run's own pipe folder is never removed
    assert os.path.isdir(kept.pipe_dir)
