"""The Athena engine against a real moto server on 127.0.0.1: the same SQL as DuckDB, polling
with backoff, results through the paginator, and every AWS failure as one clear line.

Moto runs no SQL: it answers each query with the result registered through its API, in order.
The tests register what DuckDB computed over the same files, and check both that Athena was
sent exactly the SQL built for it and that the week read back equals DuckDB's.
"""

from __future__ import annotations

import datetime as dt
import os

import boto3
import pandas as pd
import pytest

from srifty_kit.errors import CommandFailed, InputError
from srifty_kit.tables.athena import AthenaLedger, Backoff
from srifty_kit.tables.ledger import weekly_usage
from srifty_kit.tables.usage_sql import (
    ATHENA,
    SourceColumns,
    detect_format,
    examples_sql,
    negations_sql,
    normalise_sql,
    overview_sql,
    reconciliation_sql,
    week_sql,
)
from tests.builders import (
    AWS_SECRETS,
    LEDGER_WEEK,
    athena_result,
    fake_aws_env,
    moto_api,
    moto_server,
    recording_ledger,
    usage_hours,
    write_cur,
)

pytestmark = pytest.mark.slow
WEEK = dt.date.fromisoformat(LEDGER_WEEK)
OUTPUT = "s3://reports-bucket/athena/"
EXECUTION = "athena::execution"  # moto's state-managed model of a query


@pytest.fixture(scope="module")
def endpoint():
    with moto_server() as url:
        yield url


