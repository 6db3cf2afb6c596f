"""Credentials never leave the process: an AWS stand-in on 127.0.0.1 that echoes the signed
request back in its errors, the real ``srifty`` commands against it, and every byte they
print or write searched for the fake key id, secret and session token.

The server answers each request as the service would answer an error it has no entry for:
EC2's XML (``InternalError``, ``InvalidParameterValue``) and Athena's JSON 1.1
(``{"__type": "InvalidRequestException", "message": ...}``), each message quoting the bare key id
and token, the ``Authorization`` and ``X-Amz-Security-Token`` headers and the canonical
request, as a misbehaving proxy or a debugging endpoint does.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from secrets import token_hex
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

import nbformat
import pytest

from srifty_kit.tables.redact import MASK, redact, remember, scrub
from tests.builders import REPO, require_athena_json, run_srifty

# built at run time so that secret scanners do not flag the file; the key has the real shape
KEY_ID = "AKIA" + "SRIFTYREDACT" + token_hex(2).upper()
SECRET = "sRiFtY/redact+Secret/" + token_hex(10)
TOKEN = "IQoJb3JpZ2luX2Vj" + "sriftyRedactToken" + token_hex(12)
SECRETS = (KEY_ID, SECRET, TOKEN)
WEEK = "2026-11-23"


def assert_clean(*texts: str | bytes, also: tuple[str, ...] = ()) -> None:
    """None of the fake credentials (nor ``also``) in any of ``texts``."""
    for text in texts:
        text = text.decode(errors="replace") if isinstance(text, bytes) else text
        for secret in (*SECRETS, *also):
            assert secret not in text


def files_under(root: Path) -> dict[Path, bytes]:
    """Every file under ``root`` (hidden ones included) with its bytes."""
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- the echoing AWS stand-in


class EchoingAws:
    """An HTTP server on 127.0.0.1 answering every request with an AWS error that quotes the
    request: EC2 (query protocol, XML) with ``ec2_error`` = (status, code), Athena and the
    Pricing API (JSON 1.1, told apart by X-Amz-Target) with ``json_error``."""

    def __init__(self) -> None:
        self.ec2_error = (500, "InternalError")
        self.json_error = (400, "InvalidRequestException")
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append(self.headers.get("X-Amz-Target", "ec2"))
                echo = server.echo(self, body)
                if self.headers.get("X-Amz-Target"):
                    status, code = server.json_error
                    doc = {"__type": code, "message": echo, "AthenaErrorCode": "INVALID_INPUT"}
                    out, ctype = json.dumps(doc).encode(), "application/x-amz-json-1.1"
                else:
                    status, code = server.ec2_error
                    out = (
                        "<?xml version='1.0' encoding='UTF-8'?><Response><Errors><Error>"
                        f"<Code>{code}</Code><Message>{escape(echo)}</Message></Error></Errors>"
                        "<RequestID>echo-0001</RequestID></Response>"
                    ).encode()
                    ctype = "text/xml"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @staticmethod
    def echo(handler: BaseHTTPRequestHandler, body: bytes) -> str:
        """What a debugging endpoint says back: the bare key id and token first (so that a
        shortened message still holds them), the signed headers, the canonical request."""
        auth = handler.headers.get("Authorization", "")
        token = handler.headers.get("X-Amz-Security-Token", "")
        found = re.search(r"Credential=([^/]+)/", auth)
        key_id = found.group(1) if found else ""
        signed = re.search(r"SignedHeaders=([^,\s]+)", auth)
        names = signed.group(1).split(";") if signed else []
        url = urlsplit(handler.path)
        canonical = "\n".join(
            [
                handler.command,
                url.path or "/",
                url.query,
                *(f"{n}:{(handler.headers.get(n) or '').strip()}" for n in names),
                "",
                ";".join(names),
                hashlib.sha256(body).hexdigest(),
            ]
        )
        return (
            f"key {key_id} token {token} rejected. Authorization: {auth} "
            f"X-Amz-Security-Token: {token} The canonical request was:\n{canonical}"
        )

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@pytest.fixture(autouse=True)
def credentials_in_env(monkeypatch) -> None:
    """The fake credentials in this process's environment too, where a user's would be."""
    for name, value in zip(
        ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"), SECRETS, strict=True
    ):
        monkeypatch.setenv(name, value)


@pytest.fixture
def aws():
    require_athena_json()
    server = EchoingAws()
    yield server
    server.close()


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """The environment with the fake credentials (and a session token), none of the user's
    AWS setup."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    out.update(
        AWS_ACCESS_KEY_ID=KEY_ID,
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_SESSION_TOKEN=TOKEN,
        AWS_CONFIG_FILE=str(tmp_path / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-aws-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_DEFAULT_REGION="us-east-1",
    )
    return out


