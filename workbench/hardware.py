"""What this host has: CPU cores, NVIDIA GPUs (via NVML), and the TVM target for each choice.

NVML failures are data, not exceptions: `Hardware.gpu_note` says why there is no GPU view.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

from workbench.spec import SpecError


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    uuid: str
    sm_major: int
    sm_minor: int
    memory_mb: int


@dataclass(frozen=True)
class Hardware:
    ncores: int
    gpus: tuple[GpuInfo, ...] = ()
    gpu_note: str = ""

    @property
    def default_target(self) -> str:
        return "cuda" if self.gpus else "cpu"

    def describe(self, target: str) -> str:
        if target == "cuda" and self.gpus:
            g = self.gpus[0]
            return f"{g.name} (sm_{g.sm_major}{g.sm_minor}, {g.memory_mb} MiB) x{len(self.gpus)}"
        return f"CPU, {self.ncores} cores" + (f" (no GPU: {self.gpu_note})" if self.gpu_note else "")


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def detect() -> Hardware:
    """Cores from the affinity mask; GPUs from NVML (nvidia-ml-py), with the reason when absent."""
    ncores = len(usable_cores())
    try:
        import pynvml
    except ImportError:
        return Hardware(ncores, (), "nvidia-ml-py (pynvml) is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return Hardware(ncores, (), f"no NVIDIA driver on this host (NVML: {err})")  # the reason first, then NVML's
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            name = pynvml.nvmlDeviceGetName(h)
            uuid = pynvml.nvmlDeviceGetUUID(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20
            gpus.append(GpuInfo(i, _text(name), _text(uuid), int(major), int(minor), int(mem)))
    finally:
        pynvml.nvmlShutdown()
    if not gpus:
        return Hardware(ncores, (), "NVML found no GPU")
    shown = visible(tuple(gpus), os.environ.get("CUDA_VISIBLE_DEVICES"))
    note = "" if shown else f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r} hides every GPU"
    return Hardware(ncores, shown, note)


def visible(gpus: tuple[GpuInfo, ...], env: str | None) -> tuple[GpuInfo, ...]:
    """The GPUs CUDA would show under CUDA_VISIBLE_DEVICES (indices or UUID prefixes), in its order.

    NVML ignores that variable, so without this a run started with CUDA_VISIBLE_DEVICES=1 would put
    its servers on GPU 0. As in CUDA, an entry that matches nothing hides it and everything after it."""
    if env is None:
        return gpus
    shown: list[GpuInfo] = []
    for token in (t.strip() for t in env.split(",")):
        match = next((g for g in gpus if (token.isdigit() and g.index == int(token))
                      or (token.startswith("GPU-") and g.uuid.startswith(token))), None)
        if match is None or match in shown:
            break
        shown.append(match)
    return tuple(shown)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def resolve_target(requested: str, hw: Hardware) -> str:
    """'auto' -> 'cuda' when a GPU is present, else 'cpu'; 'cuda' without a GPU is an error."""
    if requested == "auto":
        return hw.default_target
    if requested == "cuda" and not hw.gpus:
        raise SpecError("target", f"cuda was asked for but this host has no usable GPU ({hw.gpu_note}); "
                                  "use --target cpu, or point --tracker at GPU servers elsewhere")
    return requested


def check_sweep_here(kind: str, hw: Hardware, tracker: str | None) -> None:
    """A sweep times the models on this host's device under its slices: a `--tracker` run for a GPU this host
    lacks (its stages timed on the tracker's servers) cannot be swept here."""
    if tracker and kind == "cuda" and not hw.gpus:
        raise SpecError("sweep_slices", f"a sweep times the models on this host's GPU, and this host has none "
                                        f"({hw.gpu_note}); the run's stages were timed on the servers behind "
                                        f"{tracker}: sweep it on a host with the GPU (workbench sweep RUN there)")


@dataclass(frozen=True)
class TargetSpec:
    """A JSON-friendly description of a TVM target; `build()` makes the Target in any process."""

    kind: str  # cpu | cuda
    arch: str = ""  # cuda: sm_XY; cpu: LLVM's name of the CPU compiled for ("": the family's generic CPU)
    num_cores: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "arch": self.arch, "num_cores": self.num_cores}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TargetSpec:
        return cls(data["kind"], data.get("arch", ""), int(data.get("num_cores", 1)))

    def build(self):
        import tvm

        if self.kind == "cpu":
            return tvm.target.Target({"kind": "llvm", "num-cores": self.num_cores,
                                      **({"mcpu": self.arch} if self.arch else {})})
        if self.arch in ("sm_90", "sm_90a"):
            # No H200 tag exists; the H100 tag has the same SM (notes: tvm-0.27.md section 7).
            return tvm.target.Target("nvidia/nvidia-h100", host={"kind": "llvm"})
        return tvm.target.Target({"kind": "cuda", "arch": self.arch or "sm_80", "max_threads_per_block": 1024,
                                  "max_shared_memory_per_block": 49152, "thread_warp_size": 32},
                                 host={"kind": "llvm"})

    @property
    def device_type(self) -> str:
        return "cuda" if self.kind == "cuda" else "cpu"


