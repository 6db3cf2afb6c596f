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
from secrets import token_hex
from typing import Any

import numpy as np
import pandas as pd
import pytest

from srifty_kit.model.physics import StepParams, simulate

REPO = Path(__file__).resolve().parents[1]
# the console script installed beside this interpreter: what a user runs
SRIFTY = str(Path(sys.executable).with_name("srifty"))


def benchmark(name: str) -> Any:
    """The script ``benchmarks/<name>.py`` as a module, imported as its own run would import
    it (beside its neighbours, such as ``common``), without running its ``main``."""
    import importlib.util

    folder = str(REPO / "benchmarks")
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, f"{folder}/{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


def run_srifty(*args: str, cwd=None, timeout: float = 300, env=None) -> subprocess.CompletedProcess:
    """Run the installed ``srifty`` console script as a user would, capturing its output."""
    return subprocess.run(
        [SRIFTY, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


def run_srifty_into_a_closed_pipe(*args: str, cwd=None, timeout: float = 300) -> tuple[int, str]:
    """Run ``srifty`` with its stdout a pipe whose reader has gone, as in ``srifty ... | head``
    once head has what it wants: the exit status and what it said on stderr."""
    proc = subprocess.Popen(
        [SRIFTY, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    proc.stdout.close()  # before srifty writes a byte: its first write finds no reader
    try:
        err = proc.stderr.read()
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


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


def listed_candidates(path: Path) -> Path:
    """Write a candidates table to ``path`` and return it: "I can get 2, 4 or 16 nodes of
    g4dn.12xlarge" (4 GPUs each, batch 32), whose 16 nodes lie beyond a limit of 8."""
    pd.DataFrame(
        {
            "instance_type": ["g4dn.12xlarge"] * 3,
            "num_nodes": [2, 4, 16],
            "num_workers": [8, 16, 64],
            "local_bsz": [32, 32, 32],
        }
    ).to_csv(path, index=False)
    return path


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
def browser_page(width: int = 1600, height: int = 1800) -> Iterator[Any]:
    """A page of headless Debian chromium driven by Playwright (``--no-sandbox``: CI runs as
    root)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_path(),
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage"],
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
    page.goto(f"{url}/lab/tree/{name}?reset&token={token}")  # reset: no restored tabs
    page.wait_for_function(
        "(name) => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        " return !!(w && w.context && w.context.path === name && w.sessionContext"
        " && w.content && w.content.widgets.length); }",
        arg=name,
        timeout=timeout_s * 1000,
    )
    page.evaluate(
        "async () => { const app = window.jupyterapp; const w = app.shell.currentWidget;"
        " if (app.shell.collapseLeft) app.shell.collapseLeft();"  # room for the panels
        " await w.sessionContext.ready;"
        " await app.commands.execute('notebook:run-all-cells'); }"
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


# -- usage ledgers of the weekly cost report (tests/tables, tests/present, tests/cli) ----------

LEDGER_WEEK = "2026-11-23"  # a Monday; the builders' usage has a week before it and one row after
# fake credentials for the moto server, new each session and shaped like no real key, so no
# credential-looking literal is committed; tests assert they never reach a report or an error
AWS_SECRETS = (f"srifty-test-key-id-{token_hex(6)}", f"srifty-test-secret-{token_hex(16)}")

# job, team, model, local_bsz, instance_type, pricing, nodes, start, hours per node
_USAGE_JOBS = (
    ("vision-resnet", "vision", "resnet", 32, "g4dn.12xlarge", "spot", 2, "2026-11-23T02:00", 4.5),
    ("nlp-bert", "nlp", "bert", 8, "p4d.24xlarge", "savings-plan", 1, "2026-11-24T10:00", 3.0),
    ("nlp-eval", "nlp", None, None, "c6i.4xlarge", "on-demand", 1, "2026-11-26T08:00", 6.0),
    ("vision-big", "vision", "resnet", 32, "g6.12xlarge", "on-demand", 1, "2026-11-28T01:00", 2.0),
    (
        "vision-resnet-0",
        "vision",
        "resnet",
        32,
        "g4dn.12xlarge",
        "on-demand",
        2,
        "2026-11-17T03:00",
        4.0,
    ),
    ("recsys-ncf", "recsys", "ncf", 4096, "g4dn.xlarge", "spot", 1, "2026-11-12T09:00", 10.0),
    ("nlp-later", "nlp", None, None, "c6i.4xlarge", "on-demand", 1, "2026-12-01T09:00", 2.0),
)
SP_RATE = 0.72  # savings-plan effective cost per on-demand dollar
SPOT_RATE = 0.35  # spot price per on-demand dollar


def usage_hours() -> pd.DataFrame:
    """The instance-hours of a few jobs over three weeks around ``LEDGER_WEEK``: one row per
    job, node and clock hour (the grain of a CUR), with what it cost and its on-demand price.

    Prices are the embedded catalog's on-demand prices; spot at ``SPOT_RATE`` of them,
    savings-plan usage at ``SP_RATE``. No job crosses midnight, so a jobs ledger dating each
    run by its start has the same days.
    """
    from srifty_kit.catalog.query import load_catalog

    ondemand = load_catalog().drop_duplicates("instance_type").set_index("instance_type")
    rows = []
    for number, (job, team, model, bsz, itype, pricing, nodes, start, hours) in enumerate(
        _USAGE_JOBS
    ):
        price = float(ondemand.loc[itype, "ondemand_usd_per_hr"])
        rate = {"spot": SPOT_RATE, "savings-plan": SP_RATE}.get(pricing, 1.0) * price
        for node in range(nodes):
            for hour in range(int(np.ceil(hours))):
                amount = min(1.0, hours - hour)
                rows.append(
                    {
                        "job": job,
                        "team": team,
                        "model": model,
                        "local_bsz": bsz,
                        "instance_type": itype,
                        "pricing": pricing,
                        "num_nodes": nodes,
                        "run_hours": hours,
                        "resource_id": f"i-0{number:04d}{node:012x}",
                        "start": pd.Timestamp(start) + pd.Timedelta(hours=hour),
                        "amount": amount,
                        "cost_usd": rate * amount,
                        "ondemand_usd": price * amount,
                    }
                )
    return pd.DataFrame(rows)


def _iso(ts: pd.Series) -> pd.Series:
    return ts.dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def _write(frame: pd.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".parquet"):
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False, compression="gzip" if path.name.endswith(".gz") else None)
    return path


def cur_frame(hours: pd.DataFrame, legacy: bool = False, tags: str = "map") -> pd.DataFrame:
    """``hours`` as CUR line items (legacy or 2.0 names) with a storage line per job, a
    savings-plan negation per covered line and a tax line; CUR 2.0 tags as a map (a dict per
    row, for Parquet) or JSON text (as in a CSV export)."""
    import json

    sp = hours["pricing"] == "savings-plan"
    usage_type = np.where(hours["pricing"] == "spot", "USE1-SpotUsage:", "USE1-BoxUsage:")
    lines = pd.DataFrame(
        {
            "type": np.where(sp, "SavingsPlanCoveredUsage", "Usage"),
            "start": _iso(hours["start"]),
            "end": _iso(hours["start"] + pd.Timedelta(hours=1)),
            "product": "AmazonEC2",
            "usage_type": usage_type + hours["instance_type"],
            "amount": hours["amount"],
            "cost": np.where(sp, hours["ondemand_usd"], hours["cost_usd"]),
            "resource": hours["resource_id"],
            "instance_type": hours["instance_type"],
            "list_cost": hours["ondemand_usd"],
            "sp_cost": np.where(sp, hours["cost_usd"], np.nan),
            "job": hours["job"],
            "team": hours["team"],
            "model": hours["model"],
            "local_bsz": hours["local_bsz"].map(lambda b: None if pd.isna(b) else str(int(b))),
        }
    )
    negation = lines[sp].assign(
        type="SavingsPlanNegation", cost=-lines.loc[sp, "cost"], sp_cost=np.nan
    )
    storage = lines.drop_duplicates("job").assign(
        usage_type="USE1-EBS:VolumeUsage.gp3",
        amount=3.0,
        cost=0.8,
        instance_type=None,
        list_cost=0.8,
        sp_cost=np.nan,
        type="Usage",
    )
    tax = lines.head(1).assign(
        type="Tax",
        product="AmazonEC2",
        usage_type="",
        cost=12.0,
        amount=0.0,
        instance_type=None,
        list_cost=np.nan,
        sp_cost=np.nan,
        resource=None,
        job=None,
        team=None,
        model=None,
        local_bsz=None,
    )
    lines = pd.concat([lines, negation, storage, tax], ignore_index=True)
    tag_names = ("job", "team", "model", "local_bsz")
    if legacy:
        names = {
            "type": "lineItem/LineItemType",
            "start": "lineItem/UsageStartDate",
            "end": "lineItem/UsageEndDate",
            "product": "lineItem/ProductCode",
            "usage_type": "lineItem/UsageType",
            "amount": "lineItem/UsageAmount",
            "cost": "lineItem/UnblendedCost",
            "resource": "lineItem/ResourceId",
            "instance_type": "product/instanceType",
            "list_cost": "pricing/publicOnDemandCost",
            "sp_cost": "savingsPlan/SavingsPlanEffectiveCost",
        }
        names.update({t: f"resourceTags/user:{t}" for t in tag_names})
        return lines.rename(columns=names)
    maps = [
        {f"user_{t}": row[t] for t in tag_names if isinstance(row[t], str)}
        for _, row in lines.iterrows()
    ]
    lines = lines.drop(columns=list(tag_names)).rename(
        columns={
            "type": "line_item_line_item_type",
            "start": "line_item_usage_start_date",
            "end": "line_item_usage_end_date",
            "product": "line_item_product_code",
            "usage_type": "line_item_usage_type",
            "amount": "line_item_usage_amount",
            "cost": "line_item_unblended_cost",
            "resource": "line_item_resource_id",
            "instance_type": "product_instance_type",
            "list_cost": "pricing_public_on_demand_cost",
            "sp_cost": "savings_plan_savings_plan_effective_cost",
        }
    )
    if tags == "map":
        for column in ("line_item_usage_start_date", "line_item_usage_end_date"):
            lines[column] = pd.to_datetime(lines[column]).dt.tz_localize(None)
        lines["resource_tags"] = [list(m.items()) for m in maps]
    else:
        lines["resource_tags"] = [json.dumps(m) for m in maps]
    return lines


def write_cur(hours: pd.DataFrame, path: Path, legacy: bool = False) -> Path:
    """A CUR export file: legacy names as CSV (gzip when the name ends .gz), CUR 2.0 as
    Parquet (tags a map) or CSV (tags JSON text), by the file name."""
    path = Path(path)
    if legacy:
        return _write(cur_frame(hours, legacy=True), path)
    if path.name.endswith(".parquet"):
        return write_cur_parquet(cur_frame(hours, tags="map"), path)
    return _write(cur_frame(hours, tags="json"), path)


def write_cur_parquet(frame: pd.DataFrame, path: Path) -> Path:
    """A CUR 2.0 frame (``cur_frame``'s, its tags a map) as a Parquet export."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = frame.copy()
    tags = frame.pop("resource_tags")
    table = pa.Table.from_pandas(frame, preserve_index=False).append_column(
        "resource_tags", pa.array(list(tags), type=pa.map_(pa.string(), pa.string()))
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def write_focus(hours: pd.DataFrame, path: Path) -> Path:
    """``hours`` as a FOCUS 1.x export (CSV), with a storage line per job and a commitment
    purchase line."""
    import json

    sp = hours["pricing"] == "savings-plan"
    category = np.select(
        [hours["pricing"] == "spot", sp], ["Dynamic", "Committed"], default="Standard"
    )
    tags = [
        json.dumps(
            {
                f"user:{t}": str(int(v)) if t == "local_bsz" else v
                for t, v in row.items()
                if not pd.isna(v)
            }
        )
        for row in hours[["job", "team", "model", "local_bsz"]].to_dict("records")
    ]
    lines = pd.DataFrame(
        {
            "BillingAccountId": "123456789012",
            "BillingCurrency": "USD",
            "ChargePeriodStart": _iso(hours["start"]),
            "ChargePeriodEnd": _iso(hours["start"] + pd.Timedelta(hours=1)),
            "ChargeCategory": "Usage",
            "ServiceCategory": "Compute",
            "ServiceName": "Amazon Elastic Compute Cloud",
            "PricingCategory": category,
            "CommitmentDiscountType": np.where(sp, "Savings Plan", None),
            "ConsumedQuantity": hours["amount"],
            "ConsumedUnit": "Hrs",
            "BilledCost": np.where(sp, 0.0, hours["cost_usd"]),
            "EffectiveCost": hours["cost_usd"],
            "ListCost": hours["ondemand_usd"],
            "ResourceId": hours["resource_id"],
            "SkuPriceDetails": [json.dumps({"InstanceType": t}) for t in hours["instance_type"]],
            "Tags": tags,
        }
    )
    storage = lines.drop_duplicates("Tags").assign(
        ServiceCategory="Storage",
        ConsumedQuantity=3.0,
        ConsumedUnit="GB-Mo",
        EffectiveCost=0.8,
        BilledCost=0.8,
        ListCost=0.8,
        SkuPriceDetails="{}",
        PricingCategory="Standard",
    )
    purchase = lines.head(1).assign(
        ChargeCategory="Purchase",
        EffectiveCost=0.0,
        BilledCost=500.0,
        SkuPriceDetails="{}",
        ConsumedQuantity=None,
        ConsumedUnit=None,
        ResourceId=None,
        Tags="{}",
    )
    return _write(pd.concat([lines, storage, purchase], ignore_index=True), Path(path))


def jobs_ledger_frame(hours: pd.DataFrame) -> pd.DataFrame:
    """``hours`` as a plain jobs ledger: one row per job (savings-plan runs at their cost)."""
    runs = (
        hours.groupby("job", sort=False)
        .agg(
            team=("team", "first"),
            instance_type=("instance_type", "first"),
            pricing=("pricing", "first"),
            start=("start", "min"),
            hours=("run_hours", "first"),
            num_nodes=("num_nodes", "first"),
            cost_usd=("cost_usd", "sum"),
            model=("model", "first"),
            local_bsz=("local_bsz", "first"),
        )
        .reset_index()
    )
    runs["pricing"] = runs["pricing"].replace("savings-plan", "on-demand")
    runs["end"] = _iso(runs["start"] + pd.to_timedelta(runs.pop("hours"), unit="h"))
    runs["start"] = _iso(runs["start"])
    runs["local_bsz"] = runs["local_bsz"].astype("Int64")
    return runs


def write_jobs_ledger(hours: pd.DataFrame, path: Path) -> Path:
    """``hours`` as a jobs ledger CSV."""
    return _write(jobs_ledger_frame(hours), Path(path))


# -- Athena through a real moto server on 127.0.0.1 ---------------------------------------------


def require_athena_json() -> None:
    """Fail with what to fix when the installed botocore speaks to Athena in a protocol other
    than JSON 1.1: moto (and ``tests/cli/test_redaction.py``'s echoing server) answer Athena
    only there, so every Athena test would fail on a 404 that names neither cause."""
    import botocore
    import botocore.session

    protocol = botocore.session.get_session().get_service_model("athena").protocol
    if protocol != "json":
        pytest.fail(
            f"botocore {botocore.__version__} speaks {protocol} to Athena, which moto does not "
            'answer; to fix: pip install -e ".[dev]" (pyproject.toml bounds botocore)',
            pytrace=False,
        )


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on 127.0.0.1 (a free port), as its endpoint URL."""
    from moto.server import ThreadedMotoServer

    require_athena_json()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def fake_aws_env(endpoint: str | None, home: Path) -> dict[str, str]:
    """The environment with fake credentials (``AWS_SECRETS``) and nothing of the user's AWS
    setup; AWS calls go to ``endpoint`` when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID=AWS_SECRETS[0],
        AWS_SECRET_ACCESS_KEY=AWS_SECRETS[1],
        AWS_CONFIG_FILE=str(home / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "no-aws-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_DEFAULT_REGION="us-east-1",
    )
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


def moto_api(endpoint: str, path: str, body: Any) -> None:
    """POST to moto's own API (``/moto-api/...``): JSON for objects, text otherwise."""
    import json
    import urllib.request

    text = isinstance(body, str)
    request = urllib.request.Request(
        f"{endpoint}{path}",
        data=body.encode() if text else json.dumps(body).encode(),
        headers={"Content-Type": "text/plain" if text else "application/json"},
    )
    with urllib.request.urlopen(request) as r:
        assert r.status in (200, 201), r.status


_ATHENA_TYPES = (
    ("MAP", "map(varchar, varchar)"),
    ("TIMESTAMP", "timestamp(3)"),
    ("DATE", "date"),
    ("DOUBLE", "double"),
    ("FLOAT", "double"),
    ("DECIMAL", "decimal(18,6)"),
    ("BIGINT", "bigint"),
    ("INT", "integer"),
    ("HUGEINT", "bigint"),
    ("VARCHAR", "varchar"),
)


def athena_type(duckdb_type: str) -> str:
    """The Athena (Trino) type an AWS CUR table gives the column DuckDB reads as ``duckdb_type``."""
    upper = str(duckdb_type).upper()
    return next((a for d, a in _ATHENA_TYPES if upper.startswith(d)), "varchar")


def athena_result(frame: pd.DataFrame, types: list[str] | None = None) -> dict:
    """A query result as Athena's GetQueryResults sends it (header row first, every cell as
    text, NULL as an empty cell), for moto's ``/moto-api/static/athena/query-results``."""

    def cell(value: Any, kind: str) -> dict:
        if value is None or (not isinstance(value, str) and pd.isna(value)):
            return {}
        if kind.startswith("timestamp"):
            return {"VarCharValue": pd.Timestamp(value).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}
        if kind == "date":
            return {"VarCharValue": pd.Timestamp(value).strftime("%Y-%m-%d")}
        if kind in ("bigint", "integer"):
            return {"VarCharValue": str(int(value))}
        if kind == "double":
            return {"VarCharValue": repr(float(value))}
        return {"VarCharValue": str(value)}

    if types is None:
        types = []
        for name in frame.columns:
            dtype = frame[name].dtype
            if pd.api.types.is_datetime64_any_dtype(dtype):
                types.append("timestamp(3)")
            elif pd.api.types.is_integer_dtype(dtype):
                types.append("bigint")
            elif pd.api.types.is_float_dtype(dtype):
                types.append("double")
            else:
                types.append("varchar")
    header = {"Data": [{"VarCharValue": str(c)} for c in frame.columns]}
    rows = [
        {"Data": [cell(v, k) for v, k in zip(values, types, strict=True)]}
        for values in frame.itertuples(index=False)
    ]
    info = [
        {"Name": str(c), "Label": str(c), "Type": k, "Nullable": "UNKNOWN"}
        for c, k in zip(frame.columns, types, strict=True)
    ]
    return {"rows": [header, *rows], "column_info": info}


def recording_ledger(path: Path) -> Any:
    """A DuckDB ledger over ``path`` that keeps the result of every query it runs (in
    ``answers``), to answer the same queries through moto's Athena."""
    from srifty_kit.tables.ledger import DuckDBLedger

    class Recording(DuckDBLedger):
        answers: list[pd.DataFrame]

        def query(self, sql: str) -> pd.DataFrame:
            result = super().query(sql)
            self.answers.append(result)
            return result

        def information_schema(self) -> pd.DataFrame:
            """What Athena's information_schema.columns says of a table with these files."""
            rows = self._con.execute(f"DESCRIBE SELECT * FROM {self.relation()}").fetchall()
            return pd.DataFrame(
                [(r[0], athena_type(r[1])) for r in rows if r[0] != "filename"],
                columns=["column_name", "data_type"],
            )

    ledger = Recording(path)
    ledger.answers = []
    return ledger


# -- correlated step times (the stopping rule, variance, run-to-run variance) -----------------


def ar1_steps(
    rng: np.random.Generator, n: int, rho: float, cv: float, mean: float = 1.0
) -> np.ndarray:
    """Stationary AR(1) step times around ``mean``: coefficient of variation ``cv``, lag-1
    autocorrelation ``rho`` (successive steps of one run, as a profiler sees them)."""
    e = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = e[0]
    scale = np.sqrt(1 - rho * rho)
    for i in range(1, n):
        x[i] = rho * x[i - 1] + scale * e[i]
    return mean * (1 + cv * x)


# -- synthetic ring-all-reduce measurements on a 4-GPU machine (model tests) --------------

TRUE = StepParams(
    alpha_c=0.05,
    beta_c=0.004,
    lat_intra=0.001,
    bw_intra=0.02,
    lat_inter=0.002,
    bw_inter=0.15,
    share=0.3,
    gamma=1.2,
)


def cluster(max_nodes: int, gpus: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Every (nodes, workers) shape up to ``max_nodes`` nodes of ``gpus`` GPUs."""
    shapes = [(k, n) for k in range(1, max_nodes + 1) for n in range(k, k * gpus + 1)]
    return tuple(np.array(a) for a in zip(*shapes, strict=True))


def measurements(
    max_nodes: int,
    min_nodes: int = 1,
    model: str = "resnet",
    params: StepParams = TRUE,
    repeats: int = 1,
    noise: float = 0.03,
    seed: int = 0,
    sync: bool = True,
) -> pd.DataFrame:
    """Synthetic measurements of every shape and four batch sizes on a 4-GPU machine."""
    k, n = cluster(max_nodes)
    keep = k >= min_nodes
    k, n = k[keep], n[keep]
    bsz = np.array([8, 16, 32, 64])
    kk, bb = np.meshgrid(np.arange(k.size), bsz, indexing="ij")
    sim = simulate(params, k[kk.ravel()], n[kk.ravel()], bb.ravel(), noise, repeats, seed)
    table = pd.DataFrame(sim).assign(model=model, instance_type="g4dn.12xlarge", gpus_per_node=4)
    return table if sync else table.drop(columns="sync_time_s")


def configs(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=["step_time_s", "sync_time_s"], errors="ignore")


# -- notebooks ----------------------------------------------------------------------------


def run_notebook(name: str, folder: Path, **parameters: Any) -> Any:
    """Execute ``notebooks/<name>.ipynb`` headless with papermill in ``folder`` (its working
    directory, where it writes), with ``parameters`` injected; the executed notebook."""
    import nbformat
    import papermill

    executed = folder / f"{name}.ipynb"
    papermill.execute_notebook(
        str(REPO / "notebooks" / f"{name}.ipynb"),
        str(executed),
        kernel_name="python3",
        cwd=str(folder),
        parameters=parameters,
        progress_bar=False,
    )
    return nbformat.read(executed, as_version=4)


def parameter_names(name: str) -> set[str]:
    """The names the committed notebook's cell tagged ``parameters`` assigns (exactly one such
    cell is required)."""
    import nbformat

    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    return {line.split("=")[0].strip() for line in tagged[0].source.splitlines() if "=" in line}
