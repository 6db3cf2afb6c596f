"""Credentials of an instance role (EC2 instance metadata, IMDSv2) or a container role
(ECS/EKS) are masked in a report like any other: a metadata service stand-in on 127.0.0.1, a
real report whose kernel resolves them through boto3 and prints them; and off EC2 with nothing
configured, the process that runs the report touches no network to find out."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from secrets import token_hex

import pytest

from srifty_kit.tables import aws_errors, ec2_host, redact
from tests.present.test_reports import _assert_masked, _printing_notebook, aws_home  # noqa: F401

# every test here runs with a HOME of its own and no AWS_* variable: none of the user's setup
pytestmark = pytest.mark.usefixtures("aws_home")
ROLE = "srifty-reports"


class MetadataService:
    """IMDSv2 (``PUT /latest/api/token``, then the role's name and credentials under
    ``/latest/meta-data/iam/security-credentials/``, the session token required) and the
    container credentials endpoint (``/container-credentials``), on 127.0.0.1, serving one
    role's temporary credentials of the real shape; each request's method and path is kept.
    Each instance has credentials of its own: masks learned by another test do not help."""

    def __init__(self) -> None:
        # assembled at run time, so that the source holds nothing shaped like a key
        self.key_id = "ASIA" + token_hex(8).upper()  # 20 characters, as AWS's
        self.secret = base64.b64encode(os.urandom(30)).decode()  # 40, with '+' and '/'
        self.token = "IQoJb3JpZ2luX2Vj" + base64.b64encode(os.urandom(600)).decode()
        self.session_token = "imds-" + token_hex(20)  # IMDSv2's own, not a credential
        self.requests: list[str] = []
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=6)
        self.document = {
            "Code": "Success",
            "LastUpdated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "Type": "AWS-HMAC",
            "AccessKeyId": self.key_id,
            "SecretAccessKey": self.secret,
            "Token": self.token,
            "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def answer(self, status: int, body: str, ctype: str = "text/plain") -> None:
                out = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_PUT(self) -> None:
                service.requests.append(f"PUT {self.path}")
                if self.path != "/latest/api/token":
                    return self.answer(404, "not found")
                if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self.answer(400, "missing ttl")
                self.answer(200, service.session_token)

            def do_GET(self) -> None:
                service.requests.append(f"GET {self.path}")
                if self.path == "/container-credentials":
                    return self.answer(200, json.dumps(service.document), "application/json")
                if self.headers.get("X-aws-ec2-metadata-token") != service.session_token:
                    return self.answer(401, "unauthorized")  # IMDSv2 only
                base = "/latest/meta-data/iam/security-credentials/"
                if self.path == base:
                    return self.answer(200, ROLE)
                if self.path == base + ROLE:
                    return self.answer(200, json.dumps(service.document), "application/json")
                self.answer(404, "not found")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def metadata():
    service = MetadataService()
    yield service
    service.close()


@pytest.fixture
def host_files(tmp_path, monkeypatch):
    """The files that tell an EC2 instance, as written by the test (none at first): this
    host's own say nothing, whatever machine runs the tests."""
    folder = tmp_path / "sys"
    folder.mkdir()
    paths = tuple(str(folder / n) for n in ("board_asset_tag", "hypervisor_uuid", "product_uuid"))
    monkeypatch.setattr(ec2_host, "EC2_HOST_FILES", paths)
    return folder


@pytest.fixture
def connections(monkeypatch) -> list:
    """Every address this process tries to connect to; none is reached (refused at once)."""
    tried: list = []

    def connect(sock, address):
        tried.append(address)
        raise ConnectionRefusedError(f"the test allows no connection to {address}")

    monkeypatch.setattr(socket.socket, "connect", connect)
    return tried


# the files as EC2 fills them, and as other machines do (examples from AWS's user guide)
EC2_SIGNS = {
    "board_asset_tag": "i-0af01c0123456789a\n",  # Nitro
    "hypervisor_uuid": "ec2e1916-9099-7caf-fd21-012345abcdef\n",  # Xen
    "product_uuid": "EC2E1916-9099-7CAF-FD21-012345ABCDEF\n",
}
OTHER_HOSTS = {
    "board_asset_tag": "Default string\n",
    "hypervisor_uuid": "3f2504e0-4f89-11d3-9a0c-0305e82c3301\n",
    "product_uuid": "4C4C4544-0042-3510-8052-B4C04F384D32\n",
}


