"""What a boto3 failure means for the user, shared by every AWS caller (the catalog refresh,
the Athena ledger). This module sorts errors into what the user can act on and gives the AWS
error code and message redacted (``srifty_kit.tables.redact``): an endpoint that echoes the signed
request must not put a credential in an error line. Each caller words its own fix.

It also says which credentials a process will use, for the redaction of another's output:
``shared_session`` caches temporary credentials (an assumed role's, SSO's) in botocore's file
cache, so that a report's kernel and the process that runs it hold the same ones, and
``remember_resolved`` lets the running process learn them before the kernel starts.

botocore is imported here: import this module only where AWS is about to be called.
"""

from __future__ import annotations

import os
import re

from botocore import exceptions as bx
from botocore.parsers import ResponseParserError

from srifty_kit.tables.ec2_host import on_ec2
from srifty_kit.tables.redact import redact

# error codes meaning "these credentials do not work": renew or replace them
CREDENTIAL_CODES = frozenset(
    {
        "AuthFailure",
        "RequestExpired",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidAccessKeyId",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "MissingAuthenticationToken",
    }
)
PERMISSION_CODES = frozenset({"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"})
# the HTTP status of throttling whatever the code says (botocore retries it as such too)
THROTTLE_STATUS = 429
# how much of AWS's own message an error line quotes (an echoing server can send kilobytes)
MESSAGE_CHARS = 160
# no credentials could be found or read
MISSING_CREDENTIALS = (
    bx.NoCredentialsError,
    bx.PartialCredentialsError,
    bx.CredentialRetrievalError,
)
# an SSO login that has lapsed
EXPIRED_LOGIN = (bx.SSOTokenLoadError, bx.UnauthorizedSSOTokenError, bx.TokenRetrievalError)
# something answered, but not as an AWS API does (not a BotoCoreError: caught on its own)
UNPARSABLE = (ResponseParserError,)
# the endpoint could not be reached or did not answer
ENDPOINT_ERRORS = (
    bx.EndpointConnectionError,
    bx.ConnectTimeoutError,
    bx.ReadTimeoutError,
    bx.ConnectionClosedError,
    bx.SSLError,
)


def error_of(response: dict) -> tuple[str, str]:
    """The AWS error code and message of a ClientError's response, both redacted, the message
    on one line; from the body when an endpoint answered a JSON API with an XML error
    (botocore then reports only the HTTP status as the code)."""
    error = response.get("Error", {})
    code, message = str(error.get("Code", "")), str(error.get("Message", ""))
    if code.isdigit() and "<Code>" in message:
        found = re.search(r"<Code>([^<]+)</Code>", message)
        said = re.search(r"<Message>([^<]*)</Message>", message)
        code = found.group(1) if found else code
        message = said.group(1) if said else ""
    return redact(code), redact(" ".join(message.split()))


def status_of(err: bx.ClientError) -> int:
    """The HTTP status of a ClientError's response (0 when there was none)."""
    return int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def describe(err: bx.ClientError) -> str:
    """A ClientError as one redacted phrase: ``InternalError (HTTP 500) on
    DescribeInstanceTypes: <AWS's message, shortened>``; never botocore's own text."""
    code, message = error_of(err.response)
    status = status_of(err)
    text = f"{code or 'an error'}" + (f" (HTTP {status})" if status else "")
    text += f" on {err.operation_name}"
    if message:
        short = message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 3] + "..."
        text += f": {short}"
    return text


def throttled(err: bx.ClientError) -> bool:
    """Whether AWS answered ``err`` because it throttled the calls (a throttling error code,
    or HTTP 429): nothing the user gave is wrong, so the caller's command exits 1, not 2.

    Args:
        err: the ClientError botocore raised once its retries were spent.

    Returns:
        True for throttling, False for any other error.
    """
    from botocore.retries.standard import RetryContext, ThrottledRetryableChecker

    # botocore's own list of throttling codes, the one its standard retry mode retries on:
    # one that reaches here outlasted the retries
    context = RetryContext(attempt_number=1, parsed_response=err.response)
    return ThrottledRetryableChecker().is_retryable(context) or status_of(err) == THROTTLE_STATUS


def throttled_said(err: bx.ClientError, attempts: int | None = None) -> str:
    """The problem half of a throttled call's one line, the same for every caller: 'AWS
    throttled the calls (RequestLimitExceeded on DescribeInstanceTypeOfferings, still after
    8 attempts)'; each caller adds its own fix.

    Args:
        err: a ClientError for which ``throttled`` is True.
        attempts: how many attempts botocore made (None: not said).

    Returns:
        The phrase, redacted like ``describe``.
    """
    code, _ = error_of(err.response)
    status = status_of(err)
    what = code or (f"HTTP {status}" if status else "throttling")
    tries = f", still after {attempts} attempts" if attempts else ""
    return f"AWS throttled the calls ({what} on {err.operation_name}{tries})"


