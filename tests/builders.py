"""What tests build and run: the repository, the installed command, synthetic measurements.

Test modules import these from here (``from tests.builders import ...``), never from each
other or from conftest.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
# the console script installed beside this interpreter: what a user runs
SRIFTY = str(Path(sys.executable).with_name("srifty"))


def run_srifty(*args: str, cwd=None, timeout: float = 300, env=None) -> subprocess.CompletedProcess:
    """Run the installed ``srifty`` console script as a user would, capturing its output."""
    return subprocess.run(
        [SRIFTY, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


def synthetic_measurements(seed: int = 0) -> pd.DataFrame:
    """Ring all-reduce steps on two 4-GPU types, 1-2 nodes, three repeats, 2% noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for itype, alpha, beta, intra, inter in (
        ("g4dn.12xlarge", 0.010, 0.0040, 0.010, 0.060),
        ("g6.12xlarge", 0.008, 0.0025, 0.008, 0.045),
    ):
        for nodes in (1, 2):
            for per in (1, 2, 4):
                n = nodes * per
                for bsz in (8, 16, 32, 64):
                    sync = (
                        0.0
                        if n == 1
                        else (
                            2 * (per - 1) / per * intra if nodes == 1 else 2 * (n - 1) / n * inter
                        )
                    )
                    for rep in range(3):
                        rows.append(
                            {
                                "model": "resnet",
                                "instance_type": itype,
                                "gpus_per_node": 4,
                                "num_nodes": nodes,
                                "num_workers": n,
                                "local_bsz": bsz,
                                "step_time_s": (alpha + beta * bsz + sync) * rng.lognormal(0, 0.02),
                                "repeat": rep,
                            }
                        )
    return pd.DataFrame(rows)


# -- a real JupyterLab and a real Chromium (browser tests, benchmarks/widget_latency.py) -------


def chromium_path() -> str:
    """Debian's ``chromium`` (Playwright cannot download its own browser on these machines).

    Raises:
        RuntimeError: it is not installed; says how to install it (``make test`` does).
    """
    import shutil

    path = shutil.which("chromium")
    if path is None:
        raise RuntimeError(
            "chromium is not installed: the browser tests need Debian's chromium "
            "(`apt-get install -y chromium`; `make test` installs it)"
        )
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyter_lab(root: Path, timeout_s: float = 120) -> Iterator[tuple[str, str]]:
    """JupyterLab serving ``root`` on 127.0.0.1 (a free port, a random token), with this
    interpreter's kernel and the app exposed as ``window.jupyterapp``; yields (url, token).

    Its settings, workspaces and runtime files live under ``root`` (nothing from the user's
    profile); the news prompt is off. The server's log is ``root/jupyterlab.log``.
    """
    import json
    import secrets
    import time
    import urllib.request

    token = secrets.token_hex(16)
    port = free_port()
    settings = root / ".lab" / "settings"
    news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True, exist_ok=True)
    news.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(root / ".lab" / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(root / ".lab" / "runtime"),
    )
    log = (root / "jupyterlab.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.terminals_enabled=False",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None",
            "--LabApp.extension_manager=readonly",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"JupyterLab exited ({server.returncode}): see {log.name}")
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not answer in {timeout_s} s") from None
                time.sleep(0.3)
        yield url, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@contextlib.contextmanager
def browser_page(width: int = 1400, height: int = 1800) -> Iterator[Any]:
    """A page of headless Debian chromium driven by Playwright (``--no-sandbox``: CI runs as
    root)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_path(), headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def run_notebook_in_lab(
    page: Any, lab: tuple[str, str], name: str, ready: str, timeout_s: float = 300
) -> None:
    """Open notebook ``name`` (relative to the server's root) in JupyterLab, run all its
    cells in its kernel, and wait until ``ready`` (a CSS selector) is on the page; a cell's
    error comes back in the exception."""
    url, token = lab
    page.goto(f"{url}/lab/tree/{name}?token={token}")
    page.wait_for_function(
        "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " return !!(w && w.sessionContext && w.content && w.content.widgets.length); }",
        timeout=timeout_s * 1000,
    )
    page.evaluate(
        "async () => { const w = window.jupyterapp.shell.currentWidget;"
        " await w.sessionContext.ready;"
        " await window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
    )
    try:
        page.wait_for_selector(ready, timeout=timeout_s * 1000)
    except Exception as err:
        errors = page.eval_on_selector_all(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
            "els => els.map(e => e.innerText).join('\\n')",
        )
        raise AssertionError(f"{ready} never appeared in {name}; cell errors:\n{errors}") from err


def slider_press(page: Any, css_class: str, key: str, times: int = 1) -> None:
    """Press ``key`` (e.g. 'ArrowLeft') on the handle of the slider with ``css_class``."""
    handle = page.locator(f".{css_class} .noUi-handle")
    handle.focus()
    for _ in range(times):
        handle.press(key)
