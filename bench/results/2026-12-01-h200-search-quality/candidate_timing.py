# Kept as the script that made this folder's results (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""One fixed set of candidates, timed every way stock and the workbench time them (issue 16, step 1).

    python bench/candidate_timing.py --target cuda --per-task 24 --out bench/results/candidate_timing_h200.json

Candidates: per task, `--per-task` random samples of its design space drawn by TVM's `ReplayTrace` (fresh
random decisions, then TVM's postprocessors) from a TuneContext seeded with `--seed`: deterministic (the
structural hashes are in the JSON), unlike an evolutionary first round (search threads, and an untrained XGB
that scores with numpy's unseeded global RNG). Every method times the same ones. Builds: stock `LocalBuilder`
(a .tar, linked where it is loaded) and the workbench's `PersistentBuilder` (a .so linked in the builder, no
straggler cut: both build every candidate; its per-candidate build seconds are kept for (b)).

Methods (`--methods`; each runs `--repeat` passes, pass 2 in reverse order, so each also meets itself: the
noise floor):
  stock        .tar, LocalRunner, TVM's default EvaluatorConfig (min_repeat_ms 100): what tune_relax times
  stock-wb     .tar, LocalRunner, the workbench's evaluator_config (min_repeat_ms 20 on CUDA): the bench's stock
  local-so     .so, LocalRunner, workbench evaluator: against stock-wb, the builder's artifact alone (c)
  batch        .so, `workbench.servers.rpc_server` (persistent sessions) via ServerPool, SessionBatchRunner
  rpc          .so, the same server, TVM's RPCRunner: one session per candidate
  batch-spawn  .so, `rpc_server --sessions spawn` (stock --no-fork: a process per session), SessionBatchRunner
  batch-mps    CUDA: .so, a server under a private MPS daemon at 100 %, SessionBatchRunner (last, alone on the GPU)
Per pair (pass p against pass p): per-candidate time ratio (median, IQR), Spearman rank correlation per
task, whether each task's fastest candidate is the same, top-3 overlap.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOCAL = ("stock", "stock-wb", "local-so")
SERVED = {"batch": "plain", "rpc": "plain", "batch-spawn": "spawn", "batch-mps": "mps"}
METHODS = (*LOCAL, "batch", "rpc", "batch-spawn", "batch-mps")
TAR_METHODS = ("stock", "stock-wb")  # the rest time the PersistentBuilder's .so


def draw_candidates(tasks, target, per_task: int, seed: int) -> list[tuple[str, list]]:
    """(task name, MeasureCandidates) per task whose design space can be generated: ReplayTrace draws."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.utils import fork_seed

    out = []
    for task, rand_state in zip(tasks, fork_seed(seed, len(tasks))):
        ctx = ms.TuneContext(mod=task.dispatched[0], target=target, space_generator="post-order-apply",
                             search_strategy=ms.search_strategy.ReplayTrace(), task_name=task.task_name,
                             rand_state=rand_state, num_threads=1)
        try:
            spaces = ctx.generate_design_space()
        except Exception as err:  # noqa: BLE001 - a task TVM cannot schedule is left out, as the client does
            print(f"skipped {task.task_name}: {str(err).strip().splitlines()[-1][:200]}", flush=True)
            continue
        ctx.pre_tuning(per_task, per_task, spaces, ms.database.MemoryDatabase(), None)
        cands = list(ctx.generate_measure_candidates() or [])
        ctx.post_tuning()
        out.append((task.task_name, cands))
    return out


def build_all(builder, cands: list[tuple[str, list]], target) -> tuple[dict[str, list], float]:
    """Artifact path (or None) per candidate per task, built in one call; and the wall seconds."""
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    t0 = time.perf_counter()
    results = builder.build([BuilderInput(c.sch.mod, target) for _, cs in cands for c in cs])
    wall = time.perf_counter() - t0
    paths, i = {}, 0
    for name, cs in cands:
        paths[name] = [r.artifact_path if r.error_msg is None else None for r in results[i:i + len(cs)]]
        for r in (r for r in results[i:i + len(cs)] if r.error_msg):
            print(f"  build error ({name}): {r.error_msg.strip().splitlines()[-1][:160]}", flush=True)
        i += len(cs)
    return paths, wall


def time_all(runner, cands, paths: dict[str, list], device: str, batch: int) -> dict[str, list]:
    """run_secs (or None) per candidate per task, measured in batches of `batch` as tuning would."""
    from tvm.s_tir.meta_schedule.runner import RunnerInput

    out: dict[str, list] = {}
    for name, cs in cands:
        got: list = [None] * len(cs)
        todo = [i for i, p in enumerate(paths[name]) if p is not None]
        for start in range(0, len(todo), batch):
            part = todo[start:start + batch]
            futures = runner.run([RunnerInput(paths[name][i], device, cs[i].args_info) for i in part])
            for i, res in zip(part, (f.result() for f in futures)):
                got[i] = [float(s) for s in res.run_secs] if res.error_msg is None and res.run_secs else None
                if got[i] is None:
                    print(f"  run error ({name} #{i}): {(res.error_msg or '').strip().splitlines()[-1:]}", flush=True)
        out[name] = got
    return out


def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rank correlation (measured times do not tie); None below 3 points."""
    if len(a) < 3:
        return None
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def compare(pairs: list[tuple[dict, dict]]) -> dict:
    """Agreement of timings A and B ({task: [run_secs or None]} each), pooled over the (A, B) pass pairs."""
    ratios, rhos, best_same, top3, n_tasks = [], [], 0, [], 0
    for a, b in pairs:
        for task in a:
            ok = [i for i, (x, y) in enumerate(zip(a[task], b[task])) if x and y]
            if not ok:
                continue
            ta = [float(np.mean(a[task][i])) for i in ok]
            tb = [float(np.mean(b[task][i])) for i in ok]
            ratios += [x / y for x, y in zip(ta, tb)]
            rho = spearman(ta, tb)
            rhos += [] if rho is None else [rho]
            n_tasks += 1
            best_same += int(np.argmin(ta) == np.argmin(tb))
            k = min(3, len(ok))
            top3.append(len(set(np.argsort(ta)[:k]) & set(np.argsort(tb)[:k])) / k)
    if not ratios:
        return {"n": 0}
    q1, med, q3 = np.percentile(ratios, [25, 50, 75])
    return {"n": len(ratios), "ratio_median": round(float(med), 4), "ratio_iqr": [round(float(q1), 4), round(float(q3), 4)],
            "spearman_mean": None if not rhos else round(float(np.mean(rhos)), 4),
            "spearman_min": None if not rhos else round(float(np.min(rhos)), 4),
            "best_same": f"{best_same}/{n_tasks}", "top3_overlap": round(float(np.mean(top3)), 3)}