@pytest.fixture
def old_catalog(tmp_path) -> Path:
    path = tmp_path / "catalog.csv"
    path.write_bytes((REPO / "data" / "ec2_catalog_us-east-1.csv").read_bytes())
    return path


def refresh(env: dict[str, str], out: Path, endpoint: str, *more: str):
    return run_srifty(
        "catalog", "refresh", "--region", "us-east-1", "--out", str(out),
        "--endpoint-url", endpoint, "--max-attempts", "1", *more,
        env=env, timeout=120,
    )  # fmt: skip


# ---------------------------------------------------------------- the redaction itself


@pytest.mark.parametrize(
    "text, kept",
    [
        (f"key {KEY_ID} here", "key *** here"),
        # key-shaped strings are assembled here, so the source holds nothing that looks like one
        ("an ASIA key " + "ASIA" + "ABCDEFGHIJKLMNOP" + " here", "an ASIA key *** here"),
        (
            "Authorization: AWS4-HMAC-SHA256 Credential="
            + "AKIA"
            + "X" * 16
            + "/20261202/us-east-1/"
            "ec2/aws4_request, SignedHeaders=host;x-amz-date, Signature=9f2c0ab1 next: 1",
            "Authorization: *** next: 1",
        ),
        (
            "{'Authorization': b'AWS4-HMAC-SHA256 Credential=K/2026/x, SignedHeaders=host, "
            "Signature=abc', 'X-Amz-Security-Token': b'tok/en+=='}",
            "{'Authorization': b'***', 'X-Amz-Security-Token': b'***'}",
        ),
        ("Authorization: Basic dXNlcjpodW50ZXIy; to fix: renew", "Authorization: ***; to fix"),
        (
            "GET /k?X-Amz-Credential=ID%2F2026%2Fus-east-1&X-Amz-Signature=ff00"
            "&X-Amz-Security-Token=IQo%2Fzz HTTP/1.1",
            "X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Security-Token=*** HTTP/1.1",
        ),
        ("x-amz-security-token:IQoJsometoken\ncontent-type;host", "x-amz-security-token:***\n"),
        (
            '{"SecretAccessKey": "wJalr/K7MDENG", "SessionToken": "FwoG"}',
            '"SecretAccessKey": "***"',
        ),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "aws_secret_access_key = ***"),
        (
            "cannot reach https://user:hunter2@127.0.0.1:4000/ (SSLError)",
            "https://user:***@127.0.0.1:4000/ (SSLError)",
        ),
    ],
)
def test_every_credential_shape_is_masked_and_the_rest_kept(text, kept):
    out = redact(text)
    assert kept in out
    for secret in ("XXXXXXXXXXXXXXXX", "9f2c0ab1", "tok/en", "dXNlcjpodW50ZXIy", "ff00"):
        assert secret not in out
    for secret in ("IQo%2Fzz", "IQoJsometoken", "wJalr", "FwoG", "hunter2", KEY_ID):
        assert secret not in out
    assert redact(out) == out  # redacting twice changes nothing


def test_environment_and_remembered_credentials_are_masked_wherever_they_stand():
    profile_secret = "pRoFiLe" + token_hex(8)
    remember(profile_secret)
    text = f"a {SECRET} b {TOKEN}c {profile_secret} d " + SECRET.replace("/", "%2F").replace(
        "+", "%2B"
    )
    assert redact(text) == f"a {MASK} b {MASK}c {MASK} d {MASK}"


