"""The FinOps Foundation's ``focus-validator`` (PyPI) run over a FOCUS export, its findings as
rows for the weekly report's data-quality table (warnings, never refusals).

focus-validator 2.x needs Python >= 3.12 and its 1.0 release pins numpy < 2 and pandas < 3,
which this kit's environment (torch, pandas 3, numpy 2) cannot take; so it runs in a virtual
environment of its own, as a separate process: ``$SRIFTY_FOCUS_VALIDATOR`` (the path of its
``focus-validator`` command), else ``.venv-focus/bin/focus-validator`` in the repository, else
``focus-validator`` on the PATH. Where none is installed the finding says so. It ships the
rules of one FOCUS version offline (1.2 in 2.2.1) and cannot download others here, so an
export of another version is checked against those rules, and the finding says which.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pandas as pd

FINDING_COLUMNS = ("check", "rows", "detail")
_TIMEOUT_S = 300
_MAX_BYTES = 200 * 2**20  # larger files: validate their first part's rows only is not offered


def validator_command() -> str | None:
    """The ``focus-validator`` executable to run, or None when none is installed."""
    given = os.environ.get("SRIFTY_FOCUS_VALIDATOR")
    if given:
        return given if Path(given).is_file() else None
    local = Path(__file__).resolve().parents[2] / ".venv-focus" / "bin" / "focus-validator"
    if local.is_file():
        return str(local)
    return shutil.which("focus-validator")


def _version(command: str) -> str | None:
    """The newest FOCUS rules version the validator has locally (e.g. '1.2.0.1')."""
    done = _run([command, "--supported-versions", "--block-download"], command, 60)
    for line in done.stdout.splitlines():
        if line.startswith("Supported local versions:"):
            versions = [v.strip(" '\"") for v in line.split(":", 1)[1].strip(" []").split(",")]
            versions = [v for v in versions if v]
            return versions[-1] if versions else None
    return None


def _run(argv: list[str], command: str, timeout: float) -> subprocess.CompletedProcess:
    # it reads its rule files by relative path: run it from its own site-packages
    site = next(Path(command).resolve().parents[1].glob("lib/python*/site-packages"), None)
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, cwd=site, check=False
    )


def validate_focus(files: list[Path]) -> pd.DataFrame:
    """Run focus-validator over each FOCUS file; one finding row per column whose rules
    failed (``FINDING_COLUMNS``), or one row saying why it did not run.

    Args:
        files: the export's files (CSV or Parquet).

    Returns:
        The findings; ``rows`` is the number of rules failed for that column.
    """
    command = validator_command()
    if command is None:
        return _finding(
            "focus-validator not run",
            "not installed: make a Python >= 3.12 venv at .venv-focus and pip install "
            "focus-validator there (or set SRIFTY_FOCUS_VALIDATOR)",
        )
    try:
        version = _version(command)
    except (OSError, subprocess.TimeoutExpired) as err:
        return _finding("focus-validator not run", f"it could not start ({type(err).__name__})")
    if version is None:
        return _finding("focus-validator not run", "it has no FOCUS rules installed")
    failed: dict[str, set[str]] = defaultdict(set)
    checked = 0
    notes = []
    for path in files:
        if path.stat().st_size > _MAX_BYTES or path.name.endswith(".gz"):
            notes.append(f"{path.name} not validated (gzip or over 200 MiB)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "report.xml"
            argv = [command, "--data-file", str(path.resolve()), "--validate-version", version]
            argv += ["--block-download", "--output-type", "unittest"]
            argv += ["--output-destination", str(report)]
            if path.name.endswith(".parquet"):
                argv += ["--data-format", "parquet"]
            try:
                done = _run(argv, command, _TIMEOUT_S)
            except subprocess.TimeoutExpired:
                notes.append(f"{path.name}: no answer within {_TIMEOUT_S} s")
                continue
            if not report.is_file():
                # its last line of stderr says why (a traceback's error, e.g. an import)
                said = (done.stderr or "").strip().splitlines()[-1:] or ["no message"]
                notes.append(f"{path.name}: the validator wrote no report ({said[0][:200]})")
                continue
            checked += 1
            for rule, column in _failures(report):
                failed[column].add(rule)
    rows = [
        {
            "check": f"focus-validator (FOCUS {version} rules): {column}",
            "rows": len(rules),
            "detail": "rules failed: "
            + ", ".join(sorted(rules)[:4])
            + (f" and {len(rules) - 4} more" if len(rules) > 4 else ""),
        }
        for column, rules in sorted(failed.items())
    ]
    if checked and not rows:
        rows.append(
            {"check": f"focus-validator (FOCUS {version} rules)", "rows": 0, "detail": "passed"}
        )
    rows += [{"check": "focus-validator", "rows": 0, "detail": n} for n in notes]
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS))


def _failures(report: Path) -> list[tuple[str, str]]:
    """(rule id, column) of every failed test case in the validator's JUnit XML."""
    out = []
    try:
        root = ET.parse(report).getroot()
    except ET.ParseError:
        return out
    for case in root.iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            continue
        rule = failure.get("name") or case.get("name", "?").split(" ")[0]
        out.append((rule, rule.split("-", 1)[0]))
    return out


def _finding(check: str, detail: str) -> pd.DataFrame:
    return pd.DataFrame([{"check": check, "rows": 0, "detail": detail}])