def summarize(timings: dict[str, list[dict]]) -> dict:
    """Self pairs (pass 1 vs each later pass) and cross pairs (pass p vs pass p, every pass both have)."""
    names = list(timings)
    out = {"self": {}, "pairs": {}}
    for m in names:
        if len(timings[m]) > 1:
            out["self"][m] = compare([(timings[m][0], t) for t in timings[m][1:]])
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            n = min(len(timings[a]), len(timings[b]))
            out["pairs"][f"{a} / {b}"] = compare([(timings[a][p], timings[b][p]) for p in range(n)])
    return out


def build_vs_run(build_s: dict[str, list], timings: dict[str, list[dict]]) -> dict:
    """(b): are slow builds fast kernels? Per task: Spearman of build s against run time (the first .so
    method's first pass), and each build the product's cut would likely drop (over max(min_s, factor x the
    task's median build), StragglerCut's defaults) with its run-time rank (1 = fastest)."""
    from workbench.tuning.plugins import StragglerCut

    ref = next((m for m in timings if m not in TAR_METHODS and timings[m]), None)
    if ref is None:
        return {}
    cut, out = StragglerCut(), {"reference": ref}
    for task, builds in build_s.items():
        runs = timings[ref][0].get(task, [])
        ok = [i for i, (b, r) in enumerate(zip(builds, runs)) if b is not None and r]
        t = {i: float(np.mean(runs[i])) for i in ok}
        limit = max(cut.min_s, cut.factor * float(np.median([builds[i] for i in ok]))) if ok else None
        order = sorted(ok, key=t.get)
        rho = spearman([builds[i] for i in ok], [t[i] for i in ok])
        out[task] = {"spearman_build_vs_run": None if rho is None else round(rho, 3),
                     "cut_limit_s": limit, "slow_builds": [{"build_s": builds[i], "run_rank": order.index(i) + 1,
                                                            "of": len(ok)} for i in ok if builds[i] > limit]}
    return out


def print_table(summary: dict, walls: dict[str, list[float]]) -> None:
    print()
    cols = ("pair", "n", "ratio med", "ratio IQR", "rho mean", "rho min", "best same", "top3")
    rows = [(f"{m} / itself", s) for m, s in summary["self"].items()] + list(summary["pairs"].items())
    lines = [cols] + [(name, str(s.get("n")), str(s.get("ratio_median", "")), str(s.get("ratio_iqr", "")),
                       str(s.get("spearman_mean", "")), str(s.get("spearman_min", "")), s.get("best_same", ""),
                       str(s.get("top3_overlap", ""))) for name, s in rows]
    widths = [max(len(r[i]) for r in lines) for i in range(len(cols))]
    for k, r in enumerate(lines):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    for task, b in summary.get("build_vs_run", {}).items():
        if task != "reference":
            print(f"build s vs run time ({task}): rho {b['spearman_build_vs_run']}; builds over the cut's "
                  f"{b['cut_limit_s']:.1f} s: {[(x['build_s'], x['run_rank']) for x in b['slow_builds']]} (s, run rank)")
    print("seconds per pass: " + ", ".join(f"{m} {'/'.join(f'{w:.1f}' for w in ws)}" for m, ws in walls.items()))