@pytest.mark.parametrize(
    "text",
    [
        "s3://reports-bucket/athena/ and http://127.0.0.1:8080/path@v2",
        "SignatureDoesNotMatch on DescribeInstanceTypes (HTTP 403)",
        "/tmp/pytest-of-root/test_a0/Signature.csv: column 'authorization_id'",
        "AKIA is a prefix; AKIAshort is not a key",
    ],
)
def test_text_without_credentials_is_left_alone(text):
    assert redact(text) == text


def test_scrub_redacts_every_string_of_a_notebook_but_not_image_payloads():
    png = "iVBORw0KGgo" + KEY_ID  # stands for base64 that is not scanned
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("print(token)", outputs=[])],
        metadata={"note": f"token {TOKEN}"},
    )
    nb.cells[0].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"key {KEY_ID}\n"),
        nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": KEY_ID}),
    ]
    clean = scrub(nb)
    assert isinstance(clean, nbformat.NotebookNode)
    assert clean.cells[0].outputs[0].text == "key ***\n"
    assert clean.cells[0].outputs[1].data == {"image/png": png, "text/plain": MASK}
    assert TOKEN not in json.dumps(clean.metadata)


def test_log_records_are_redacted_whatever_logger_and_handler(caplog):
    from srifty_kit.tables import redact as module

    module.install_logging()
    caplog.set_level(logging.DEBUG)
    logging.getLogger("botocore.endpoint.deep").debug("headers={'Authorization': b'%s'}", KEY_ID)
    try:
        raise RuntimeError(f"token {TOKEN}")
    except RuntimeError:
        logging.getLogger("some.lib").exception("failed with %s", TOKEN)
    assert "Traceback" in caplog.text and MASK in caplog.text
    assert_clean(caplog.text, *(r.getMessage() for r in caplog.records))


def test_warnings_and_a_bugs_traceback_are_redacted(env):
    from srifty_kit.cli.command import _one_line_warning

    sink = io.StringIO()
    _one_line_warning(f"token {TOKEN}\nkey {KEY_ID}", UserWarning, "x.py", 1, file=sink)
    assert sink.getvalue() == "srifty: warning: token *** key ***\n"
    code = (
        "import os\nfrom srifty_kit.tables import redact\nredact.install()\n"
        "raise RuntimeError('token ' + os.environ['AWS_SESSION_TOKEN'])\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert run.returncode == 1
    assert "Traceback" in run.stderr and "RuntimeError: token ***" in run.stderr
    assert_clean(run.stdout, run.stderr)


def test_an_aws_error_is_one_redacted_phrase_naming_its_code():
    from botocore.exceptions import ClientError

    from srifty_kit.tables import aws_errors

    response = {
        "Error": {"Code": "InternalError", "Message": f"key {KEY_ID} token {TOKEN} " * 40},
        "ResponseMetadata": {"HTTPStatusCode": 500},
    }
    phrase = aws_errors.describe(ClientError(response, "DescribeInstanceTypes"))
    assert phrase.startswith("InternalError (HTTP 500) on DescribeInstanceTypes: key *** token")
    assert len(phrase) < 250 and "\n" not in phrase
    assert_clean(phrase)


# ---------------------------------------------------------------- the commands


@pytest.mark.slow
@pytest.mark.parametrize(
    "status, code, exit_code",
    [
        (500, "InternalError", 1),  # AWS failed: nothing the user can change
        (400, "InvalidParameterValue", 2),  # refused: the endpoint or the region is wrong
        (403, "SomethingNewException", 2),  # a code no table knows
    ],
)
def test_catalog_refresh_with_an_unknown_aws_error_is_one_redacted_line(
    aws, env, old_catalog, tmp_path, status, code, exit_code
):
    aws.ec2_error = (status, code)
    before = files_under(tmp_path)
    run = refresh(env, old_catalog, aws.url)
    assert aws.requests == ["ec2"]  # the server was asked and echoed the signed request
    assert run.returncode == exit_code, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("srifty catalog refresh: error: ")
    assert f"{code} (HTTP {status}) on DescribeInstanceTypeOfferings" in lines[0]
    assert MASK in lines[0]  # the echo was quoted, masked
    assert files_under(tmp_path) == before  # the old catalog byte-identical, nothing new
    assert_clean(run.stdout, run.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["http", "https", "ftp"])
def test_a_password_in_the_endpoint_url_is_never_echoed(aws, env, old_catalog, tmp_path, scheme):
    aws.ec2_error = (400, "InvalidParameterValue")
    before = files_under(tmp_path)
    run = refresh(env, old_catalog, f"{scheme}://user:hunter2@127.0.0.1:{aws.port}")
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    # https to a plain-HTTP server: an SSL error naming the URL; ftp: argparse refuses it
    said = {
        "http": "InvalidParameterValue",
        "https": "user:***@127.0.0.1",
        "ftp": "user:***@127.0.0.1",
    }
    assert said[scheme] in run.stderr
    assert files_under(tmp_path) == before
    assert_clean(run.stdout, run.stderr, also=("hunter2",))


@pytest.mark.slow
def test_refresh_debug_logs_hold_no_credential(aws, env, monkeypatch, caplog, tmp_path):
    from srifty_kit.catalog.aws import AwsFailed, fetch_catalog

    for name, value in env.items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AwsFailed, match="InternalError"):
        fetch_catalog("us-east-1", endpoint_url=aws.url, max_attempts=1, progress=False)
    # botocore logged the signed request and the echoing response; both masked
    sent = [r.getMessage() for r in caplog.records if "Sending http request" in r.getMessage()]
    assert sent and "Authorization" in sent[0] and MASK in sent[0]
    assert_clean(caplog.text, *(r.getMessage() for r in caplog.records))


