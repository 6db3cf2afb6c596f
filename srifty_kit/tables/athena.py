"""Amazon Athena as a ledger engine: the weekly SQL of ``tables.ledger`` run over a CUR or
FOCUS table in S3, through boto3 (start_query_execution, polling with backoff, the
get_query_results paginator). Only the small aggregated results travel back.

Every AWS failure a user can fix (credentials missing, rejected or expired, access denied, an
unknown workgroup, a query that failed or was cancelled) is one ``InputError`` whose text names
the AWS error code and the fix; one the user cannot (a server error, throttling past the
retries, an answer botocore cannot use, a query still running at the polling timeout, which
is stopped) is a ``CommandFailed``. AWS's messages are redacted
(``srifty_kit.tables.redact``): credentials never appear in either.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pandas as pd

from srifty_kit.errors import CommandFailed, InputError
from srifty_kit.tables.usage_sql import ATHENA, SourceColumns, literal, quote

_NUMBER_TYPES = ("double", "float", "real", "decimal")
_INTEGER_TYPES = ("bigint", "integer", "int", "smallint", "tinyint")


@dataclass(frozen=True)
class Backoff:
    """Polling schedule: first wait, growth factor, longest wait, and when to give up."""

    first_s: float = 0.25
    factor: float = 2.0
    max_s: float = 5.0
    timeout_s: float = 900.0

    def waits(self) -> list[float]:
        """The successive waits, summing to at most ``timeout_s``."""
        out, wait, total = [], self.first_s, 0.0
        while total + wait <= self.timeout_s:
            out.append(wait)
            total += wait
            wait = min(wait * self.factor, self.max_s)
        return out


class AthenaLedger:
    """A ledger table in Athena's catalog (e.g. the CUR table AWS creates for a CUR export).

    ``output`` is the S3 location Athena writes results to (``s3://bucket/prefix/``);
    ``profile`` and ``region`` choose the AWS credentials and region as the AWS CLI does.
    """

    dialect = ATHENA

    def __init__(
        self,
        database: str,
        table: str,
        output: str | None = None,
        *,
        workgroup: str | None = None,
        profile: str | None = None,
        region: str | None = None,
        catalog: str = "AwsDataCatalog",
        backoff: Backoff = Backoff(),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not database or not table:
            raise InputError(
                "Athena needs a database and a table",
                fix="give --athena-database and --athena-table",
            )
        if output is not None and not str(output).startswith("s3://"):
            raise InputError(
                f"the Athena output location must be an s3:// URL, got {output!r}",
                fix="e.g. --athena-output s3://my-bucket/athena-results/",
            )
        if output is None and workgroup is None:
            raise InputError(
                "Athena needs somewhere to write results",
                fix="give --athena-output s3://BUCKET/PREFIX/ or a --athena-workgroup that has one",
            )
        self.database, self.table, self.output = database, table, output
        self.workgroup, self.profile, self.region, self.catalog = (
            workgroup,
            profile,
            region,
            catalog,
        )
        self.backoff, self._sleep = backoff, sleep
        self.label = f"athena:{database}.{table}"
        self._client = None

    # ------------------------------------------------------------------ LedgerEngine

    def relation(self) -> str:
        """The table, quoted."""
        return f"{quote(self.database)}.{quote(self.table)}"

    def columns(self) -> SourceColumns:
        """The table's columns and types, from information_schema."""
        rows = self.query(
            "SELECT column_name, data_type FROM information_schema.columns "
            f"WHERE table_schema = {literal(self.database.lower())} "
            f"AND table_name = {literal(self.table.lower())} ORDER BY ordinal_position"
        )
        if rows.empty:
            raise InputError(
                "Athena has no such table (or it has no columns)",
                source=self.label,
                fix="check --athena-database and --athena-table (e.g. in the Athena console)",
            )
        return SourceColumns.from_types(zip(rows["column_name"], rows["data_type"], strict=True))

    def query(self, sql: str) -> pd.DataFrame:
        """Run ``sql`` in Athena, wait for it, and read its result pages into a DataFrame."""
        with _aws_errors(self):
            client = self._athena()
            request = {
                "QueryString": sql,
                "QueryExecutionContext": {"Database": self.database, "Catalog": self.catalog},
            }
            if self.output:
                request["ResultConfiguration"] = {"OutputLocation": self.output}
            if self.workgroup:
                request["WorkGroup"] = self.workgroup
            execution_id = client.start_query_execution(**request)["QueryExecutionId"]
            self._wait(client, execution_id)
            return _read_results(client, execution_id)

    # ------------------------------------------------------------------ internals

    def _athena(self):
        if self._client is None:
            from botocore.config import Config

            from srifty_kit.tables import redact
            from srifty_kit.tables.aws_errors import shared_session

            # botocore's debug records hold signed headers; a profile's keys are masked too
            redact.install_logging()
            # in a report's kernel: the same temporary credentials as the process that runs
            # the report resolved, so that it masks them (aws_errors.remember_resolved)
            session = shared_session(self.profile, self.region)
            redact.remember_credentials(session.get_credentials())
            config = Config(retries={"max_attempts": 8, "mode": "adaptive"})
            self._client = session.client("athena", config=config)
        return self._client

    def _wait(self, client, execution_id: str) -> None:
        for wait in [0.0, *self.backoff.waits()]:
            if wait:
                self._sleep(wait)
            status = client.get_query_execution(QueryExecutionId=execution_id)
            state = status["QueryExecution"]["Status"]
            if state["State"] == "SUCCEEDED":
                return
            if state["State"] in ("FAILED", "CANCELLED"):
                reason = state.get("StateChangeReason") or "no reason given"
                raise InputError(
                    f"the Athena query was {state['State'].lower()}: {reason} "
                    f"(query {execution_id})",
                    source=self.label,
                    fix="check that the table is a CUR or FOCUS export and that the "
                    "workgroup can read it (the query's text is in the Athena console)",
                )
        client.stop_query_execution(QueryExecutionId=execution_id)
        # nothing the user gave is wrong: Athena was slow or queued (exit 1, not 2)
        raise CommandFailed(
            f"{self.label}: the Athena query did not finish within "
            f"{self.backoff.timeout_s:.0f} s and was stopped (query {execution_id}); to fix: "
            "try again later (the workgroup's other queries may hold its capacity)"
        )


def _read_results(client, execution_id: str) -> pd.DataFrame:
    """Every page of a query's results; Athena sends the header as the first row."""
    names: list[str] = []
    types: list[str] = []
    rows: list[list[str | None]] = []
    pages = client.get_paginator("get_query_results").paginate(QueryExecutionId=execution_id)
    for number, page in enumerate(pages):
        result = page["ResultSet"]
        if number == 0:
            info = result.get("ResultSetMetadata", {}).get("ColumnInfo", [])
            names = [c.get("Label") or c["Name"] for c in info]
            types = [c.get("Type", "varchar").lower() for c in info]
        data = [[cell.get("VarCharValue") for cell in row["Data"]] for row in result["Rows"]]
        if number == 0 and data and data[0] == names:
            data = data[1:]
        rows.extend(data)
    frame = pd.DataFrame(rows, columns=names)
    for name, kind in zip(names, types, strict=True):
        frame[name] = _typed(frame[name], kind)
    return frame


def _typed(values: pd.Series, kind: str) -> pd.Series:
    """Athena's text cells as the column's type says."""
    if kind.startswith(_NUMBER_TYPES):
        return pd.to_numeric(values, errors="coerce").astype("float64")
    if kind.startswith(_INTEGER_TYPES):
        return pd.to_numeric(values, errors="coerce").astype("Int64")
    if kind.startswith(("timestamp", "date")):
        return pd.to_datetime(values, errors="coerce")
    if kind == "boolean":
        return values.map({"true": True, "false": False})
    return values.astype(object).where(values.notna(), None)


@contextmanager
def _aws_errors(ledger: AthenaLedger) -> Iterator[None]:
    """Turns what AWS says about credentials, access and requests into one InputError."""
    from botocore import exceptions as bx

    from srifty_kit.tables import aws_errors

    profile = f" (profile {ledger.profile!r})" if ledger.profile else ""
    refresh = "refresh them (aws sso login, or new keys in the profile) and run again"
    try:
        yield
    except aws_errors.MISSING_CREDENTIALS:
        raise InputError(
            f"no AWS credentials found{profile}",
            source=ledger.label,
            fix="give --aws-profile NAME or set up credentials as for the AWS CLI",
        ) from None
    except bx.ProfileNotFound:
        raise InputError(
            f"no AWS profile {ledger.profile!r}",
            source=ledger.label,
            fix="check the name in ~/.aws/config",
        ) from None
    except aws_errors.EXPIRED_LOGIN:
        raise InputError(
            f"the AWS login{profile} has expired", source=ledger.label, fix=refresh
        ) from None
    except aws_errors.ENDPOINT_ERRORS as err:
        raise InputError(
            f"cannot reach Athena at {getattr(err, 'kwargs', {}).get('endpoint_url', '?')}",
            source=ledger.label,
            fix="check the network and --aws-region",
        ) from None
    except bx.ClientError as err:
        code, message = aws_errors.error_of(err.response)
        if code in aws_errors.CREDENTIAL_CODES:
            raise InputError(
                f"AWS rejected the credentials{profile}: {code} (missing, wrong or expired)",
                source=ledger.label,
                fix=refresh,
            ) from None
        if code in aws_errors.PERMISSION_CODES:
            raise InputError(
                f"AWS denied access{profile}: {message or code}",
                source=ledger.label,
                fix="the role needs athena:StartQueryExecution, GetQueryExecution, "
                "GetQueryResults, glue:GetTable and s3 read/write on the output location",
            ) from None
        if aws_errors.throttled(err):  # the account's call rate, not the command: exit 1
            raise CommandFailed(
                f"{ledger.label}: {aws_errors.throttled_said(err)}; to fix: retry later, or "
                "run fewer Athena queries at once in the workgroup"
            ) from None
        status = aws_errors.status_of(err)
        if not 400 <= status < 500:
            raise CommandFailed(
                f"{ledger.label}: Athena failed: {aws_errors.describe(err)}; to fix: retry later"
            ) from None
        raise InputError(
            f"Athena refused the request: {aws_errors.describe(err)}",
            source=ledger.label,
            fix="check --athena-database, --athena-table, --athena-workgroup and --athena-output",
        ) from None
    except aws_errors.UNPARSABLE as err:  # something answered, but not as AWS does
        raise InputError(
            f"the answer is not an Athena response ({aws_errors.describe_other(err)})",
            source=ledger.label,
            fix="check the endpoint (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_ATHENA) and --aws-region",
        ) from None
    except bx.BotoCoreError as err:
        raise CommandFailed(
            f"{ledger.label}: the Athena call failed ({aws_errors.describe_other(err)})"
        ) from None
