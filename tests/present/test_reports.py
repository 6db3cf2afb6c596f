"""Notebook reports run for real: papermill with a Jupyter kernel, then nbconvert to HTML."""

from __future__ import annotations

import json
import os
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from srifty_kit.errors import InputError
from srifty_kit.present.reports import find_notebook, run_report
from tests.builders import moto_server

pytestmark = pytest.mark.slow


def _notebook(path, body: str):
    params = new_code_cell("budget_usd = 1.0")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.metadata["language_info"] = {"name": "python"}  # papermill needs the language
    nbformat.write(nb, path)
    return path


def test_report_runs_with_parameters_and_exports_html(tmp_path):
    nb = _notebook(tmp_path / "r.ipynb", "print(f'budget is {budget_usd * 2:.1f} dollars')")
    report = run_report(nb, {"budget_usd": 21.0}, tmp_path / "out", progress=False)
    assert report.html is not None and report.html.exists()
    assert "budget is 42.0 dollars" in report.html.read_text()
    # the executed notebook is kept beside the HTML, with the injected parameters
    assert "budget_usd = 21.0" in report.notebook.read_text()


def test_input_error_inside_the_notebook_comes_back_as_one_and_keeps_the_run(tmp_path):
    body = (
        "print('measured before the failure')\n"
        "from srifty_kit.errors import InputError\n"
        "raise InputError('budget must be positive', column='budget_usd')"
    )
    nb = _notebook(tmp_path / "bad.ipynb", body)
    with pytest.raises(InputError, match="budget must be positive"):
        run_report(nb, {"budget_usd": -1.0}, tmp_path / "out", progress=False)
    executed = (tmp_path / "out" / "bad.failed.ipynb").read_text()
    assert "measured before the failure" in executed
    assert not (tmp_path / "out" / "bad.ipynb").exists()  # no report claims to be whole


def test_unknown_notebook_name_suggests_the_shipped_ones(tmp_path):
    with pytest.raises(InputError, match="no notebook"):
        find_notebook(tmp_path / "nope")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"parameters": None}, "parameters must be a dict"),  # TypeError in papermill
        ({"parameters": [("budget_usd", 2.0)]}, "parameters must be a dict"),  # TypeError
        ({"out_dir": "a_file"}, "is a file, not a folder"),  # FileExistsError
        ({"out_dir": "a_file/sub"}, "cannot make the report folder"),  # NotADirectoryError
        ({"out_dir": None}, "the report folder must be a file path"),  # TypeError
        ({"kernel_name": "pyhton3"}, "no Jupyter kernel named 'pyhton3' .did you mean 'python3'"),
    ],
    ids=["none", "list", "file", "under-a-file", "no-folder", "kernel"],
)
def test_a_run_that_cannot_start_is_one_input_error_before_any_kernel(tmp_path, change, words):
    nb = _notebook(tmp_path / "r.ipynb", "print('ran')")
    (tmp_path / "a_file").write_text("mine")
    args = {"parameters": {}, "out_dir": tmp_path / "out", "progress": False, **change}
    if isinstance(args["out_dir"], str):
        args["out_dir"] = tmp_path / args["out_dir"]
    with pytest.raises(InputError, match=words) as err:
        run_report(nb, args.pop("parameters"), args.pop("out_dir"), **args)
    assert "to fix" in str(err.value) and "\n" not in str(err.value)
    assert (tmp_path / "a_file").read_text() == "mine"
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was made


def test_a_rerun_that_fails_never_replaces_the_last_good_report(tmp_path):
    # as `srifty demo` reruns its search report: no failed_name given, yet the half-run
    # notebook goes beside the last good one, never over it
    from srifty_kit.present.reports import ReportFailed

    nb = _notebook(tmp_path / "r.ipynb", "print(f'answer {100 / budget_usd:.1f}')")
    out = tmp_path / "out"
    good = run_report(nb, {"budget_usd": 4.0}, out, progress=False)
    page, executed = good.html.read_bytes(), good.notebook.read_bytes()
    with pytest.raises(ReportFailed):
        run_report(nb, {"budget_usd": 0.0}, out, progress=False)
    assert good.html.read_bytes() == page and good.notebook.read_bytes() == executed
    assert "ZeroDivisionError" in (out / "r.failed.ipynb").read_text()
    run_report(nb, {"budget_usd": 5.0}, out, progress=False)
    assert "answer 20.0" in good.html.read_text() and not (out / "r.failed.ipynb").exists()