@pytest.mark.slow
@pytest.mark.parametrize("source", ["environment", "profile"])
def test_weekly_report_on_an_echoing_athena_leaks_nothing(aws, env, tmp_path, source):
    flags = []
    if source == "profile":  # the keys only in the credentials file, as `aws configure` puts them
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            del env[name]
        Path(env["AWS_SHARED_CREDENTIALS_FILE"]).write_text(
            f"[srifty-test]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n"
            f"aws_session_token = {TOKEN}\n"
        )
        flags = ["--aws-profile", "srifty-test"]
    out = tmp_path / "out"
    out.mkdir()
    # last week's good report, which a failed rerun must leave as it was
    (out / f"weekly_cost_{WEEK}.html").write_text("<p>the last good report</p>")
    (out / f"weekly_cost_{WEEK}.ipynb").write_text("{}")
    before = files_under(tmp_path)
    run = run_srifty(
        "report", "weekly", "--week", WEEK, "--out", str(out), "--quiet",
        "--athena-database", "billing", "--athena-table", "cur",
        "--athena-output", "s3://reports-bucket/athena/", "--aws-region", "us-east-1", *flags,
        env={**env, "AWS_ENDPOINT_URL": aws.url}, timeout=600,
    )  # fmt: skip
    assert "AmazonAthena.StartQueryExecution" in aws.requests
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "InvalidRequestException (HTTP 400) on StartQueryExecution" in lines[0]
    )
    assert MASK in lines[0]
    after = files_under(tmp_path)
    assert {p: after[p] for p in before} == before
    after = {p: b for p, b in after.items() if out in p.parents}  # what the command wrote
    failed = out / f"weekly_cost_{WEEK}.failed.ipynb"
    assert failed in after  # kept for inspection, and scrubbed
    assert "InvalidRequestException" in after[failed].decode()
    assert_clean(run.stdout, run.stderr, *after.values())