class Servers:
    """The product's measuring side for one kind of method: tracker + one server on 127.0.0.1 (ServerPool)."""

    def __init__(self, work: str, kind: str, device: str, cores: list[int], daemon=None) -> None:
        from workbench.servers.pool import ServerPool, ServerSpec
        from workbench.servers.slices import SliceHost, apply_slice

        self.key = f"ct-{kind}-{os.getpid()}"
        self.pool = ServerPool(os.path.join(work, kind), "127.0.0.1", dict(os.environ), self.key, device,
                               sessions="spawn" if kind == "spawn" else "persistent")
        binding = apply_slice(SliceHost("cuda" if device == "cuda" else "cpu", tuple(cores),
                                        daemons={0: daemon} if daemon else {}), 100)
        self.binding = binding.to_dict()
        self.pool.start_tracker()
        self.started = self.pool.start_servers([ServerSpec(0, self.key, binding)])

    def wait(self) -> None:
        self.pool.wait_servers(self.started)

    def rpc_config(self, timeout: float):
        from tvm.s_tir import meta_schedule as ms

        host, port = self.pool.tracker_addr
        return ms.runner.RPCConfig(tracker_host=host, tracker_port=port, tracker_key=self.key,
                                   session_timeout_sec=timeout)

    def info(self) -> dict:
        info = self.pool.servers[0].info if self.pool.servers else {}
        return {**self.binding, **{k: v for k, v in info.items() if k != "cores"}, "server_cores": info.get("cores")}

    def stop(self) -> None:
        self.pool.stop()


def make_runner(method: str, kind: str, servers: dict[str, Servers], timeout: float, batch: int):
    from tvm.s_tir import meta_schedule as ms

    from workbench.tuning.batch_runner import SessionBatchRunner
    from workbench.tuning.client import evaluator_config

    if method == "stock":
        return ms.runner.LocalRunner(timeout_sec=timeout, evaluator_config=ms.runner.EvaluatorConfig())
    if method in LOCAL:
        return ms.runner.LocalRunner(timeout_sec=timeout, evaluator_config=evaluator_config(kind))
    config = servers[SERVED[method]].rpc_config(timeout)
    if method == "rpc":
        return ms.runner.RPCRunner(rpc_config=config, evaluator_config=evaluator_config(kind), max_workers=1)
    return SessionBatchRunner(config, evaluator_config(kind), 1, batch)


def close(obj) -> None:
    """Shut down a builder's or runner's worker pool (processes of ours); best effort on the way out."""
    with contextlib.suppress(Exception):
        (obj if hasattr(obj, "shutdown") else obj.pool).shutdown()


