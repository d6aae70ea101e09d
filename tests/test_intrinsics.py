"""The tensor-intrinsic cache: what a client registers from it is what TVM's own import registers."""
import json
import shutil
import subprocess
import sys

from support import tvm_env

FIRST = """
import json, sys
import tvm, tvm_ffi
from tvm.s_tir import TensorIntrin
from workbench.tuning.intrinsics import load_family, _cache_path
import importlib.util
report = load_family("cuda", sys.argv[1], shipped=False)
origin = importlib.util.find_spec("tvm.s_tir.tensor_intrin.cuda").origin
saved = json.load(open(_cache_path(sys.argv[1], "cuda", origin)))
funcs = tvm.ir.load_json(saved["ir"])
same = [tvm_ffi.structural_equal(TensorIntrin.get(n).desc, funcs[2 * i])
        and tvm_ffi.structural_equal(TensorIntrin.get(n).impl, funcs[2 * i + 1]) for i, n in enumerate(saved["names"])]
print(json.dumps({"report": report, "names": len(saved["names"]), "equal": sum(same)}))
"""

SECOND = """
import json, sys
import tvm, tvm_ffi
from tvm.s_tir import TensorIntrin
from workbench.tuning.intrinsics import load_family
report = load_family("cuda", sys.argv[1])
import tvm.s_tir.tensor_intrin  # what every TuneContext runs: must now be a no-op
import tvm_ffi
print(json.dumps({"report": report, "wmma": TensorIntrin.get("wmma_sync_16x16x16_f16f16f16") is not None,
                  "index_map": tvm_ffi.get_global_func("tirx.index_map_m16n8k8.matrixC") is not None}))
"""

SHIPPED = """
import gzip, json, sys
from workbench.tuning.intrinsics import _cache_path, _shipped_path, _stub_package
import importlib.util
_stub_package()  # finding the module's file must not run the package's __init__ (it parses every family)
origin = importlib.util.find_spec("tvm.s_tir.tensor_intrin.cuda").origin
path = _cache_path(sys.argv[1], "cuda", origin)
parsed, shipped = json.load(open(path)), json.load(gzip.open(_shipped_path(path), "rt"))
print(json.dumps({"names": shipped["names"] == parsed["names"], "ir": shipped["ir"] == parsed["ir"]}))
"""

CPU = """
import json, sys
from workbench.tuning.intrinsics import load_family
print(json.dumps({"report": load_family("cpu", sys.argv[1])}))
"""


def _run(script: str, cache: str) -> dict:
    out = subprocess.run([sys.executable, "-c", script, cache], capture_output=True, text=True, timeout=300,
                         env=tvm_env())
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cached_cuda_intrinsics_equal_the_parsed_ones(tmp_path, cuda_intrinsics):
    first = _run(FIRST, str(tmp_path))
    assert first["report"]["source"] == "parsed" and first["report"]["count"] == first["names"] > 50
    assert first["equal"] == first["names"]  # every desc and impl survives the JSON round trip
    second = _run(SECOND, str(tmp_path))
    assert second["report"]["source"] == "cache" and second["report"]["count"] == first["names"]
    assert second["report"]["seconds"] < first["report"]["seconds"]
    assert second["wmma"] and second["index_map"]  # the module's own global functions are registered too
    # the package ships this TVM's CUDA cache (`intrinsics.ship`): it must hold what parsing gives, intrinsic for
    # intrinsic, else a fresh machine's clients would register other intrinsics than TVM's import
    shipped = _run(SHIPPED, str(tmp_path))  # the same IR as TVM's JSON writes it, byte for byte
    assert shipped == {"names": True, "ir": True}, (
        f"{shipped}: regenerate with python -m workbench.tuning.intrinsics ship {tmp_path}")
    fresh = tmp_path / "fresh-home-cache"  # a fresh machine's home: registered from the shipped cache, then its own
    from_package = _run(SECOND, str(fresh))
    assert from_package["report"]["source"] == "shipped" and from_package["report"]["count"] == first["names"]
    assert from_package["wmma"] and from_package["index_map"]
    assert _run(SECOND, str(fresh))["report"]["source"] == "cache"
    for made in tmp_path.glob("tensor_intrin-cuda-*.json"):  # the later tests of this session need not parse again
        shutil.copy(made, cuda_intrinsics)
    # a corrupt (or stale) cache is parsed again and rewritten: shown on this CPU's family, a few seconds to parse
    cpu = tmp_path / "cpu"
    made = _run(CPU, str(cpu))
    if made["report"]["source"] == "none needed":
        return  # a CPU without a tensor-intrinsic family
    assert made["report"]["source"] == "parsed" and made["report"]["count"] > 0
    (path,) = cpu.iterdir()
    path.write_text("{not json")
    again = _run(CPU, str(cpu))
    assert again["report"]["source"] == "parsed" and again["report"]["count"] == made["report"]["count"]
    assert len(json.loads(path.read_text())["names"]) == made["report"]["count"]
    assert _run(CPU, str(cpu))["report"]["source"] == "cache"
