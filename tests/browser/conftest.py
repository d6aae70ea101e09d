"""JupyterLab + Debian Chromium for the browser tests (no browser download: Playwright drives /usr/bin/chromium).

A session fixture starts `python -m jupyterlab` on a free 127.0.0.1 port with Galata's test configuration
(no token, `window.jupyterapp` exposed), a private root folder and a private WORKBENCH_HOME; kernels inherit
WB_NB_SMALL=1 so notebooks run in their quick mode.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("WB_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


def require_chromium() -> None:
    """Skip without Chromium, except on CI (CI=true), where a missing browser is a failure."""
    if os.path.exists(CHROMIUM):
        return
    message = (f"Chromium not found at {CHROMIUM}: install it with `apt-get install -y chromium` "
               "(or point WB_CHROMIUM at a Chromium binary)")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture
def require_browser() -> Callable[[], str]:
    """Call it first thing in a test: returns the Chromium path, or skips (fails on CI) without Chromium.

    A call inside the test, rather than a fixture doing the check, makes a missing browser on CI a test
    failure rather than a setup error.
    """
    def check() -> str:
        require_chromium()
        return CHROMIUM
    return check


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """test-artifacts/ at the repository root (git-ignored): screenshots for people to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    return {**browser_type_launch_args, "executable_path": CHROMIUM,
            "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    return {**browser_context_args, "viewport": {"width": 1400, "height": 1900}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lab-root")
    shutil.copy(ROOT / "notebooks" / "01_quickstart.ipynb", root / "01_quickstart.ipynb")
    return root


@pytest.fixture(scope="session")
def lab_home(tmp_path_factory) -> Path:
    """The WORKBENCH_HOME of the lab's kernels: every browser test's runs, and the tuning memory they teach."""
    return tmp_path_factory.mktemp("lab-home")


@pytest.fixture(scope="session")
def jupyter_lab(lab_root: Path, lab_home: Path, tmp_path_factory) -> Iterator[str]:
    """Base URL of a JupyterLab server for the session (stopped at the end)."""
    if not os.path.exists(CHROMIUM):
        yield ""  # the test reports the missing browser itself
        return
    port = _free_port()
    work = tmp_path_factory.mktemp("lab-server")
    config = work / "jupyter_server_test_config.py"
    config.write_text(
        "from jupyterlab.galata import configure_jupyter_server\n"
        "configure_jupyter_server(c)\n"
        f"c.ServerApp.port = {port}\n"
        "c.ServerApp.ip = '127.0.0.1'\n"
        f"c.ServerApp.root_dir = {str(lab_root)!r}\n"
        "c.ServerApp.allow_root = True\n"
        "c.ServerApp.open_browser = False\n"
    )
    env = dict(os.environ, WB_NB_SMALL="1", WORKBENCH_HOME=str(lab_home), WB_NB_EXPORT=str(lab_root / "export"),
               JUPYTER_CONFIG_DIR=str(work / "jupyter-config"), PYTHONPATH=str(ROOT))
    log = open(work / "server.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--config", str(config)], cwd=str(lab_root),
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start (exit {proc.poll()}); see {work / 'server.log'}:\n"
                                   + (work / "server.log").read_text()[-2000:])
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