# what a kernel resolved for itself and printed; assembled at run time (no key in the source)
PROCESS_SECRET = "kErNeLsEcReT/" + "0123456789abcdefghijklmnopqrstu"
PROCESS_TOKEN = "IQoJb3JpZ2luX2Vj" + "KernelOnlySessionToken0123456789"


@pytest.fixture
def aws_home(tmp_path, monkeypatch):
    """A temporary HOME with ~/.aws of its own and nothing of the user's AWS setup."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return home


def _printing_notebook(path, resolve: str):
    """A report whose cell resolves the AWS credentials of ``aws_profile`` and prints them."""
    params = new_code_cell("aws_profile = None")
    params.metadata["tags"] = ["parameters"]
    show = new_code_cell(
        f"{resolve}\n"
        "c = session.get_credentials().get_frozen_credentials()\n"
        "print(f'secret={c.secret_key} token={c.token}')"
    )
    nb = new_notebook(cells=[params, show])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, path)
    return path


def _assert_masked(report, *secrets: str) -> None:
    executed, page = report.notebook.read_text(), report.html.read_text()
    for text in (executed, page):
        assert "secret=*** token=***" in text  # the cell did print them, masked
        for secret in secrets:
            assert secret not in text


def test_credentials_a_credential_process_gives_the_kernel_are_masked(aws_home, tmp_path):
    # a profile whose keys are in no file: a command prints them (as aws-vault, SSO helpers do)
    script = tmp_path / "creds.py"
    doc = {
        "Version": 1,
        "AccessKeyId": "ASIA" + "KERNELPROCESS7Q2",
        "SecretAccessKey": PROCESS_SECRET,
        "SessionToken": PROCESS_TOKEN,
    }
    script.write_text(f"import json\nprint(json.dumps({doc!r}))\n")
    (aws_home / ".aws" / "config").write_text(
        f"[profile reporter]\ncredential_process = {sys.executable} {script}\n"
    )
    nb = _printing_notebook(
        tmp_path / "r.ipynb", "import boto3\nsession = boto3.Session(profile_name=aws_profile)"
    )
    report = run_report(nb, {"aws_profile": "reporter"}, tmp_path / "out", progress=False)
    _assert_masked(report, PROCESS_SECRET, PROCESS_TOKEN)


def test_an_assumed_roles_session_credentials_are_masked(aws_home, tmp_path, monkeypatch):
    # AssumeRole (moto's STS) gives new credentials at every call: the kernel's (the session
    # the Athena ledger builds) must be the very ones the report's process learned
    (aws_home / ".aws" / "credentials").write_text(
        "[base]\naws_access_key_id = " + "AKIA" + "BASEPROFILEKEY12\n"
        "aws_secret_access_key = base/" + "secret0123456789abcdefghijklmno\n"
    )
    (aws_home / ".aws" / "config").write_text(
        "[profile reporter]\nrole_arn = arn:aws:iam::123456789012:role/reports\n"
        "source_profile = base\n"
    )
    nb = _printing_notebook(
        tmp_path / "r.ipynb",
        "from srifty_kit.tables.aws_errors import shared_session\n"
        "session = shared_session(aws_profile)",
    )
    with moto_server() as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        report = run_report(nb, {"aws_profile": "reporter"}, tmp_path / "out", progress=False)
    _assert_masked(report)
    cached = [json.loads(p.read_text()) for p in (aws_home / ".aws/boto/cache").glob("*.json")]
    assert len(cached) == 1  # one AssumeRole, shared by the process and its kernel
    _assert_masked(report, cached[0]["Credentials"]["SecretAccessKey"])