def describe_other(err: BaseException) -> str:
    """A botocore error that is not a ClientError (a response that cannot be parsed, a bad
    parameter) as one redacted phrase: its class and its message's first line, shortened."""
    lines = str(err).strip().splitlines()
    first = redact(" ".join(lines[0].split())) if lines else ""
    if len(first) > MESSAGE_CHARS:
        first = first[: MESSAGE_CHARS - 3] + "..."
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


_KEY_FIELDS = (
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_security_token",
)


def remember_profile(profile: str | None) -> None:
    """Add the keys a profile's files hold (``~/.aws/credentials`` and ``config``, or the
    files AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE name) to what ``redact`` masks.

    Files only, no credential provider is called (no network, no SSO, no role): for a process
    that does not call AWS itself but keeps what a kernel that does prints (the weekly report).

    Args:
        profile: the profile name (None: AWS_PROFILE, else ``default``).
    """
    import botocore.configloader
    import botocore.session

    from srifty_kit.tables import redact

    session = botocore.session.Session(profile=profile)
    name = profile or session.get_config_variable("profile") or "default"
    found: list[dict] = []
    try:
        found.append(session.get_scoped_config())
    except (bx.BotoCoreError, OSError):  # no such profile, an unreadable file: nothing to add
        pass
    try:
        files = botocore.configloader.raw_config_parse(
            session.get_config_variable("credentials_file")
        )
        found.append(files.get(name, {}))
    except (bx.BotoCoreError, OSError):
        pass
    for values in found:
        redact.remember(*(values.get(k) for k in _KEY_FIELDS))


# providers whose temporary credentials differ at each call (a new AssumeRole, a new SSO role
# session): cached in a file, a second process reads the first one's instead of getting its own
_CACHED_PROVIDERS = ("assume-role", "assume-role-with-web-identity", "sso")


def _share_cache(session) -> None:
    """Point the credential providers that call AWS for temporary credentials at botocore's
    file cache (``~/.aws/boto/cache``, owner-only files), shared by every process of the
    user that builds its session here."""
    from botocore.utils import JSONFileCache

    resolver = session.get_component("credential_provider")
    # botocore's default folder, found now: its own default is fixed when botocore is imported
    cache = JSONFileCache(os.path.expanduser(os.path.join("~", ".aws", "boto", "cache")))
    for name in _CACHED_PROVIDERS:
        provider = resolver.get_provider(name)
        if provider is not None:
            provider.cache = cache


def shared_session(profile: str | None = None, region: str | None = None):
    """A boto3 session for ``profile`` whose temporary credentials (assumed role, web
    identity, SSO) are read from and written to botocore's file cache: a report's kernel and
    the process that runs the report (``remember_resolved``) hold the same credentials, so
    the latter can mask what the kernel prints.

    Args:
        profile: the AWS profile (None: AWS_PROFILE, else the default chain).
        region: the region (None: the profile's or AWS_DEFAULT_REGION).

    Returns:
        A ``boto3.Session``.

    Raises:
        botocore.exceptions.ProfileNotFound: no such profile.
    """
    import boto3

    session = boto3.Session(profile_name=profile, region_name=region)
    _share_cache(session._session)  # boto3 keeps its botocore session there
    return session


def _metadata_may_answer(session) -> bool:
    """Whether botocore's instance metadata provider can answer ``session`` without waiting
    on an address that is not there: metadata is not disabled (AWS_EC2_METADATA_DISABLED)
    and either botocore is pointed at an endpoint (AWS_EC2_METADATA_SERVICE_ENDPOINT or the
    profile's ``ec2_metadata_service_endpoint``) or this host is an EC2 instance."""
    if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return False
    return bool(session.get_config_variable("ec2_metadata_service_endpoint")) or on_ec2()


def remember_resolved(profile: str | None = None) -> None:
    """Add the credentials a process using ``shared_session(profile)`` will get (an SSO
    login's, an assumed role's, a ``credential_process``'s, an EC2 instance role's, an ECS
    task's or EKS pod's container role's, besides the keys a profile's files hold:
    ``remember_profile``) to what ``redact`` masks in this one: for a process that keeps what
    a kernel that calls AWS prints (a report).

    botocore's own credential chain is resolved here, with its own metadata timeout and
    attempts. Its EC2 instance metadata provider is kept only where it can answer
    (``_metadata_may_answer``: on an EC2 instance, ``on_ec2``, or with a metadata endpoint
    set, and not disabled): elsewhere, with nothing configured, it would wait on the network
    for an answer that never comes. The container provider asks only when
    AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI is set. Off EC2 with nothing
    configured this reads a few files and touches no network, starts no process. A chain
    that fails here adds nothing: the kernel says so itself.

    Args:
        profile: the profile name (None: AWS_PROFILE, else the default chain).
    """
    import botocore.session

    from srifty_kit.tables import redact

    remember_profile(profile)
    try:
        session = botocore.session.Session(profile=profile)
        _share_cache(session)
        resolver = session.get_component("credential_provider")
        if not _metadata_may_answer(session):
            resolver.remove("iam-role")
        credentials = resolver.load_credentials()
    except (bx.BotoCoreError, bx.ClientError, OSError, ValueError):
        return
    redact.remember_credentials(credentials)
