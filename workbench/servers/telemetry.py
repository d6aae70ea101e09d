"""A ~1 Hz sampler of CPU (psutil) and GPU (NVML) utilisation that writes `telemetry` events.

NVML errors become a `gpu_note` (gpustat style): the CPU trace goes on without the GPU one.
On Hopper and later, GPM's SM utilisation (share of SMs busy) is used when readable; otherwise
NVML's utilisation rate (share of time any kernel ran), and the event says which.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psutil

from workbench.runs.event_types import Telemetry


class GpuProbe:
    def __init__(self, indices: list[int] | None = None) -> None:
        """Samples the GPUs with these NVML indices (all when None)."""
        self.handles: list[Any] = []
        self.note = ""
        self.gpm: dict[int, Any] = {}
        try:
            import pynvml

            self.nvml = pynvml
            pynvml.nvmlInit()
            self.indices = [i for i in range(pynvml.nvmlDeviceGetCount()) if indices is None or i in indices]
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
            if not self.handles:
                self.note = "NVML found no GPU"
        except Exception as err:  # noqa: BLE001 - ImportError or NVMLError: report, do not fail
            self.nvml = None
            self.note = f"no GPU trace: NVML unavailable ({err})"
            return
        for i, h in enumerate(self.handles):
            try:
                if self.nvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice:
                    self.gpm[i] = self.nvml.nvmlGpmSampleGet(h, self.nvml.nvmlGpmSampleAlloc())
            except Exception:  # noqa: BLE001 - GPM not readable here: fall back to utilisation rates
                pass

    def sample(self) -> list[dict]:
        out = []
        nv = self.nvml
        for i, h in enumerate(self.handles):
            row: dict[str, Any] = {"index": self.indices[i]}
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                row["mem_used_mb"] = round(mem.used / 2**20)
                row["mem_total_mb"] = round(mem.total / 2**20)
                util = nv.nvmlDeviceGetUtilizationRates(h)
                row["busy_percent"] = util.gpu
                row["sm_util"], row["sm_util_source"] = float(util.gpu), "utilization_rate"
                if i in self.gpm:
                    sample = nv.nvmlGpmSampleGet(h, nv.nvmlGpmSampleAlloc())
                    row["sm_util"] = round(self._gpm_sm_util(self.gpm[i], sample), 1)
                    row["sm_util_source"] = "gpm"
                    self.gpm[i] = sample
            except Exception as err:  # noqa: BLE001 - a GPU that cannot be read gets an error row, not a crash
                row["error"] = str(err)
            out.append(row)
        return out

    def _gpm_sm_util(self, s1, s2) -> float:
        nv = self.nvml
        m = nv.c_nvmlGpmMetricsGet_t()
        m.version = nv.NVML_GPM_METRICS_GET_VERSION
        m.numMetrics = 1
        m.sample1, m.sample2 = s1, s2
        m.metrics[0].metricId = nv.NVML_GPM_METRIC_SM_UTIL
        nv.nvmlGpmMetricsGet(m)
        return float(m.metrics[0].value)

    def close(self) -> None:
        if self.nvml is not None and self.handles:
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - closing NVML must not fail the caller's clean-up
                pass


class Sampler:
    """Background thread; `stop()` joins it within one interval."""

    def __init__(self, emit: Callable[[Telemetry], object], interval: float = 1.0, gpu: bool = True,
                 gpu_indices: list[int] | None = None, cores: list[int] | None = None) -> None:
        """Samples the given cores' mean load (all when None) and, with `gpu`, those NVML GPUs."""
        self.emit = emit
        self.interval = interval
        self.gpu = gpu
        self.gpu_indices = gpu_indices
        self.cores = cores
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="workbench-telemetry", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def _loop(self) -> None:
        probe = GpuProbe(self.gpu_indices) if self.gpu else None
        psutil.cpu_percent(percpu=True)
        try:
            while not self._stop.wait(self.interval):
                per_cpu = psutil.cpu_percent(percpu=True)
                if self.cores:
                    per_cpu = [per_cpu[c] for c in self.cores if c < len(per_cpu)] or per_cpu
                event: dict[str, Any] = {
                    "cpu_percent": round(sum(per_cpu) / max(1, len(per_cpu)), 1),
                    "mem_percent": psutil.virtual_memory().percent,
                }
                if probe is not None:
                    event["gpus"] = probe.sample()
                    event["gpu_note"] = probe.note
                else:
                    event["gpus"], event["gpu_note"] = [], "CPU target: GPU not sampled"
                self.emit(Telemetry(**event))
        finally:
            if probe is not None:
                probe.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 2)