@pytest.mark.parametrize("name", sorted(EC2_SIGNS))
def test_an_ec2_host_is_told_from_any_one_of_its_files(host_files, name):
    for other, text in OTHER_HOSTS.items():
        (host_files / other).write_text(text)
    assert not ec2_host.on_ec2()
    (host_files / name).write_text(EC2_SIGNS[name])
    assert ec2_host.on_ec2()


def test_a_little_endian_uuid_is_told_too(host_files):
    # some SMBIOS versions write the first field byte-reversed: 45E12AEC for EC2AE145
    (host_files / "product_uuid").write_text("45E12AEC-DCD1-B213-94ED-012345ABCDEF\n")
    assert ec2_host.on_ec2()


def test_off_ec2_with_nothing_configured_no_network_is_touched(host_files, metadata, connections):
    for name, text in OTHER_HOSTS.items():
        (host_files / name).write_text(text)
    aws_errors.remember_resolved(None)
    assert connections == [] and metadata.requests == []


def test_on_ec2_the_instance_metadata_is_asked(host_files, connections):
    (host_files / "board_asset_tag").write_text(EC2_SIGNS["board_asset_tag"])
    aws_errors.remember_resolved(None)  # refused at once: nothing learned, nothing raised
    assert connections and all(host == "169.254.169.254" for host, _ in connections)


def test_metadata_disabled_is_respected_even_on_ec2(host_files, metadata, connections, monkeypatch):
    (host_files / "board_asset_tag").write_text(EC2_SIGNS["board_asset_tag"])
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    aws_errors.remember_resolved(None)
    assert connections == [] and metadata.requests == []


def test_an_endpoint_set_for_botocore_is_asked_with_imdsv2(host_files, metadata, monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url)
    aws_errors.remember_resolved(None)
    assert metadata.requests[0] == "PUT /latest/api/token"
    assert f"GET /latest/meta-data/iam/security-credentials/{ROLE}" in metadata.requests
    said = redact.redact(f"secret {metadata.secret} token {metadata.token}")
    assert said == f"secret {redact.MASK} token {redact.MASK}"


@pytest.mark.slow
@pytest.mark.parametrize("source", ["instance", "container"])
def test_a_roles_credentials_the_kernel_prints_are_masked(
    host_files, metadata, monkeypatch, tmp_path, source
):
    # the kernel inherits this environment: it asks the same service, as boto3 does on EC2
    if source == "instance":
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url)
        asked = f"GET /latest/meta-data/iam/security-credentials/{ROLE}"
    else:  # an ECS task's or an EKS pod's role (botocore allows http on a loopback address)
        monkeypatch.setenv(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI", metadata.url + "container-credentials"
        )
        asked = "GET /container-credentials"
    from srifty_kit.present.reports import run_report

    nb = _printing_notebook(
        tmp_path / "r.ipynb", "import boto3\nsession = boto3.Session(profile_name=aws_profile)"
    )
    report = run_report(nb, {"aws_profile": None}, tmp_path / "out", progress=False)
    _assert_masked(report, metadata.secret, metadata.token)
    assert metadata.requests.count(asked) == 2  # the report's process and its kernel


def test_the_profiler_asks_for_its_instance_type_on_ec2_only(host_files, connections, monkeypatch):
    from srifty_kit.measure import host

    monkeypatch.delenv("SRIFTY_INSTANCE_TYPE", raising=False)
    for name, text in OTHER_HOSTS.items():
        (host_files / name).write_text(text)
    host.instance_type.cache_clear()
    try:
        assert host.instance_type("cpu").startswith("local-cpu-")
        assert connections == []  # off EC2 no profile waits on the metadata address
        (host_files / "board_asset_tag").write_text(EC2_SIGNS["board_asset_tag"])
        host.instance_type.cache_clear()
        assert host.instance_type("cpu").startswith("local-cpu-")  # refused: a local label
        assert connections and all(h == "169.254.169.254" for h, _ in connections)
    finally:
        host.instance_type.cache_clear()