def target_spec(target: str, hw: Hardware, num_cores: int | None = None, arch: str | None = None) -> TargetSpec:
    if target == "cuda":
        if arch is None:
            if not hw.gpus:
                raise SpecError("target", "cuda needs a local GPU to read its architecture")
            g = hw.gpus[0]
            arch = f"sm_{g.sm_major}{g.sm_minor}"
        return TargetSpec("cuda", arch, num_cores or hw.ncores)
    return TargetSpec("cpu", host_cpu()[0] if arch is None else arch, num_cores or hw.ncores)


@functools.cache
def host_cpu() -> tuple[str, str]:
    """LLVM's name of this host's CPU, to compile for (its vector units: AVX2, AVX-512, NEON...), and "" with the
    reason where the run compiles for the generic CPU of its family instead: LLVM cannot name it, or the CPU model
    implies instructions the kernel does not let programs use (a virtual machine that hides AVX-512, say), which a
    library compiled for the model would run into."""
    from tvm.target import codegen

    try:
        cpu = str(codegen.llvm_get_system_cpu())
        valid = cpu not in ("", "generic") and codegen.llvm_is_valid_cpu(cpu, codegen.llvm_get_system_triple())
    except Exception as e:  # noqa: BLE001 - TVM built without LLVM's host queries: the generic CPU is safe
        return "", f"LLVM cannot name this CPU ({type(e).__name__}: {e})"
    if not valid:
        return "", f"LLVM does not know this CPU ({cpu or 'no name'})"
    hidden = cpu_lacks({"kind": "cpu", "arch": cpu})
    if hidden:
        return "", f"this CPU is a {cpu}, but the kernel does not offer {', '.join(hidden)}"
    return cpu, ""


def generic_cpu_note(why: str) -> str:
    return (f"compiling for any CPU of this family (on x86-64: SSE2, no AVX or FMA), not for this one: {why}; the "
            "tuned model will be slower than this CPU allows")


def cpu_lacks(target: dict) -> list[str]:
    """The instructions a library compiled for `target` (a TargetSpec's dict) may use that this host cannot run:
    those its CPU model has and this host's model lacks (LLVM's tables), and those the kernel does not offer
    (/proc/cpuinfo's flags: a virtual machine may hide AVX-512). [] for a GPU's target or the generic CPU's, or
    where TVM cannot tell. Needs TVM alone: the exported model's loader carries this function's source."""
    import re

    arch = target.get("arch", "") if target.get("kind") == "cpu" else ""
    if not arch:
        return []
    try:
        import tvm
        from tvm.target import codegen

        def isa(cpu):
            features = codegen.llvm_get_cpu_features(tvm.target.Target({"kind": "llvm", "mcpu": cpu}))
            return {str(f) for f in features if str(f).startswith(("sse", "ssse", "avx", "fma", "f16c", "bmi",
                                                                    "popcnt", "lzcnt", "movbe", "aes", "pclmul",
                                                                    "sha", "gfni", "vaes", "amx", "neon", "sve",
                                                                    "dotprod", "i8mm", "fullfp16"))}

        if not codegen.llvm_is_valid_cpu(arch, codegen.llvm_get_system_triple()):
            return [f"instructions of a CPU this TVM's LLVM does not know ({arch})"]
        wanted, here = isa(arch), isa(str(codegen.llvm_get_system_cpu()))
    except Exception:  # noqa: BLE001 - a TVM without LLVM's tables cannot tell
        return []
    lacks = wanted - here
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), None)
    except OSError:
        flags = None
    if flags is not None:  # the extensions the kernel lists by LLVM's names (but for "_"), where it lists them
        listed = {"avx", "avx2", "fma", "f16c", "avxvnni", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl",
                  "avx512vnni", "avx512bf16", "avx512fp16", "avx512ifma", "avx512vbmi", "avx512vbmi2",
                  "avx512bitalg", "avx512vpopcntdq", "amx-tile", "amx-int8", "amx-bf16"}
        offered = {re.sub(r"[_-]", "", f) for f in flags}
        lacks |= {f for f in wanted if f in listed and re.sub(r"[_-]", "", f) not in offered}
    return sorted(lacks)


def check_cpu(target: dict) -> None:
    """Refuse (RuntimeError, one line) a library compiled for `target` where this CPU lacks its instructions: running
    it would stop the process at the first such one. The exported model's loader carries this function's source."""
    lacks = cpu_lacks(target)
    if lacks:
        raise RuntimeError(f"this model was compiled for a {target.get('arch')} CPU and uses {', '.join(lacks)}, "
                           "which this CPU lacks: tune it again on this machine")