@pytest.mark.slow
def test_notebook_outputs_are_scrubbed_before_any_save(tmp_path):
    """What a cell prints, logs or raises is masked in the executed notebook, in a kept
    failed notebook and in the HTML, though the kernel itself knows nothing of redaction."""
    from srifty_kit.present.reports import ReportFailed, run_report

    cells = [
        nbformat.v4.new_code_cell("fail = False", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import os, sys\n"
            "print('key', os.environ['AWS_ACCESS_KEY_ID'])\n"
            "print('Authorization: AWS4-HMAC-SHA256 Credential=' + os.environ['AWS_ACCESS_KEY_ID']"
            " + '/x, Signature=0123abcd', file=sys.stderr)\n"
            "os.environ['AWS_SESSION_TOKEN']"
        ),
        nbformat.v4.new_code_cell(
            "if fail:\n    raise RuntimeError('token ' + os.environ['AWS_SESSION_TOKEN'])"
        ),
    ]
    source = tmp_path / "leaky.ipynb"
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    meta = {"kernelspec": kernel, "language_info": {"name": "python"}}
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=meta), source)
    out = tmp_path / "out"
    done = run_report(source, {}, out, progress=False, timeout_s=120)
    with pytest.raises(ReportFailed) as err:
        run_report(source, {"fail": True}, out, progress=False, timeout_s=120, failed_name="x")
    assert "raised RuntimeError: token ***" in str(err.value)
    executed, page, failed = done.notebook.read_text(), done.html.read_text(), out / "x.ipynb"
    assert "key ***" in executed and "Authorization: ***" in executed and "key ***" in page
    errors = [o for c in nbformat.read(failed, as_version=4).cells for o in c.get("outputs", [])]
    assert [o.evalue for o in errors if o.output_type == "error"] == ["token ***"]
    # every file the runs wrote (the source notebook, the test's own, is not among them)
    assert_clean(str(err.value), *files_under(out).values(), also=("0123abcd",))


LEAKY_MODEL = """
import os, torch
from srifty_kit.measure.zoo import ModelSpec

def spec():
    def make_batch(b):
        if b == 16:  # a data loader whose error quotes the URL and the key it used
            raise RuntimeError(
                "cannot fetch https://alice:hunter2@data.example/x.bin signed with "
                + os.environ["AWS_SECRET_ACCESS_KEY"] + " token " + os.environ["AWS_SESSION_TOKEN"]
            )
        return torch.randn(b, 8), torch.randint(0, 2, (b,))

    return ModelSpec(torch.nn.Linear(8, 2), make_batch, torch.nn.functional.cross_entropy,
                     lambda p: torch.optim.SGD(p, lr=0.1), "leaky")
"""


@pytest.mark.slow
def test_a_batch_size_that_failed_is_reported_and_kept_without_credentials(env, tmp_path):
    """A model's error quoting a credential is masked where the profile prints it (stdout)
    and where it keeps it (the facts JSON), as in its warning."""
    (tmp_path / "leaky.py").write_text(LEAKY_MODEL)
    before = set(files_under(tmp_path))
    run = run_srifty(
        "profile", "--model", "leaky:spec", "--batch-sizes", "8,16", "--max-seconds", "2",
        "--out", "p.csv", "--quiet", "--no-op-trace",
        cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "batch size 16: not measured: RuntimeError: cannot fetch" in run.stdout
    written = {p: b for p, b in files_under(tmp_path).items() if p not in before}
    facts = json.loads(written[tmp_path / "p.facts.json"])
    assert facts["errors"]["16"].startswith("RuntimeError: cannot fetch https://alice:***@")
    assert_clean(run.stdout, run.stderr, *written.values(), also=("hunter2",))


CUT_SHORT_MODEL = """
import os, torch
from srifty_kit.measure.zoo import ModelSpec

def _quote():  # a long message whose credential straddles the 300 characters an error keeps
    return "x" * 270 + " signed with " + os.environ["AWS_SECRET_ACCESS_KEY"]

def spec():
    def loss(out, y):
        raise RuntimeError(_quote())
    return ModelSpec(torch.nn.Linear(8, 2),
                     lambda b: (torch.randn(b, 8), torch.randint(0, 2, (b,))),
                     loss, lambda p: torch.optim.SGD(p, lr=0.1), "cut")

def broken():
    raise RuntimeError(_quote())
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, model",
    [("profile", "cut:spec"), ("profile", "cut:broken"), ("profile-dist", "cut:spec")],
)
def test_an_error_cut_short_leaves_no_piece_of_a_credential(env, tmp_path, command, model):
    (tmp_path / "cut.py").write_text(CUT_SHORT_MODEL)
    world = ["--world-sizes", "1"] if command == "profile-dist" else []
    run = run_srifty(
        command, "--model", model, "--batch-sizes", "8", "--max-seconds", "2",
        "--out", "p.csv", "--quiet", *world,
        cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "xxxx signed with ***" in run.stderr
    assert_clean(run.stdout, run.stderr, also=(SECRET[:12],))
