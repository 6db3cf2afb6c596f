"""The FinOps Foundation's focus-validator run for real (from its own venv) over a FOCUS
export: its findings are data-quality rows, never a refusal."""

from __future__ import annotations

import pytest

from srifty_kit.tables.focus_check import FINDING_COLUMNS, validate_focus, validator_command
from tests.tables.test_focus_scenarios import scenario, write


@pytest.mark.skipif(
    validator_command() is None,
    reason="focus-validator is not installed (.venv-focus or SRIFTY_FOCUS_VALIDATOR)",
)
def test_the_validator_s_failed_rules_become_one_row_per_column(tmp_path):
    path = write(scenario(), tmp_path / "focus.csv", "1.2")
    findings = validate_focus([path])
    assert list(findings.columns) == list(FINDING_COLUMNS)
    assert len(findings) > 0 and findings["check"].str.startswith("focus-validator").all()
    # the scenario has no BillingAccountId, which FOCUS requires: the validator says so
    account = findings[findings["check"].str.endswith(": BillingAccountId")]
    assert len(account) == 1 and account["rows"].iloc[0] >= 1
    assert "rules failed: BillingAccountId-" in account["detail"].iloc[0]


def test_without_the_validator_the_table_says_it_did_not_run(tmp_path, monkeypatch):
    monkeypatch.setenv("SRIFTY_FOCUS_VALIDATOR", str(tmp_path / "no-such-validator"))
    path = write(scenario(), tmp_path / "focus.csv", "1.2")
    findings = validate_focus([path])
    assert findings["check"].tolist() == ["focus-validator not run"]
    assert "not installed" in findings["detail"].iloc[0]


def test_a_validator_that_crashes_is_a_finding_that_names_its_error(tmp_path, monkeypatch):
    # a validator whose environment is broken (as pyarrow 26 over numpy 1 breaks 2.2.1): it
    # lists its rules, then dies on the data with a traceback and writes no report
    fake = tmp_path / "focus-validator"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--supported-versions*) echo "Supported local versions: [\'1.2.0.1\']";;\n'
        '*) echo "Traceback (most recent call last):" >&2\n'
        '   echo "ImportError: pyarrow requires NumPy 2.0 or newer, found 1.26.4" >&2; exit 1;;\n'
        "esac\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("SRIFTY_FOCUS_VALIDATOR", str(fake))
    path = write(scenario(), tmp_path / "focus.csv", "1.2")
    findings = validate_focus([path])
    assert len(findings) == 1
    assert findings["detail"].iloc[0] == (
        "focus.csv: the validator wrote no report "
        "(ImportError: pyarrow requires NumPy 2.0 or newer, found 1.26.4)"
    )
