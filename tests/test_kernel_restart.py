"""A real Jupyter kernel restarts mid-run: the run goes on, `%workbench attach` shows all of it, nothing is left."""
from __future__ import annotations

import json
import os
import time

import psutil
import pytest
from jupyter_client import KernelManager

import workbench as wb
from workbench.procs import group_alive
from workbench.runs import store

pytestmark = pytest.mark.slow
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _execute(kc, code: str, timeout: float = 120) -> tuple[str, list[dict]]:
    """Run a cell; its stdout and its display_data outputs. Raises with the traceback on an error."""
    out: list[str] = []
    displays: list[dict] = []

    def hook(msg: dict) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream" and content["name"] == "stdout":
            out.append(content["text"])
        elif kind in ("display_data", "execute_result"):
            displays.append(content["data"])

    reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
    if reply["content"]["status"] != "ok":
        raise AssertionError(f"cell failed: {reply['content'].get('ename')}: {reply['content'].get('evalue')}\n"
                             + "\n".join(reply["content"].get("traceback", []))[-3000:])
    return "".join(out), displays


def _file_events(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "events.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _gone_or_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _zombies_under(pid: int) -> list[int]:
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True) if c.status() == psutil.STATUS_ZOMBIE]
    except psutil.NoSuchProcess:
        return []


def test_run_survives_a_kernel_restart_and_attach_shows_its_whole_history(tmp_path):
    home = str(tmp_path / "home")
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env={**os.environ, "WORKBENCH_HOME": home}, cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        first_kernel = km.provisioner.process.pid
        out, _ = _execute(kc, "%load_ext workbench\n"
                              "run = %tune --model mlp-small --servers 1 --shards 1 --trials 48 --trials-per-batch 4 "
                              "--cost-model random --strategy replay-trace\n"
                              "print(run.id)")
        run_id = out.strip().splitlines()[-1]
        run = wb.open_run(run_id, home)
        for event in run.follow(timeout=300):
            if event["kind"] == "batch":
                break
        else:
            raise AssertionError(f"no batch before the restart; status {run.status}: {run.message}")
        supervisor = store.read_json(os.path.join(run.dir, store.PROCS_FILE))["supervisor"]

        restarted_at = time.time()
        km.restart_kernel(now=True)
        kc.wait_for_ready(timeout=120)
        assert _gone_or_zombie(first_kernel)
        assert group_alive(supervisor) and run.status == "running"  # the restart did not touch the run

        _, displays = _execute(kc, f"%load_ext workbench\n%workbench attach {run_id}")
        assert any(WIDGET_VIEW in d for d in displays), displays  # the panel following the run
        out, _ = _execute(kc, "import json\n"
                              "from widgets.magics import _LOADED\n"
                              "panel = _LOADED[-1].panels[-1]\n"
                              "status = await panel.wait(timeout=400)\n"
                              "seen = panel.run.event_list()\n"
                              "print(json.dumps({'id': panel.run.id, 'status': status, 'message': panel.run.message,\n"
                              "                  'events': [[e['kind'], e['t']] for e in seen]}))", timeout=500)
        seen = json.loads(out.strip().splitlines()[-1])
        assert seen["id"] == run_id and seen["status"] == "done", seen["message"]
        on_disk = _file_events(run.dir)
        assert seen["events"] == [[e["kind"], e["t"]] for e in on_disk]  # the whole history, in order
        kinds = [k for k, _ in seen["events"]]
        assert kinds[0] == "launched" and kinds[-1] == "run_finished"
        before = [t for k, t in seen["events"] if k == "batch" and t < restarted_at]
        after = [t for k, t in seen["events"] if k == "batch" and t > restarted_at]
        assert before and after, (len(before), len(after))  # tuning went on while the kernel restarted
        assert run.progress().trials_done.iloc[0] == 48

        procs = store.read_json(os.path.join(run.dir, store.PROCS_FILE))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(group_alive(p) for p in [supervisor, *procs["groups"]]):
            time.sleep(0.2)
        assert not [p for p in [supervisor, *procs["groups"]] if group_alive(p)]
        leftovers = [p.info for p in psutil.process_iter(["pid", "cmdline"])
                     if any(run.dir in part for part in (p.info["cmdline"] or []))]
        assert leftovers == []
        kernel = km.provisioner.process.pid
        assert _zombies_under(kernel) == [] and _zombies_under(os.getpid()) == []
        assert [c.pid for c in psutil.Process(kernel).children(recursive=True)] == []  # the run was never the kernel's
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