def save(path: str | None, result: dict) -> None:
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path + ".part", "w") as f:
            json.dump(result, f, indent=1, default=str)
        os.replace(path + ".part", path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mlp")
    p.add_argument("--target", default="auto", help="auto, cuda, or llvm/cpu")
    p.add_argument("--per-task", type=int, default=32)
    p.add_argument("--batch", type=int, default=16, help="candidates per runner call (as trials_per_batch)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--repeat", type=int, default=2, help="passes per method (2+: the self-vs-self baseline)")
    p.add_argument("--builder-workers", type=int, default=None, help="default: every usable core, as one client")
    p.add_argument("--timeout", type=float, default=60.0, help="per-candidate measuring limit, s")
    p.add_argument("--build-timeout", type=float, default=600.0, help="per-candidate build limit, s (generous: "
                   "every candidate should build; a fresh LocalBuilder worker's intrinsics import counts against it)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    from workbench.hardware import detect, target_spec, usable_cores

    hw = detect()
    kind = {"auto": hw.default_target, "llvm": "cpu"}.get(args.target, args.target)
    methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        p.error(f"unknown methods {bad}; choose from {', '.join(METHODS)}")
    if kind != "cuda" and "batch-mps" in methods:
        methods.remove("batch-mps")
        print("batch-mps needs CUDA: left out", flush=True)
    cores = usable_cores()
    workers = args.builder_workers or len(cores)
    tspec = target_spec(kind, hw)
    device = tspec.device_type
    work = tempfile.mkdtemp(prefix="wb-ct-")
    os.makedirs(os.path.join(work, "tmp"))
    os.environ["TMPDIR"] = os.path.join(work, "tmp")  # every artifact and session folder lands in `work`
    tempfile.tempdir = None
    if kind != "cuda":  # the CPU share the product gives a server, and a local-runner client, at 100 %
        from workbench.servers.slices import Slice, cpu_binding

        os.environ.update(cpu_binding(Slice(100), cores).env)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` cleans up

    t_start = time.time()
    owned: list = []  # builders and runners: their worker pools are shut down on the way out
    servers: dict[str, Servers] = {}
    daemon = None
    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "args": vars(args), "methods": methods,
                    "device": hw.describe(kind), "cores": len(cores), "builder_workers": workers}
    try:
        logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
        import tvm
        import tvm_ffi
        from tvm.s_tir import meta_schedule as ms

        from workbench.models.load import load_model
        from workbench.plan.tasks import extract_tasks
        from workbench.tuning.plugins import PersistentBuilder

        for group in dict.fromkeys(SERVED[m] for m in methods if m in SERVED and m != "batch-mps"):
            servers[group] = Servers(work, group, device, cores)  # they start while we draw and build
        target = tspec.build()
        result.update(tvm=tvm.__version__, target=str(target))
        tasks = extract_tasks(load_model(args.model).mod, target)
        t0 = time.time()
        cands = draw_candidates(tasks, target, args.per_task, args.seed)
        result["draw_s"] = round(time.time() - t0, 1)
        result["tasks"] = {name: {"structural_hashes": [str(tvm_ffi.structural_hash(c.sch.mod)) for c in cs]}
                           for name, cs in cands}
        print(f"{sum(len(c) for _, c in cands)} candidates of {len(cands)} tasks drawn in {result['draw_s']} s", flush=True)
        artifacts = {}
        if any(m in TAR_METHODS for m in methods):
            artifacts["tar"], wall = build_all(ms.builder.LocalBuilder(max_workers=workers, timeout_sec=args.build_timeout),
                                               cands, target)
            result["build_s"] = {"LocalBuilder": round(wall, 1)}
        if any(m not in TAR_METHODS for m in methods):
            builder = PersistentBuilder(workers, timeout_sec=args.build_timeout)
            owned.append(builder)
            artifacts["so"], wall = build_all(builder, cands, target)
            result.setdefault("build_s", {})["PersistentBuilder"] = round(wall, 1)
            result["build_each_s"] = {n: [None if a is None else round(builder.timings[a][0], 3) for a in paths]
                                      for n, paths in artifacts["so"].items()}
            close(builder)
        print(f"built: {result['build_s']}", flush=True)
        for s in servers.values():
            s.wait()
        result["servers"] = {g: s.info() for g, s in servers.items()}

        timings: dict[str, list[dict]] = {m: [] for m in methods}
        walls: dict[str, list[float]] = {m: [] for m in methods}
        runners: dict[str, object] = {}

        def one_pass(m: str) -> None:
            if m not in runners:
                runners[m] = make_runner(m, kind, servers, args.timeout, args.batch)
                owned.append(runners[m])
            t = time.perf_counter()
            timings[m].append(time_all(runners[m], cands, artifacts["tar" if m in TAR_METHODS else "so"], device,
                                       args.batch))
            walls[m].append(round(time.perf_counter() - t, 1))
            print(f"  {m} pass {len(timings[m])}: {walls[m][-1]} s", flush=True)
            result.update(seconds_per_pass=walls, run_secs=timings, summary=summarize(timings),
                          total_s=round(time.time() - t_start, 1))
            if "build_each_s" in result:
                result["summary"]["build_vs_run"] = build_vs_run(result["build_each_s"], timings)
            save(args.out, result)  # after every pass: a run cut off keeps what it measured

        plain = [m for m in methods if m != "batch-mps"]
        for rep in range(args.repeat):
            for m in (plain if rep % 2 == 0 else plain[::-1]):
                one_pass(m)
        if "batch-mps" in methods:  # alone on the GPU: every other CUDA context here goes first
            from workbench.servers.mps import MpsDaemon

            for obj in (*runners.values(), *servers.values()):
                obj.stop() if isinstance(obj, Servers) else close(obj)

            daemon = MpsDaemon(os.path.join(work, "mps"))
            if not daemon.start():
                raise RuntimeError(f"MPS daemon: {daemon.reason}")
            servers["mps"] = Servers(work, "mps", device, cores, daemon)
            servers["mps"].wait()
            result["servers"]["mps"] = servers["mps"].info()
            for _ in range(args.repeat):
                one_pass("batch-mps")
        result.update(complete=True, total_s=round(time.time() - t_start, 1))
        print_table(result["summary"], walls)
        print(f"total {result['total_s']} s")
        return 0
    finally:
        for obj in owned:
            close(obj)
        for s in servers.values():
            s.stop()
        if daemon is not None:
            daemon.stop()
        result["total_s"] = round(time.time() - t_start, 1)
        save(args.out, result)
        if args.out:
            print(f"written {args.out}" + ("" if result.get("complete") else " (incomplete)"))
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