@pytest.fixture
def aws(endpoint, monkeypatch, tmp_path):
    """Fake keys, nothing of the user's AWS setup, calls to moto; a clean moto each test."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in fake_aws_env(endpoint, tmp_path).items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    moto_api(endpoint, "/moto-api/reset", "")
    yield endpoint
    moto_api(endpoint, "/moto-api/state-manager/unset-transition", {"model_name": EXECUTION})


def register(endpoint: str, frames: list[pd.DataFrame]) -> None:
    moto_api(
        endpoint,
        "/moto-api/static/athena/query-results",
        {"region": "us-east-1", "results": [athena_result(f) for f in frames]},
    )


def sent_queries() -> list[str]:
    """The SQL Athena was sent, oldest first."""
    client = boto3.client("athena", region_name="us-east-1")
    ids = client.list_query_executions()["QueryExecutionIds"]  # in the order they started
    return [client.get_query_execution(QueryExecutionId=i)["QueryExecution"]["Query"] for i in ids]


def hold_queries(endpoint: str, polls: int) -> None:
    """Moto keeps each query QUEUED, then RUNNING, for ``polls`` status calls each."""
    moto_api(
        endpoint,
        "/moto-api/state-manager/set-transition",
        {"model_name": EXECUTION, "transition": {"progression": "manual", "times": polls}},
    )


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)  # no real waiting: the schedule is what is checked


@pytest.fixture
def duckdb_week(tmp_path):
    """A CUR 2.0 export, the week DuckDB reads from it, and every result DuckDB computed."""
    hours = usage_hours()
    # one unusable line, so that the examples query runs too
    bad = hours.head(1).assign(amount=-1.0, job="negative-hours", pricing="on-demand")
    path = write_cur(pd.concat([hours, bad], ignore_index=True), tmp_path / "cur.parquet")
    ledger = recording_ledger(path)
    week = weekly_usage(ledger, WEEK)
    return ledger, week


def test_athena_reads_the_same_week_as_duckdb_with_the_same_sql(aws, duckdb_week):
    ledger, duck = duckdb_week
    schema = ledger.information_schema()
    register(aws, [schema, *ledger.answers])
    sleeps = Sleeps()
    athena = AthenaLedger("billing", "cur", OUTPUT, sleep=sleeps)
    week = weekly_usage(athena, WEEK)

    names = ("lines", "daily", "quality", "reconciliation", "outside", "examples", "negations")
    for name in names:
        got, want = getattr(week, name), getattr(duck, name)
        if name == "examples":  # Athena's "$path" is the S3 object; DuckDB's the local file
            got, want = got.drop(columns="source_file"), want.drop(columns="source_file")
        pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12)
    assert week.format == "cur2" and week.source == "athena:billing.cur"

    cols = SourceColumns.from_types(zip(schema["column_name"], schema["data_type"], strict=True))
    usage = normalise_sql(detect_format(cols, "t"), cols, ATHENA, '"billing"."cur"')
    end = WEEK + dt.timedelta(7)
    expected = [
        overview_sql(usage),
        examples_sql(usage, WEEK, end),
        reconciliation_sql(usage, WEEK, end),
        week_sql(usage, WEEK, end),
        negations_sql(usage, WEEK, end),
    ]
    sent = sent_queries()
    assert "information_schema.columns" in sent[0] and "'billing'" in sent[0]
    assert sent[1:] == expected
    assert "element_at(" in sent[1] and "json_extract_string" not in sent[1]


def test_polling_waits_longer_each_time_until_the_query_succeeds(aws, duckdb_week):
    ledger, _ = duckdb_week
    register(aws, [ledger.information_schema()])
    hold_queries(aws, 3)
    sleeps = Sleeps()
    athena = AthenaLedger("billing", "cur", OUTPUT, sleep=sleeps, backoff=Backoff(0.1, 2.0, 0.3))
    cols = athena.columns()
    assert cols.kinds["resource_tags"] == "map"
    assert cols.kinds["line_item_usage_start_date"] == "timestamp"
    assert len(sleeps) >= 3 and sleeps[:3] == [0.1, 0.2, 0.3]  # doubling, capped


def test_a_cancelled_query_is_one_clear_error(aws):
    hold_queries(aws, 10**6)
    client = boto3.client("athena", region_name="us-east-1")

    def someone_cancels(seconds: float) -> None:  # e.g. an operator, or Athena's own limits
        for query_id in client.list_query_executions()["QueryExecutionIds"]:
            client.stop_query_execution(QueryExecutionId=query_id)

    athena = AthenaLedger("billing", "cur", OUTPUT, sleep=someone_cancels)
    with pytest.raises(InputError, match=r"query was cancelled: .*\(query [0-9a-f-]+\)") as e:
        athena.query("SELECT 1")
    assert "athena:billing.cur" in str(e.value) and "\n" not in str(e.value)


def test_a_query_that_never_finishes_is_stopped_at_the_timeout(aws):
    hold_queries(aws, 10**6)
    sleeps = Sleeps()
    athena = AthenaLedger("billing", "cur", OUTPUT, sleep=sleeps, backoff=Backoff(1, 2, 4, 20))
    # Athena being slow is no fault of the command line: exit 1 (CommandFailed), not 2
    with pytest.raises(CommandFailed, match="did not finish within 20 s and was stopped") as e:
        athena.query("SELECT 1")
    assert not isinstance(e.value, InputError) and "try again later" in str(e.value)
    assert "athena:billing.cur" in str(e.value) and "\n" not in str(e.value)
    assert sum(sleeps) <= 20
    client = boto3.client("athena", region_name="us-east-1")
    (query_id,) = client.list_query_executions()["QueryExecutionIds"]
    state = client.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]["Status"]
    assert state["State"] == "CANCELLED"


def test_an_unknown_workgroup_is_refused_in_one_line(aws):
    athena = AthenaLedger("billing", "cur", workgroup="nope", sleep=Sleeps())
    with pytest.raises(InputError, match="Athena refused the request: .*WorkGroup does not exist"):
        athena.query("SELECT 1")


def test_rejected_or_expired_credentials_say_so_without_the_keys(aws):
    moto_api(aws, "/moto-api/reset-auth", "0")  # moto now checks keys: ours are unknown to it
    try:
        with pytest.raises(InputError, match="AWS rejected the credentials") as e:
            AthenaLedger("billing", "cur", OUTPUT, sleep=Sleeps()).query("SELECT 1")
    finally:
        moto_api(aws, "/moto-api/reset-auth", "inf")
    text = str(e.value)
    assert "InvalidClientTokenId" in text and "refresh them" in text
    assert not any(secret in text for secret in AWS_SECRETS)


def test_missing_credentials_and_unknown_profiles_are_input_errors(aws, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(InputError, match="no AWS credentials found"):
        AthenaLedger("billing", "cur", OUTPUT, sleep=Sleeps()).query("SELECT 1")
    with pytest.raises(InputError, match="no AWS profile 'ghost'"):
        AthenaLedger("billing", "cur", OUTPUT, profile="ghost").query("SELECT 1")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"database": "", "table": "cur", "output": OUTPUT}, "needs a database and a table"),
        ({"database": "b", "table": "cur", "output": "bucket/x"}, "must be an s3:// URL"),
        ({"database": "b", "table": "cur", "output": None}, "somewhere to write results"),
    ],
)
def test_athena_settings_are_checked_before_any_call(kwargs, match):
    with pytest.raises(InputError, match=match):
        AthenaLedger(kwargs.pop("database"), kwargs.pop("table"), **kwargs)


def test_a_table_athena_does_not_know_is_named(aws):
    register(aws, [pd.DataFrame({"column_name": [], "data_type": []})])
    with pytest.raises(InputError, match="no such table"):
        AthenaLedger("billing", "missing", OUTPUT, sleep=Sleeps()).columns()


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (
            lambda bx: bx.CredentialRetrievalError(provider="sso", error_msg="x"),
            "no AWS credentials",
        ),
        (lambda bx: bx.ReadTimeoutError(endpoint_url="https://athena"), "cannot reach Athena"),
        (
            lambda bx: bx.ClientError({"Error": {"Code": "AuthFailure"}}, "StartQueryExecution"),
            "rejected the credentials",
        ),
    ],
)
def test_every_aws_failure_the_catalog_refresh_knows_is_one_line_here_too(raised, said):
    # the Athena ledger and the catalog refresh sort AWS errors with one table
    # (tables.aws_errors): a failure one of them knew is never a traceback in the other
    from botocore import exceptions as bx

    from srifty_kit.tables.athena import _aws_errors

    with pytest.raises(InputError, match=said), _aws_errors(AthenaLedger("billing", "cur", OUTPUT)):
        raise raised(bx)


@pytest.mark.parametrize(
    ("status", "code"), [(400, "ThrottlingException"), (429, "RequestThrottledException")]
)
def test_throttling_past_the_retries_is_a_failed_command_not_bad_input(status, code):
    # AWS holding calls back is nothing the user typed: the command exits 1 (CommandFailed,
    # which the report's ReportFailed carries), with one line saying so and what to do
    from botocore.stub import Stubber

    ledger = AthenaLedger("billing", "cur", OUTPUT, region="us-east-1", sleep=Sleeps())
    client = boto3.client("athena", region_name="us-east-1", aws_access_key_id="x" * 20,
                          aws_secret_access_key="y" * 40)  # fmt: skip
    stub = Stubber(client)
    stub.add_client_error("start_query_execution", service_error_code=code, http_status_code=status)
    stub.activate()
    ledger._client = client  # the stubbed client in place of the one the ledger would make
    with pytest.raises(CommandFailed) as e:
        ledger.query("SELECT 1")
    assert not isinstance(e.value, InputError)
    line = str(e.value)
    assert "\n" not in line
    assert f"AWS throttled the calls ({code} on StartQueryExecution)" in line
    assert "retry later" in line and "fewer Athena queries at once" in line
